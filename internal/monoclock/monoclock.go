// Package monoclock is the default clock of sluice's engines: wall time that
// advances with the monotonic clock only. A step of the system's wall clock
// (NTP, a suspended VM, an operator) therefore never moves it backwards, which
// a bucket would read as stale time and answer with a long denial.
package monoclock

import "time"

var (
	base   = time.Now()
	baseNs = base.UnixNano()
)

// Now returns the instant base + the monotonic time elapsed since base, as
// a wall-clock Time without a monotonic reading (the engines convert it to
// nanoseconds at once). Built with time.Unix from one monotonic read, it
// costs about two thirds of base.Add(time.Since(base)), whose Add carries
// both readings forward. The clock is the largest single stage of a
// one-limit decision (BenchmarkStagesOneLimit).
func Now() time.Time { return time.Unix(0, baseNs+int64(time.Since(base))) }

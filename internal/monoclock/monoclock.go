// Package monoclock is the default clock of sluice's engines: wall time that
// advances with the monotonic clock only. A step of the system's wall clock
// (NTP, a suspended VM, an operator) therefore never moves it backwards, which
// a bucket would read as stale time and answer with a long denial.
package monoclock

import "time"

var base = time.Now()

// Now returns the instant base + the monotonic time elapsed since base.
func Now() time.Time { return base.Add(time.Since(base)) }

// Package monoclock is the default sluice.Clock of every sluice engine: wall
// time that advances with the monotonic clock only, and sleeps on a real
// timer. A step of the system's wall clock (NTP, a suspended VM, an
// operator) therefore never moves it backwards, which a bucket would read as
// stale time and answer with a long denial.
package monoclock

import (
	"context"
	"time"
)

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

// Nanos returns Now as Unix nanoseconds, without building a Time.
func Nanos() int64 { return baseNs + int64(time.Since(base)) }

// Sleep waits d on a real timer, or until ctx is done (then ctx.Err()).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Clock is the default clock as a value: it satisfies sluice.Clock.
type Clock struct{}

// Now returns monoclock.Now().
func (Clock) Now() time.Time { return Now() }

// Sleep calls monoclock.Sleep.
func (Clock) Sleep(ctx context.Context, d time.Duration) error { return Sleep(ctx, d) }

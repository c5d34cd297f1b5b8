package sluice

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/monoclock"
)

// Clock is the time source of every sluice engine: bucket, category, stack,
// pace, otelmetric, the Redis backend and envoyrls all take one through an
// option named WithClock, and a nil Clock means the default.
//
// The default reads wall time advanced by the monotonic clock only (taken
// once at start, then moved by the monotonic reading), so a step of the
// system's wall clock never moves an engine's time backwards, and sleeps on
// a real timer.
//
// Tests pass a manual clock, such as stack/limitertest.Clock, whose Sleep
// advances its own time instead of waiting.
type Clock interface {
	// Now returns the current instant.
	Now() time.Time
	// Sleep waits until d has passed on this clock or ctx is done, and
	// then returns ctx.Err(). A d ≤ 0 returns at once (ctx.Err() if done).
	Sleep(ctx context.Context, d time.Duration) error
}

// ClockFunc adapts a function that returns the current instant to a Clock:
// Now calls it, and Sleep waits d on a real timer (or until ctx is done).
// It is for code that drives time itself, such as a test or a demo that
// moves its instant by hand: stack.WithClock(sluice.ClockFunc(now)).
type ClockFunc func() time.Time

// Now returns f().
func (f ClockFunc) Now() time.Time { return f() }

// Sleep waits d on a real timer, or until ctx is done, and returns
// ctx.Err(); a d ≤ 0 returns at once.
func (f ClockFunc) Sleep(ctx context.Context, d time.Duration) error {
	return monoclock.Sleep(ctx, d)
}

package sluice

import (
	"context"
	"time"
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

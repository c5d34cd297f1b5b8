package main

import (
	"context"
	"time"
)

// clockFunc lets the example's clock function serve as a sluice.Clock
// (stack.WithClock and the like take one). Sleep waits on a real timer.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

func (f clockFunc) Sleep(ctx context.Context, d time.Duration) error {
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

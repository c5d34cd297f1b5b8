package redis_test

import (
	"context"
	"time"
)

// clockFunc lets a func() time.Time serve as a sluice.Clock where a test
// moves its instant by hand. Sleep waits on a real timer; the engines these
// tests give it to never sleep.
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

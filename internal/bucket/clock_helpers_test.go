package bucket_test

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/stack/limitertest"
)

func newFakeClock() *limitertest.Clock {
	return limitertest.NewClock(time.Date(2036, time.March, 1, 12, 0, 0, 0, time.UTC))
}

// sleepClock is a clock whose Sleep is the test's own (a cancellation, a
// scheduler's answer), with the time of the clock it wraps.
type sleepClock struct {
	*limitertest.Clock
	sleep func(ctx context.Context, d time.Duration) error
}

func (c sleepClock) Sleep(ctx context.Context, d time.Duration) error { return c.sleep(ctx, d) }

package httplimit_test

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// clockLimiter is a real per-value token bucket (limitertest.PerValue) on a
// clock the tests move by hand.
type clockLimiter struct {
	sluice.Limiter
	clock *limitertest.Clock
}

func newClockLimiter(dim string, burst int, interval time.Duration) *clockLimiter {
	c := limitertest.NewClock(limitertest.Start)
	return &clockLimiter{limitertest.PerValue(c, dim, burst, interval), c}
}

func (c *clockLimiter) advance(d time.Duration) { c.clock.Advance(d) }

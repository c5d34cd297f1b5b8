package grpclimit_test

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// clockLimiter is a real GCRA limiter per value of one dimension, on an
// explicit clock that tests move by hand. It stands in for the engine.
type clockLimiter struct {
	mu       sync.Mutex
	now      time.Time
	dim      string
	burst    int64
	interval time.Duration // time to earn one unit
	tat      map[string]time.Time
}

func newClockLimiter(dim string, burst int64, interval time.Duration) *clockLimiter {
	return &clockLimiter{now: time.Unix(1_700_000_000, 0), dim: dim, burst: burst, interval: interval, tat: map[string]time.Time{}}
}

func (c *clockLimiter) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *clockLimiter) Allow(ctx context.Context, keys sluice.Keys) (sluice.Decision, error) {
	if err := ctx.Err(); err != nil {
		return sluice.Decision{}, err
	}
	v, ok := keys.Get(c.dim)
	if !ok {
		return sluice.Decision{Allowed: true}, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tat := c.tat[v]
	if tat.Before(c.now) {
		tat = c.now
	}
	next := tat.Add(c.interval)
	window := time.Duration(c.burst) * c.interval
	allowAt := next.Add(-window)
	d := sluice.Decision{LimitID: "per-" + c.dim, Metric: sluice.MetricRequests, Limit: c.burst, Window: window}
	if c.now.Before(allowAt) {
		d.RetryAfter = allowAt.Sub(c.now)
		d.LimitKey = d.LimitID + "/" + c.dim + "=" + v
		d.MatchedEntry = []string{"*"}
		d.ResolvedValues = []string{v}
		d.Remaining = 0
		return d, nil
	}
	c.tat[v] = next
	d.Allowed = true
	d.Remaining = int64((window - next.Sub(c.now)) / c.interval)
	return d, nil
}

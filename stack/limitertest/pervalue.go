package limitertest

import (
	"context"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/bucket"
)

// NewPerValue returns a Limiter that gives each value of the dimension dim
// its own token bucket (a real bucket.Table) of burst units, refilled one
// unit per interval, and the Clock it reads, a new one set to Start: a test
// moves time with clock.Advance instead of sleeping, and every run makes
// the same decisions. A request without dim is allowed.
//
// It is for testing code that consumes a sluice.Limiter (middleware,
// renderers) without building a configuration: its decisions have the shape
// a stack's have, with LimitID "per-<dim>", LimitKey "per-<dim>/<dim>=<v>",
// metric "requests", MatchedEntry ["*"] and ResolvedValues [v].
//
//	lim, clock := limitertest.NewPerValue("caller", 2, 500*time.Millisecond) // burst 2, 2 per second
//	// … two requests from one caller pass, a third is throttled for 500ms …
//	clock.Advance(500 * time.Millisecond) // … and now one more passes
func NewPerValue(dim string, burst int, interval time.Duration) (sluice.Limiter, *Clock) {
	clock := NewClock(Start)
	return &perValue{clock: clock, dim: dim, id: "per-" + dim, burst: int64(burst),
		window: time.Duration(burst) * interval, table: bucket.NewTable(rate.Every(interval), burst)}, clock
}

type perValue struct {
	clock  *Clock
	dim    string
	id     string
	burst  int64
	window time.Duration
	table  *bucket.Table
}

func (p *perValue) Allow(ctx context.Context, keys sluice.Keys) (sluice.Decision, error) {
	if err := ctx.Err(); err != nil {
		return sluice.Decision{}, err
	}
	v, ok := keys.Get(p.dim)
	if !ok {
		return sluice.Decision{Allowed: true}, nil
	}
	res := p.table.TakeAt(p.clock.Now(), v, 1)
	d := sluice.Decision{Allowed: res.OK, LimitID: p.id, Metric: sluice.MetricRequests, Limit: p.burst, Remaining: max(res.Remaining, 0), Window: p.window}
	if res.OK {
		return d, nil
	}
	d.RetryAfter, d.Permanent, d.OverBurst = res.RetryAfter, res.Permanent, res.OverBurst && p.burst > 0
	d.LimitKey = p.id + "/" + p.dim + "=" + v
	d.MatchedEntry = []string{"*"}
	d.ResolvedValues = []string{v}
	return d, nil
}

package bucket

import (
	"context"
	"time"
)

// Clock is the time source of a Bucket: Now for Allow, Tokens, SetLimit,
// SetBurst and Wait, and Sleep for Wait. A fake Clock whose Sleep advances
// its own time lets tests drive Wait without sleeping.
type Clock interface {
	// Now returns the current instant.
	Now() time.Time
	// Sleep blocks until d has passed on this clock or ctx is done, and
	// returns ctx.Err() in the latter case.
	Sleep(ctx context.Context, d time.Duration) error
}

// systemClock is the real time.
type systemClock struct{}

// Now is the wall clock advanced by the monotonic clock only, like Allow's
// sysNow: a wall-clock step never moves a bucket's time backwards.
func (systemClock) Now() time.Time { return sysBase.Add(time.Since(sysBase)) }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Option configures New and NewTable.
type Option interface{ apply(*config) }

type config struct {
	clock  Clock
	shards int
}

type clockOption struct{ c Clock }

func (o clockOption) apply(cfg *config) {
	if o.c != nil {
		cfg.clock = o.c
	}
}

// WithClock sets the clock used by Allow, Tokens, SetLimit, SetBurst and
// Wait (default: the real time). A nil Clock is ignored.
func WithClock(c Clock) Option { return clockOption{c} }

type shardsOption int

func (o shardsOption) apply(cfg *config) { cfg.shards = int(o) }

// WithShards sets the number of shards of a Table, rounded up to a power of
// two between 1 and 4096 (default: 16 per CPU, at least 64). New ignores it.
func WithShards(n int) Option { return shardsOption(n) }

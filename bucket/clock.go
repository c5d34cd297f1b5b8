package bucket

import (
	"context"
	"time"
)

// sysTime is the system clock for methods that need a time.Time: the wall
// clock advanced by the monotonic clock only, like sysNow, so a wall-clock
// step never moves a bucket's time backwards.
func sysTime() time.Time { return sysBase.Add(time.Since(sysBase)) }

// sysSleep is the real sleep of Wait.
func sysSleep(ctx context.Context, d time.Duration) error {
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
	now    func() time.Time // nil: the system clock
	sleep  func(ctx context.Context, d time.Duration) error
	shards int
	budget *Budget
}

type optionFunc func(*config)

func (f optionFunc) apply(cfg *config) { f(cfg) }

// WithClock sets the time source of the methods that read the current
// instant: Bucket.Allow, Tokens, SetLimit, SetBurst and Wait, and
// Table.Allow and Table.Take (default: the system clock, read through the
// monotonic clock). A nil now means the default. Every other method takes
// an explicit instant.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(cfg *config) {
		if now != nil {
			cfg.now = now
		}
	})
}

// WithSleep sets how Bucket.Wait sleeps (default: a real timer). sleep must
// block until d has passed on the bucket's clock or ctx is done, and return
// ctx.Err() in the latter case. A test clock whose sleep advances its own
// time drives Wait without sleeping. A nil sleep means the default;
// NewTable ignores this option.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return optionFunc(func(cfg *config) {
		if sleep != nil {
			cfg.sleep = sleep
		}
	})
}

// WithShards sets the largest number of shards a Table splits into, rounded
// up to a power of two; n ≤ 0 means the default, 16, and n above 4096
// means 4096. A Table starts with one shard and splits when it grows past a
// few hundred live keys, so a small Table stays small. New ignores this
// option.
func WithShards(n int) Option {
	return optionFunc(func(cfg *config) {
		if n > 0 {
			cfg.shards = n
		}
	})
}

// WithBudget makes a Table count its live buckets against b, shared with
// every other Table given the same Budget. A nil b means the default: no
// Budget, the Table's live buckets are not bounded (idle ones are still
// reclaimed). New ignores this option. See Budget for the policy when it
// is full.
func WithBudget(b *Budget) Option {
	return optionFunc(func(cfg *config) {
		if b != nil {
			cfg.budget = b
		}
	})
}

func newConfig(opts []Option) config {
	var cfg config
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	return cfg
}

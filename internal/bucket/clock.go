package bucket

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/monoclock"
)

// clockNow is c's reading; a nil c is monoclock.
func clockNow(c sluice.Clock) time.Time {
	if c == nil {
		return monoclock.Now()
	}
	return c.Now()
}

// Option configures New and NewTable.
type Option interface{ apply(*config) }

type config struct {
	clock  sluice.Clock // nil: monoclock
	shards int
	budget *Budget
}

type optionFunc func(*config)

func (f optionFunc) apply(cfg *config) { f(cfg) }

// WithClock sets the clock of the methods that read the current instant
// (Bucket.Allow, Tokens, SetLimit, SetBurst, Wait and WaitN, which also
// sleeps on it, and Table.Allow, AllowBytes and Take). A nil clock means
// the default, internal/monoclock. Every other method takes an explicit
// instant.
func WithClock(c sluice.Clock) Option {
	return optionFunc(func(cfg *config) {
		if c != nil {
			cfg.clock = c
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

// NowNs is the default clock (internal/monoclock) read as the instant the
// …Ns methods take: nanoseconds since this package's epoch, from one
// monotonic read, without building a time.Time. NsOf(monoclock.Now())
// would give the same instant.
func NowNs() int64 { return sysNow() }

// NsOf converts t to the instant the …Ns methods take; a take at NsOf(t)
// is the take at t (TakeN, TryTakeGrant…), which convert the same way.
func NsOf(t time.Time) int64 { return nsOf(t) }

// TimeOfNs is the instant ns (from NowNs, or NsOf of a time within about
// 285 years of 2000) as a Time without a monotonic reading: for NowNs's,
// exactly what monoclock.Now returns at that reading.
func TimeOfNs(ns int64) time.Time { return time.Unix(0, ns+epochUnixNs) }

package bucket

import (
	"time"

	ib "github.com/sluicehq/sluice/internal/bucket"
	"golang.org/x/time/rate"
)

// Table is a set of buckets, one per key, all with the same rate and burst:
// per-caller (per-tenant, per-IP, …) limits, where one would otherwise keep
// a map of x/time/rate limiters. A key's bucket is created full on first
// use. Its methods follow Bucket's, with the key after the instant:
// AllowAt(t, key, n), TakeAt(t, key, n), TokensAt(t, key); the methods
// whose names do not end in At read the Table's clock (WithClock).
//
// # Memory
//
// A key is never stored: the Table keeps a keyed 128-bit digest of it in a
// fixed 24-byte slot with the bucket's state, so its memory is the same
// whatever the length of the keys callers send: 32 to 64 bytes per live
// bucket, plus a few hundred bytes per Table. Two keys share a bucket only
// if their digests collide, which callers cannot aim at (for n keys live at
// once the chance of any collision is at most about n²/2¹²⁹).
//
// A full bucket carries no state, so it can be dropped without changing any
// decision: buckets that have been full for a second are reclaimed by
// sweeps amortised over the Table's operations (no goroutine runs in the
// background), so memory follows the keys that are actually limited and
// comes back when they go idle. Dropping is conservative: a key whose
// bucket was dropped never gets more than the dropped bucket would have
// given. With a rate of zero buckets never become full again and are never
// dropped: bound such a Table with a Budget (WithBudget).
//
// # Concurrency
//
// A Table is not lock-free: it starts as one shard and splits into 16 once
// it holds a few hundred keys; each operation locks the shard its key falls
// in for the lookup and the take, and never allocates except to resize an
// array.
//
// Table is safe for concurrent use. The zero Table is not usable: make one
// with NewTable.
type Table struct{ t ib.Table }

// NewTable returns a Table of buckets refilled at r tokens per second
// holding at most b tokens each. r and b have New's meanings, and the same
// values panic (naming the argument). Options: WithClock, WithBudget; a nil
// Option is ignored.
func NewTable(r rate.Limit, b int, opts ...Option) *Table {
	checkArgs("bucket.NewTable", r, b)
	cfg := newConfig(opts)
	iopts := []ib.Option{ib.WithClock(cfg.clock)}
	if cfg.budget != nil {
		iopts = append(iopts, ib.WithBudget(&cfg.budget.b))
	}
	t := new(Table)
	t.t.Init(r, b, iopts...)
	return t
}

// Allow reports whether one token may be taken now from key's bucket, and
// takes it if so.
func (t *Table) Allow(key string) bool { return t.t.Allow(key) }

// AllowN reports whether n tokens may be taken now from key's bucket, and
// takes them if so. See AllowAt.
func (t *Table) AllowN(key string, n int) bool { return t.t.AllowNow(key, n) }

// AllowAt reports whether n tokens may be taken at at from key's bucket,
// and takes them if so; n has the meaning of Bucket.AllowAt. A take that
// cannot change the bucket (n ≤ 0, or more than the burst) does not create
// it.
func (t *Table) AllowAt(at time.Time, key string, n int) bool { return t.t.AllowN(at, key, n) }

// TakeN takes n tokens now from key's bucket; see TakeAt.
func (t *Table) TakeN(key string, n int) Result { return result(t.t.Take(key, n)) }

// TakeAt takes n tokens at at from key's bucket, creating it if needed,
// and reports the outcome as Bucket.TakeAt does. When the Table's Budget
// has no room for a new bucket the result has BudgetFull set; see Budget.
func (t *Table) TakeAt(at time.Time, key string, n int) Result {
	return result(t.t.TakeN(at, key, n))
}

// GiveBack returns n of the tokens that the take of key which made g took,
// and counts them off g; see Bucket.GiveBack and Grant. A Table bounds a
// give-back by the latest instant of any take on the key's shard (other
// keys share it), so it is exact when no take on the shard, before or
// since, has used a later instant than g's take. A key whose bucket was
// reclaimed since (it had refilled to full) gets nothing back; the tokens
// still count off g.
//
// It returns an error matching ErrGiveBack, and gives nothing back, when
// n is negative or more than g.Outstanding(), when g records no take, or
// when g is from another key (or, almost surely, another Table).
func (t *Table) GiveBack(key string, g *Grant, n int) error { return t.t.GiveBack(key, &g.g, n) }

// TokensAt returns the tokens key's bucket holds at at, without creating
// it.
func (t *Table) TokensAt(at time.Time, key string) float64 { return t.t.TokensAt(at, key) }

// Len returns the number of keys that have a bucket (live keys; reclaimed
// full buckets are not counted).
func (t *Table) Len() int { return t.t.Len() }

// Limit returns the refill rate of every bucket.
func (t *Table) Limit() rate.Limit { return t.t.Limit() }

// Burst returns the capacity of every bucket.
func (t *Table) Burst() int { return t.t.Burst() }

// Budget bounds the live buckets of every Table made with WithBudget(b),
// together, so that what callers send cannot make the Tables hold more
// than max buckets.
//
// A bucket is only ever dropped when it is full (it has refilled, so
// dropping it changes no decision); a bucket that holds less than its
// burst is never evicted, since forgetting it would admit more than the
// limit. When a take needs a new bucket and the Budget is full, the Table
// first reclaims refilled buckets (bounded work per take, across the
// Tables sharing the Budget). If that frees nothing, the take is denied:
// its Result has BudgetFull set, OK false, Remaining 0, and RetryAfter the
// time one bucket of this Table takes to refill from empty (burst/rate;
// one second when the rate is zero), by which every bucket of it has
// refilled and can be reclaimed; with a bound of zero, Permanent instead.
// The denial creates nothing. A key that already has a bucket is never
// denied for lack of room.
//
// Tables sharing a Budget must be driven with instants from one clock.
//
// The zero Budget is a Budget of no buckets, as NewBudget(0): every take on
// a key without a bucket is denied.
type Budget struct{ b ib.Budget }

// NewBudget returns a Budget of at most max live buckets (max ≤ 0: none,
// so every take on a key without a bucket is denied, Permanent).
func NewBudget(max int) *Budget {
	b := new(Budget)
	b.b.SetMax(max)
	return b
}

// Len returns the number of live buckets counted against the Budget.
func (b *Budget) Len() int { return b.b.Len() }

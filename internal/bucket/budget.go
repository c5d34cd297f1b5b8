package bucket

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// Budget bounds the live buckets of every Table made with WithBudget(b),
// together: a Stack gives all its per-value tables one Budget, so that what
// callers send cannot make it hold more than max buckets.
//
// # Policy when full
//
// A bucket is only ever dropped when it is full (it has refilled, so it
// carries no state and dropping it changes no decision); a bucket that holds
// less than its burst, or is in debt, is never evicted, since forgetting it
// would admit more than the limit. When a take needs a new bucket and the
// Budget is full, the Table first reclaims refilled buckets: it sweeps more
// of the key's own shard, then a few shards of the Tables sharing the
// Budget, in turn (dropping every full bucket, without the grace the
// amortised sweeps give a bucket that has just refilled; bounded work per
// request, so that a flood of new keys
// cannot make each request scan everything; repeated requests reach every
// shard). If that frees nothing, the take is denied: its Result has
// BudgetFull set, OK false, Remaining 0, and RetryAfter the time one bucket
// of this Table takes to refill from empty (burst/rate; one second when the
// rate is zero), by which every bucket of it that is not in debt has
// refilled and can be reclaimed. The denial creates nothing and changes no
// bucket. A key that already has a bucket is never denied for lack of room.
//
// ChargeN and ChargeBytes always record their debt, creating a bucket beyond
// the bound if the key has none (forgetting a debt would over-admit); the
// Budget then stays over its bound until enough buckets are reclaimed.
//
// Tables sharing a Budget must be driven with instants from one clock: a
// reclaim on behalf of one Table sweeps another at the first one's instant.
//
// The zero Budget is a Budget of no buckets, as NewBudget(0): every take on
// a key without a bucket is denied.
type Budget struct {
	max  int64
	used atomic.Int64

	mu     sync.Mutex // guards tables and the reclaim cursor
	tables []weak.Pointer[Table]
	ti, si int // reclaim cursor: table, shard
	pruned int // len(tables) after the last pruning
}

// budgetAcct counts the live buckets of one Table, so that they are given
// back to the Budget if the Table is dropped while holding some.
type budgetAcct struct{ n atomic.Int64 }

// NewBudget returns a Budget of at most max live buckets (max ≤ 0: none,
// so every take on a key without a bucket is denied).
func NewBudget(max int) *Budget { return &Budget{max: int64(max)} }

// SetMax sets the bound of a Budget held by value (the public package's)
// before its first use.
func (b *Budget) SetMax(max int) { b.max = int64(max) }

// Max returns the bound given to NewBudget.
func (b *Budget) Max() int { return int(b.max) }

// Len returns the number of live buckets counted against the Budget.
func (b *Budget) Len() int { return int(b.used.Load()) }

func (b *Budget) register(t *Table) *budgetAcct {
	a := &budgetAcct{}
	b.mu.Lock()
	if len(b.tables) >= 2*b.pruned+16 { // amortised: drop collected Tables
		live := b.tables[:0]
		for _, w := range b.tables {
			if w.Value() != nil {
				live = append(live, w)
			}
		}
		clear(b.tables[len(live):])
		b.tables, b.pruned = live, len(live)
		b.ti, b.si = 0, 0
	}
	b.tables = append(b.tables, weak.Make(t))
	b.mu.Unlock()
	runtime.AddCleanup(t, func(a *budgetAcct) { b.release(int(a.n.Swap(0))) }, a)
	return a
}

// acquire counts one more live bucket if there is room (or force).
func (b *Budget) acquire(force bool) bool {
	if force {
		b.used.Add(1)
		return true
	}
	for {
		u := b.used.Load()
		if u >= b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+1) {
			return true
		}
	}
}

func (b *Budget) release(n int) { b.used.Add(-int64(n)) }

// A denied insert sweeps up to reclaimShards shards holding buckets beyond
// its own, looking at no more than reclaimSteps shards or empty Tables.
const reclaimShards, reclaimSteps = 4, 64

// reclaimFor makes room for one bucket in t's shard s (locked) when the
// Budget is full: it sweeps more of s, then a few shards of the Tables
// sharing the Budget. It reports whether a bucket was acquired.
func (t *Table) reclaimFor(s *shard, p *params, ns int64) bool {
	b := t.budget
	if s.live > 0 {
		t.sweep(s, p, visitSlots, 0, ns)
		if b.acquire(false) {
			return true
		}
	}
	if !b.mu.TryLock() {
		// Another request is reclaiming: do not pile up behind it, but take
		// any room it has made.
		return b.acquire(false)
	}
	defer b.mu.Unlock()
	swept := 0
	for range reclaimSteps {
		if len(b.tables) == 0 || swept == reclaimShards {
			break
		}
		b.ti %= len(b.tables)
		o := b.tables[b.ti].Value()
		var set *shardSet
		if o != nil {
			set = o.set.Load()
		}
		if set == nil || b.si >= len(set.shards) {
			b.ti, b.si = b.ti+1, 0
			continue
		}
		sh := &set.shards[b.si]
		if b.si++; b.si >= len(set.shards) {
			b.ti, b.si = b.ti+1, 0
		}
		if sh == s || !sh.mu.TryLock() {
			continue
		}
		if !sh.moved && sh.live > 0 {
			sh.raise(ns)
			o.sweepAll(sh, o.p.Load(), 0, ns)
			swept++
		}
		sh.mu.Unlock()
		if b.acquire(false) {
			return true
		}
	}
	return false
}

// budgetDenial is the Result of a take refused because the Budget is full.
func (t *Table) budgetDenial(s *shard, p *params, ns int64) Result {
	r := Result{BudgetFull: true}
	switch {
	case t.budget.max <= 0:
		r.Permanent = true
	case p.zero || p.fq == 0:
		r.RetryAfter = time.Second
	default:
		r.RetryAfter = p.waitUntil(ns, p.nsToTicks(ns)+p.tau)
		if r.RetryAfter <= 0 {
			r.RetryAfter = time.Nanosecond
		}
	}
	return r
}

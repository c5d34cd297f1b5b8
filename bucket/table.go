package bucket

import (
	"hash/maphash"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Table is a set of buckets, one per key, all with the same rate and burst:
// the per-value limits of a "*" entry. A key's bucket is created full on
// first use.
//
// Table is safe for concurrent use. Lookups take a shard's read lock; the
// take itself is the Bucket's compare-and-swap. No goroutine runs in the
// background: buckets that have refilled to full are reclaimed during
// inserts, when a shard has doubled in size since its last sweep. A full
// bucket carries no state, so reclaiming it changes no decision, with one
// conservative exception: each shard remembers the latest instant it has
// swept or inserted at (its high-water mark H) and creates buckets "full at
// H", so a caller with an instant older than H sees a new key's bucket
// refilled only up to its own instant, never more than a reclaimed bucket
// would have given it.
type Table struct {
	p      atomic.Pointer[params]
	seed   maphash.Seed
	mask   uint64
	shards []shard
	mu     sync.Mutex // serializes Reconfigure
	clock  Clock
}

type shard struct {
	mu        sync.RWMutex
	m         map[string]*atomic.Int64
	high      int64 // high-water instant H, ns since epoch
	highSet   bool
	lastSweep int // len(m) after the last sweep
	peak      int // largest len(m) since the map was last rebuilt
	_         [64]byte
}

// minSweep is the shard size below which no sweep runs.
const minSweep = 64

// NewTable returns a Table of buckets refilled at r tokens per second
// holding at most b tokens each, with the special values of New.
func NewTable(r rate.Limit, b int, opts ...Option) *Table {
	cfg := config{clock: systemClock{}}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	n := cfg.shards
	if n <= 0 {
		n = max(64, 16*runtime.GOMAXPROCS(0))
	}
	n = min(n, 4096)
	size := 1
	for size < n {
		size <<= 1
	}
	t := &Table{seed: maphash.MakeSeed(), mask: uint64(size - 1), shards: make([]shard, size), clock: cfg.clock}
	for i := range t.shards {
		t.shards[i].m = make(map[string]*atomic.Int64)
	}
	p := newParams(r, b)
	t.p.Store(&p)
	return t
}

func (t *Table) shardOf(key string) *shard {
	return &t.shards[maphash.String(t.seed, key)&t.mask]
}

func (t *Table) shardOfBytes(key []byte) *shard {
	return &t.shards[maphash.Bytes(t.seed, key)&t.mask]
}

// TakeN takes n tokens at at from key's bucket, creating it if needed; see
// Bucket.TakeN.
func (t *Table) TakeN(key string, at time.Time, n int) Result {
	p := t.p.Load()
	if p.inf {
		return Result{OK: true, Remaining: p.n}
	}
	s := t.shardOf(key)
	s.mu.RLock()
	if st := s.m[key]; st != nil {
		r, _ := t.p.Load().take(st, nsOf(at), n)
		s.mu.RUnlock()
		return r
	}
	s.mu.RUnlock()
	if n <= 0 || int64(n) > p.n || n > p.burst {
		return t.peek(s, key, at, n)
	}
	s.mu.Lock()
	r, _ := t.p.Load().take(t.insert(s, key, at, true), nsOf(at), n)
	s.mu.Unlock()
	return r
}

// TakeBytes is TakeN with the key as bytes. It does not allocate when the
// key's bucket exists.
func (t *Table) TakeBytes(key []byte, at time.Time, n int) Result {
	p := t.p.Load()
	if p.inf {
		return Result{OK: true, Remaining: p.n}
	}
	s := t.shardOfBytes(key)
	s.mu.RLock()
	if st := s.m[string(key)]; st != nil {
		r, _ := t.p.Load().take(st, nsOf(at), n)
		s.mu.RUnlock()
		return r
	}
	s.mu.RUnlock()
	if n <= 0 || int64(n) > p.n || n > p.burst {
		return t.peek(s, string(key), at, n)
	}
	s.mu.Lock()
	r, _ := t.p.Load().take(t.insert(s, string(key), at, false), nsOf(at), n)
	s.mu.Unlock()
	return r
}

// peek evaluates a take that cannot change state (n ≤ 0 or over burst) on a
// missing key without creating it.
func (t *Table) peek(s *shard, key string, at time.Time, n int) Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	var tmp atomic.Int64
	st := s.m[key]
	if st == nil {
		tmp.Store(t.initial(s, t.p.Load()))
		st = &tmp
	}
	r, _ := t.p.Load().take(st, nsOf(at), n)
	return r
}

// AllowN reports whether n tokens may be taken at at from key's bucket, and
// takes them if so.
func (t *Table) AllowN(key string, at time.Time, n int) bool {
	s := t.shardOf(key)
	s.mu.RLock()
	if st := s.m[key]; st != nil {
		ok, _ := t.p.Load().allow(st, nsOf(at), n)
		s.mu.RUnlock()
		return ok
	}
	s.mu.RUnlock()
	return t.TakeN(key, at, n).OK
}

// RefundN gives back n tokens at at to key's bucket; see Bucket.RefundN. A
// key without a bucket is full: nothing to do.
func (t *Table) RefundN(key string, at time.Time, n int) {
	s := t.shardOf(key)
	s.mu.RLock()
	if st := s.m[key]; st != nil {
		t.p.Load().refund(st, nsOf(at), n)
	}
	s.mu.RUnlock()
}

// RefundBytes is RefundN with the key as bytes.
func (t *Table) RefundBytes(key []byte, at time.Time, n int) {
	s := t.shardOfBytes(key)
	s.mu.RLock()
	if st := s.m[string(key)]; st != nil {
		t.p.Load().refund(st, nsOf(at), n)
	}
	s.mu.RUnlock()
}

// RefundTakeBytes is Bucket.RefundTake for key's bucket: it gives back up
// to n of the tokens of the take that returned res, only those not yet
// refilled by at. A key reclaimed since (it was full) gets nothing back.
func (t *Table) RefundTakeBytes(key []byte, res Result, at time.Time, n int) {
	s := t.shardOfBytes(key)
	s.mu.RLock()
	if st := s.m[string(key)]; st != nil {
		t.p.Load().refundTake(st, res, nsOf(at), n)
	}
	s.mu.RUnlock()
}

// ChargeN takes n tokens at at from key's bucket unconditionally, possibly
// into debt; see Bucket.ChargeN.
func (t *Table) ChargeN(key string, at time.Time, n int) {
	if n <= 0 || t.p.Load().inf {
		return
	}
	s := t.shardOf(key)
	s.mu.RLock()
	if st := s.m[key]; st != nil {
		t.p.Load().charge(st, nsOf(at), n)
		s.mu.RUnlock()
		return
	}
	s.mu.RUnlock()
	s.mu.Lock()
	t.p.Load().charge(t.insert(s, key, at, true), nsOf(at), n)
	s.mu.Unlock()
}

// ChargeBytes is ChargeN with the key as bytes.
func (t *Table) ChargeBytes(key []byte, at time.Time, n int) {
	if n <= 0 || t.p.Load().inf {
		return
	}
	s := t.shardOfBytes(key)
	s.mu.RLock()
	if st := s.m[string(key)]; st != nil {
		t.p.Load().charge(st, nsOf(at), n)
		s.mu.RUnlock()
		return
	}
	s.mu.RUnlock()
	s.mu.Lock()
	t.p.Load().charge(t.insert(s, string(key), at, false), nsOf(at), n)
	s.mu.Unlock()
}

// TokensAt returns the tokens key's bucket holds at at (negative in debt),
// without creating it.
func (t *Table) TokensAt(key string, at time.Time) float64 {
	s := t.shardOf(key)
	s.mu.RLock()
	defer s.mu.RUnlock()
	p := t.p.Load()
	if st := s.m[key]; st != nil {
		return p.tokensAt(st.Load(), at)
	}
	return p.tokensAt(t.initial(s, p), at)
}

// Len returns the number of keys that have a bucket (live keys; reclaimed
// full buckets are not counted).
func (t *Table) Len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}

// Limit returns the refill rate of every bucket.
func (t *Table) Limit() rate.Limit { return t.p.Load().limit }

// Burst returns the capacity of every bucket.
func (t *Table) Burst() int { return t.p.Load().burst }

// Reconfigure changes the rate and burst of every bucket at at. Every live
// key keeps the tokens it holds at at, capped at the new burst. It is safe
// under concurrent takes: it holds every shard's lock while it converts, so
// it costs time proportional to the number of live keys.
func (t *Table) Reconfigure(at time.Time, r rate.Limit, b int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.shards {
		t.shards[i].mu.Lock()
	}
	old := t.p.Load()
	np := newParams(r, b)
	for i := range t.shards {
		for _, st := range t.shards[i].m {
			st.Store(convert(old, st.Load(), at, &np))
		}
	}
	t.p.Store(&np)
	for i := range t.shards {
		t.shards[i].mu.Unlock()
	}
}

// initial is the state of a new bucket in s: full at the shard's high-water
// instant. s.mu must be held.
func (t *Table) initial(s *shard, p *params) int64 {
	if !s.highSet || p.inf {
		return fresh
	}
	return p.nsToTicks(s.high)
}

// insert creates key's bucket in s (or returns the existing one), sweeping
// s first when it has doubled since its last sweep. s.mu must be held for
// writing. clone says whether key must be copied (it may pin a larger
// buffer); a key converted from bytes is already a fresh copy.
func (t *Table) insert(s *shard, key string, at time.Time, clone bool) *atomic.Int64 {
	if st := s.m[key]; st != nil {
		return st
	}
	p := t.p.Load()
	ns := nsOf(at)
	if !s.highSet || ns > s.high {
		s.high, s.highSet = ns, true
	}
	if len(s.m) >= minSweep && len(s.m) >= 2*s.lastSweep {
		t.sweep(s, p)
	}
	st := new(atomic.Int64)
	st.Store(t.initial(s, p))
	if clone {
		key = strings.Clone(key)
	}
	s.m[key] = st
	s.peak = max(s.peak, len(s.m))
	return st
}

// sweep deletes the buckets of s that are full at its high-water instant,
// and rebuilds the map when it has shrunk below a quarter of its peak (Go
// maps never shrink). s.mu must be held for writing.
func (t *Table) sweep(s *shard, p *params) {
	now := p.nsToTicks(s.high)
	for k, st := range s.m {
		if st.Load() <= now {
			delete(s.m, k)
		}
	}
	if len(s.m) < s.peak/4 {
		m := make(map[string]*atomic.Int64, len(s.m))
		for k, st := range s.m {
			m[k] = st
		}
		s.m = m
		s.peak = len(m)
	}
	s.lastSweep = len(s.m)
}

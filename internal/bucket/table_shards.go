package bucket

// A Table's storage: shards of open-addressed slot arrays, found by a
// key's digest, and the sweeps that reclaim buckets that have refilled.

import (
	"math"
	"math/bits"
)

// dropAll empties s (locked).
func (t *Table) dropAll(s *shard) {
	if t.acct != nil && s.live > 0 {
		t.acct.n.Add(-int64(s.live))
		t.budget.release(s.live)
	}
	s.slots, s.live, s.peak, s.cursor = nil, 0, 0, 0
	s.floor, s.dropped = 0, false // under rate.Inf every state converts to fresh
}

// initial is the state of a new bucket in s: the latest state of any bucket
// the shard has dropped (fresh if none), so that a key whose bucket was
// dropped never gets back more than that bucket held. s.mu must be held; s
// may be nil (an empty Table).
func initial(s *shard, p *params) int64 {
	if s == nil || !s.dropped || p.inf {
		return fresh
	}
	return s.floor
}

type mode int

const (
	modeLookup mode = iota // never create
	modeCreate             // create within the Budget
	modeForce              // create even beyond the Budget
)

// slotFor locks d's shard and returns it with the index of d's slot and the
// parameters to use under the lock. The index is -1 when d has no bucket
// and create is false, or when the Budget is full (full is then true). s is
// nil only when the Table is empty and create is false; otherwise the
// caller must unlock s.
func (t *Table) slotFor(d digest, ns int64, create bool) (s *shard, i int, p *params, full bool) {
	m := modeLookup
	if create {
		m = modeCreate
	}
	return t.slotForMode(d, ns, m)
}

func (t *Table) slotForMode(d digest, ns int64, m mode) (s *shard, i int, p *params, full bool) {
	for {
		set := t.set.Load()
		if set == nil {
			if m == modeLookup {
				return nil, -1, t.p.Load(), false
			}
			t.initSet()
			continue
		}
		s = &set.shards[d.lo&set.mask]
		s.mu.Lock()
		if s.moved {
			s.mu.Unlock()
			continue
		}
		p = t.p.Load()
		if s.ops++; s.ops%sweepEvery == 0 {
			t.maintain(set, s, p, ns, m != modeLookup)
		}
		i, found := s.find(d)
		if found || m == modeLookup {
			if !found {
				i = -1
			}
			return s, i, p, false
		}
		i, st := t.insert(set, s, d, ns, p, m == modeForce)
		switch st {
		case insMoved:
			s.mu.Unlock()
			continue
		case insFull:
			return s, -1, p, true
		}
		return s, i, p, false
	}
}

func (t *Table) initSet() {
	t.mu.Lock()
	if t.set.Load() == nil {
		t.set.Store(&shardSet{shards: make([]shard, 1)})
	}
	t.mu.Unlock()
}

// raise moves s's high-water mark up to ns.
func (s *shard) raise(ns int64) {
	if !s.highSet || ns > s.high {
		s.high, s.highSet = ns, true
	}
}

// maintain is the amortised sweep run by every sweepEvery-th operation on s
// (locked).
//
// Only operations that may change a bucket at ns (takes and charges) move
// the high-water mark up to ns and sweep at ns; lookups and refunds sweep
// at no later than the mark, so a query about a future instant drops no
// bucket that takes have not made full.
func (t *Table) maintain(set *shardSet, s *shard, p *params, ns int64, raise bool) {
	if len(s.slots) > 0 {
		if raise {
			s.raise(ns)
		}
		t.sweep(s, p, sweepSlots, reclaimGrace, s.cut(ns, raise))
	}
	if s.ops%visitEvery == 0 && len(set.shards) > 1 {
		s.visits++
		o := &set.shards[(uint64(s.idx)+uint64(s.visits))&set.mask]
		if o != s && o.mu.TryLock() {
			if !o.moved && len(o.slots) > 0 {
				if raise {
					o.raise(ns)
				}
				t.sweep(o, p, visitSlots, reclaimGrace, o.cut(ns, raise))
			}
			o.mu.Unlock()
		}
	}
}

// home is the first slot probed for hash h in an array of n slots.
func home(h uint64, n int) int {
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

// find returns the index of d's slot, or of the empty slot where it would
// go (found false); -1 when s has no slots.
func (s *shard) find(d digest) (int, bool) {
	n := len(s.slots)
	if n == 0 {
		return -1, false
	}
	i := home(d.hi, n)
	for {
		sl := &s.slots[i]
		if sl.hi == d.hi && sl.lo == d.lo {
			return i, true
		}
		if sl.hi|sl.lo == 0 {
			return i, false
		}
		if i++; i == n {
			i = 0
		}
	}
}

type insStatus int

const (
	insOK    insStatus = iota
	insMoved           // the shard was split: retry on the new set
	insFull            // the Budget is full
)

// insert creates d's bucket in s (locked; d has none), in the state of the
// latest bucket s dropped (full if none). It reclaims and resizes as needed.
func (t *Table) insert(set *shardSet, s *shard, d digest, ns int64, p *params, force bool) (int, insStatus) {
	s.raise(ns)
	if (s.live+1)*4 > len(s.slots)*3 {
		// Full enough to grow: reclaim first, then grow (or split) unless
		// the reclaim made room for an eighth of the array's slots. A
		// reclaim that freed only a few would be run again, over the whole
		// array, by the next few inserts: when keys come and go at the same
		// pace with the live count just under the threshold, that was a
		// full pass per insert.
		if s.live > 0 {
			t.sweepAll(s, p, reclaimGrace, ns)
		}
		if (s.live+1)*8 > len(s.slots)*5 {
			if len(set.shards) == 1 && t.maxShards > 1 && s.live+1 >= splitAt {
				t.split(s)
				return -1, insMoved
			}
			s.resize((s.live + 1) * 2)
		}
	}
	if t.budget != nil && !t.budget.acquire(force) && !t.reclaimFor(s, p, ns) {
		return -1, insFull
	}
	if len(s.slots) == 0 { // a reclaim emptied and freed the array
		s.slots = make([]slot, minSlots)
	}
	i, _ := s.find(d)
	sl := &s.slots[i]
	sl.hi, sl.lo = d.hi, d.lo
	sl.tat.Store(initial(s, p))
	s.live++
	s.peak = max(s.peak, s.live)
	if t.acct != nil {
		t.acct.n.Add(1)
	}
	return i, insOK
}

// cut is the instant a sweep by an operation at ns on s (locked) drops
// full buckets at: ns for a take or charge (raise), no later than the
// shard's high-water mark for a lookup, so that a query about a future
// instant drops nothing that takes have not made full.
func (s *shard) cut(ns int64, raise bool) int64 {
	if !raise && s.highSet && s.high < ns {
		return s.high
	}
	return ns
}

// sweep examines up to k slots of s (locked) from its cursor and drops the
// buckets that have been full for grace at instant cut; when the cursor
// wraps, it shrinks the array if it has become mostly empty. The latest
// state dropped becomes the shard's floor, the state new buckets start
// from.
//
// The cut is the sweeping operation's own instant, not the shard's
// high-water mark: one operation at an instant far ahead of the others
// then drops at most the k slots it sweeps, and the floor never goes
// beyond a state some bucket really had, so it cannot deny every new key
// until the clock catches up with that instant.
func (t *Table) sweep(s *shard, p *params, k int, grace int64, cut int64) {
	n := len(s.slots)
	if n == 0 {
		return
	}
	if cut > math.MinInt64+grace {
		cut -= grace
	}
	now := p.nsToTicks(cut) // drop what has been full for grace
	c := s.cursor % n
	freed, shrink := 0, false
	s.swept += uint64(k)
	for range k {
		sl := &s.slots[c]
		if tat := sl.tat.Load(); sl.hi|sl.lo != 0 && tat <= now {
			if !s.dropped || tat > s.floor {
				s.floor, s.dropped = tat, true
			}
			s.remove(c) // a later entry may move into c: look at c again
			freed++
			continue
		}
		if c++; c == n {
			// A pass is complete. Shrink if the array stayed under three
			// eighths full all through it: a shard whose buckets are
			// reclaimed and re-created at a steady pace keeps its array.
			c = 0
			shrink = s.peak*8 < n*3 && (n > minSlots || s.peak == 0)
			s.peak = s.live - freed
		}
	}
	s.cursor = c
	s.live -= freed
	if freed > 0 && t.acct != nil {
		t.acct.n.Add(-int64(freed))
		t.budget.release(freed)
	}
	if shrink {
		s.resize(s.live * 2)
	}
}

// sweepAll is a whole pass of sweep over s (locked) in time linear in the
// array: it empties every bucket full for grace at instant cut (as sweep,
// recording the floor), then moves each remaining entry back to the first free slot of its probe
// run, where sweep's one-by-one removal would shift a run once per bucket
// dropped from it (quadratic in the run's length when most of a run
// refilled together, as keys that churn do).
func (t *Table) sweepAll(s *shard, p *params, grace int64, cut int64) {
	n := len(s.slots)
	if n == 0 {
		return
	}
	if cut > math.MinInt64+grace {
		cut -= grace
	}
	now := p.nsToTicks(cut)
	s.swept += uint64(n)
	freed, empty := 0, -1
	for c := range s.slots {
		sl := &s.slots[c]
		if sl.hi|sl.lo == 0 {
			empty = c // empty before this sweep: no probe run crosses it
			continue
		}
		if tat := sl.tat.Load(); tat <= now {
			if !s.dropped || tat > s.floor {
				s.floor, s.dropped = tat, true
			}
			sl.hi, sl.lo = 0, 0
			sl.tat.Store(0)
			freed++
		}
	}
	if freed > 0 && empty < 0 {
		// No slot was empty before (the load factor keeps one, so this is
		// defensive): rebuild the array instead.
		s.resize(n)
	} else if freed > 0 {
		// From a slot that was empty before the sweep, once around. No
		// probe run crosses that slot, so every entry's home lies between
		// it and the entry, and every entry before the one at j is already
		// where a lookup finds it first: re-placing the entry at j puts it
		// at the first free slot from its home, at or before j, and
		// creates no gap in the run of an entry already placed. (Starting
		// from a slot this sweep emptied would not do: a run that crossed
		// it could get a gap from a later re-placement.)
		j := empty
		for range n - 1 {
			if j++; j == n {
				j = 0
			}
			sl := &s.slots[j]
			if sl.hi|sl.lo == 0 || home(sl.hi, n) == j {
				continue
			}
			hi, lo, tat := sl.hi, sl.lo, sl.tat.Load()
			sl.hi, sl.lo = 0, 0
			sl.tat.Store(0)
			s.place(hi, lo, tat)
		}
	}
	// A complete pass: shrink as sweep does when its cursor wraps.
	s.live -= freed
	shrink := s.peak*8 < n*3 && (n > minSlots || s.peak == 0)
	s.peak = s.live
	if freed > 0 && t.acct != nil {
		t.acct.n.Add(-int64(freed))
		t.budget.release(freed)
	}
	if shrink {
		s.resize(s.live * 2)
	}
}

// remove empties slot i of s, shifting later entries of its probe run back
// so that lookups need no tombstones. The caller adjusts s.live.
func (s *shard) remove(i int) {
	n := len(s.slots)
	j := i
	for {
		if j++; j == n {
			j = 0
		}
		sl := &s.slots[j]
		if sl.hi|sl.lo == 0 {
			break
		}
		k := home(sl.hi, n)
		// The entry at j may move back to i unless its home lies cyclically
		// in (i, j].
		if i <= j {
			if i < k && k <= j {
				continue
			}
		} else if i < k || k <= j {
			continue
		}
		dst := &s.slots[i]
		dst.hi, dst.lo = sl.hi, sl.lo
		dst.tat.Store(sl.tat.Load())
		i = j
	}
	e := &s.slots[i]
	e.hi, e.lo = 0, 0
	e.tat.Store(0)
}

// resize rehashes s's live buckets into an array of about want slots
// (none when s is empty).
func (s *shard) resize(want int) {
	if want <= 0 {
		s.slots, s.cursor = nil, 0
		return
	}
	want = max(want, minSlots)
	old := s.slots
	s.slots = make([]slot, want)
	s.cursor = 0
	for j := range old {
		if o := &old[j]; o.hi|o.lo != 0 {
			s.place(o.hi, o.lo, o.tat.Load())
		}
	}
}

// place puts an entry known to be absent into s's array.
func (s *shard) place(hi, lo uint64, tat int64) {
	i, _ := s.find(digest{hi, lo})
	sl := &s.slots[i]
	sl.hi, sl.lo = hi, lo
	sl.tat.Store(tat)
}

// split replaces the Table's one-shard set by maxShards shards holding the
// same buckets; s (locked) is that one shard and is marked moved.
func (t *Table) split(s *shard) {
	n := t.maxShards
	ns := &shardSet{mask: uint64(n - 1), shards: make([]shard, n)}
	counts := make([]int, n)
	for j := range s.slots {
		if sl := &s.slots[j]; sl.hi|sl.lo != 0 {
			counts[sl.lo&ns.mask]++
		}
	}
	for i := range ns.shards {
		d := &ns.shards[i]
		d.idx = i
		d.high, d.highSet, d.given = s.high, s.highSet, s.given
		d.floor, d.dropped = s.floor, s.dropped
		if counts[i] > 0 {
			d.slots = make([]slot, max(minSlots, counts[i]*2))
		}
	}
	for j := range s.slots {
		if sl := &s.slots[j]; sl.hi|sl.lo != 0 {
			d := &ns.shards[sl.lo&ns.mask]
			d.place(sl.hi, sl.lo, sl.tat.Load())
			d.live++
			d.peak++
		}
	}
	t.set.Store(ns)
	s.moved = true
	s.slots, s.live = nil, 0
}

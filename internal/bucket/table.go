package bucket

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"

	"github.com/sluicehq/sluice/internal/words"
)

// Table is a set of buckets, one per key, all with the same rate and burst:
// the per-value limits of a "*" entry. A key's bucket is created full on
// first use.
//
// # Storage
//
// A key is never stored: the Table keeps a keyed 128-bit digest of it in a
// fixed-size 24-byte slot with the bucket's state, in open-addressed arrays
// with linear probing. Memory is therefore the same whatever the length of
// the keys callers send. An array that reaches three quarters full is swept
// whole, and grown to half full unless that brought it under five eighths;
// it is shrunk to half full after a sweep pass finds it under
// three eighths full throughout, so it costs 32 to 64 bytes per live bucket
// (more only for the time it takes the sweeps to return the room of buckets
// that went idle), plus a fixed few hundred bytes per Table. An empty Table
// holds no slots at all: 160 bytes.
//
// A key of up to 15 bytes is digested by a bijection of its bytes and
// length, keyed at random when the Table is made, so two such keys never
// share a bucket (but for one pair of the 2¹²⁸ inputs, the one whose image
// is the empty slot's mark); a longer key by two independent maphash values
// under seeds drawn when the Table is made. Two keys of which one is long
// share a bucket only if both 64-bit halves of their digests collide.
// Callers cannot aim at a collision, nor at a slot; for n keys live at once
// the chance of any collision is at most about n²/2¹²⁹: 10⁻²⁹ for 100,000
// keys, 10⁻²¹ for a billion.
//
// # Concurrency
//
// A Table starts as one shard and splits into up to 16 (WithShards) once it
// holds a few hundred keys; each shard has its own mutex, held for the
// lookup and the take, so an operation costs one uncontended lock, one probe
// and one compare-and-swap, and never allocates except to resize an array.
//
// # Reclaiming
//
// A full bucket carries no state, so it can be dropped without changing any
// decision. A sweep drops a bucket once it has been full for one second (so
// a key that is busy but refills between its visits keeps its slot instead
// of churning: with 50 ms, 100,000 callers returning every 50–100 ms
// re-created their buckets on most visits). No goroutine runs in the
// background: operations sweep a few slots of their shard as they pass
// (and, now and then, of another shard), and an insert that would grow an
// array first sweeps all of it. So the memory of buckets that have refilled
// comes back, and the arrays shrink, within a bounded number of takes on
// the Table after the buckets go idle, whether or not new keys arrive.
//
// Dropping a bucket is conservative: each shard remembers the latest state
// of the buckets it dropped (its floor) and creates new buckets in that
// state, so a caller with an instant older than a dropped bucket's refill
// sees a new bucket refilled only up to its own instant, never more than
// the dropped bucket would have given it. A sweep drops at the instant of
// the operation that runs it (no later than the latest take's for a lookup
// such as TokensAt), so one caller with an instant far ahead of the others
// drops at most the few slots its own sweep visits, and new keys wait at
// most one refill of a bucket that really existed. That bucket may itself
// have been taken from at an instant far ahead (its state then lies there):
// once a later sweep drops it, new keys of its shard start empty until the
// clock reaches that state. Such waits are conservative (they never admit
// more); callers that pass instants from one clock, as a Stack does, never
// see them.
//
// With a rate of zero (no refill) buckets never become full again and are
// never dropped: bound such a Table with a Budget.
//
// Table is safe for concurrent use. The zero Table is not usable: make one
// with NewTable.
type Table struct {
	p         atomic.Pointer[params]
	set       atomic.Pointer[shardSet] // nil until the first insert
	seed1     maphash.Seed
	seed2     maphash.Seed
	k         [3]uint64 // the keys of short's bijection
	maxShards int
	mu        sync.Mutex   // serializes Reconfigure and the first shard set
	clock     sluice.Clock // nil: monoclock
	budget    *Budget
	acct      *budgetAcct // live buckets counted against budget
}

type shardSet struct {
	mask   uint64
	shards []shard
}

type shard struct {
	shardState
	_ [cacheLine - unsafe.Sizeof(shardState{})%cacheLine]byte
}

type shardState struct {
	mu      sync.Mutex
	moved   bool // this shard's set has been replaced: reload it and retry
	idx     int  // index in its set
	slots   []slot
	live    int
	peak    int    // largest live since the sweep last completed a pass
	cursor  int    // next slot of the amortised sweep
	ops     uint32 // operations since the shard was made
	visits  uint32 // sweeps of other shards done from this one
	high    int64  // high-water instant H, ns since epoch
	highSet bool
	given   int64 // ticks given back so far (GiveBack; see Grant)
	floor   int64 // the latest state of a bucket dropped (ticks), if dropped
	dropped bool
	swept   uint64 // slots examined by sweeps, for tests of the sweep cost
}

// slot is one bucket: the key's digest (0, 0 when the slot is empty) and the
// bucket's state.
type slot struct {
	hi, lo uint64
	tat    atomic.Int64
}

type digest struct{ hi, lo uint64 }

const (
	// minSlots is the smallest slot array.
	minSlots = 8
	// splitAt is the number of live keys at which a one-shard Table splits.
	splitAt = 256
	// defaultShards is the number of shards a Table splits into.
	defaultShards = 16
	// sweepEvery and sweepSlots: every sweepEvery operations on a shard
	// sweep sweepSlots of its slots (a quarter of a slot per operation).
	sweepEvery, sweepSlots = 32, 8
	// visitEvery and visitSlots: every visitEvery operations on a shard
	// sweep visitSlots slots of another shard of the same Table, so shards
	// that no longer see traffic are reclaimed too.
	visitEvery, visitSlots = 1024, 256
	// reclaimGrace is how long a bucket stays full before a sweep may drop it. A
	// key that comes back within Grace of refilling finds its bucket (no
	// churn for keys that are busy but refill between visits); an idle
	// key's memory comes back within Grace of its refill, plus the time
	// the sweeps take to reach it.
	reclaimGrace = int64(time.Second)
)

// NewTable returns a Table of buckets refilled at r tokens per second
// holding at most b tokens each, with the special values of New. Options:
// WithClock (for Allow and Take), WithShards, WithBudget.
func NewTable(r rate.Limit, b int, opts ...Option) *Table {
	t := new(Table)
	t.Init(r, b, opts...)
	return t
}

// Init makes t what NewTable(r, b, opts...) returns, for a Table held by
// value (the public package's, as its first field, so that a Budget's
// cleanup and weak pointer see the start of the allocation). It must be
// called once, before any other method.
func (t *Table) Init(r rate.Limit, b int, opts ...Option) {
	cfg := newConfig(opts)
	n := cfg.shards
	if n <= 0 {
		n = defaultShards
	}
	n = min(n, 4096)
	size := 1
	for size < n {
		size <<= 1
	}
	t.seed1, t.seed2 = maphash.MakeSeed(), maphash.MakeSeed()
	t.k = [3]uint64{rand.Uint64(), rand.Uint64(), rand.Uint64()}
	t.maxShards = size
	t.clock = cfg.clock
	p := newParams(r, b)
	t.p.Store(&p)
	if cfg.budget != nil {
		t.budget = cfg.budget
		t.acct = cfg.budget.register(t)
	}
}

// digestString is key's digest: for a key of up to shortKey bytes, the
// Table's keyed bijection of its bytes and length (short); for a longer
// one, two maphash passes under independent seeds.
func (t *Table) digestString(key string) digest {
	if len(key) <= shortKey {
		var a, b uint64
		if len(key) >= 8 {
			a = words.Le64(key)
			b = words.Le64(key[len(key)-8:]) >> ((16 - len(key)) * 8)
		} else {
			for i := 0; i < len(key); i++ {
				a |= uint64(key[i]) << (8 * i)
			}
		}
		return t.short(a, b|uint64(len(key))<<56)
	}
	return nonzero(digest{maphash.String(t.seed1, key), maphash.String(t.seed2, key)})
}

// digestBytes is digestString for a key held in bytes: the same digest for
// the same content.
func (t *Table) digestBytes(key []byte) digest {
	if len(key) <= shortKey {
		var a, b uint64
		if len(key) >= 8 {
			a = binary.LittleEndian.Uint64(key)
			b = binary.LittleEndian.Uint64(key[len(key)-8:]) >> ((16 - len(key)) * 8)
		} else {
			for i := 0; i < len(key); i++ {
				a |= uint64(key[i]) << (8 * i)
			}
		}
		return t.short(a, b|uint64(len(key))<<56)
	}
	return nonzero(digest{maphash.Bytes(t.seed1, key), maphash.Bytes(t.seed2, key)})
}

// shortKey is the longest key whose digest is computed by short: its bytes
// and its length fit the digest's 128 bits.
const shortKey = 15

// short maps the 128-bit word (a, b) (a short key's bytes, and in b's top
// byte its length) to a digest by a bijection keyed with the Table's k:
// each word is mixed on its own (mix is a bijection of 64-bit words), the
// low half is their sum, and the high half the first mixed word xored with
// a mix of the low half. Each step can be undone given the digest (the
// high half gives back the first word, the low half then the second), so
// two distinct short keys never share a digest (nonzero aside), and both
// halves depend on every byte. The two first mixes do not depend on each
// other, so they run side by side: two multiplication chains deep instead
// of three (a chain of three was about a tenth of a Table take at 10,000
// keys). It costs a few multiplications where maphash costs a call and a
// pass per half. A long key's digest (two keyed maphash values) equals a
// given short key's with probability 2⁻¹²⁸, as two long keys' do.
func (t *Table) short(a, b uint64) digest {
	x := mix(a ^ t.k[0])
	y := mix(b ^ t.k[1])
	lo := x + y
	return nonzero(digest{x ^ mix(lo^t.k[2]), lo})
}

// mix is the finaliser of MurmurHash3 (fmix64): a bijection of 64-bit
// words (each xor-shift and each multiplication by an odd constant can be
// undone) in which every input bit affects every output bit.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// nonzero keeps a digest away from (0, 0), which marks an empty slot.
func nonzero(d digest) digest {
	if d.hi|d.lo == 0 {
		d.lo = 1
	}
	return d
}

// nowNs is the Table's clock, in ns since epoch.
func (t *Table) nowNs() int64 {
	if t.clock == nil {
		return sysNow() // inlined, where a helper taking the clock is a call
	}
	return nsOf(t.clock.Now())
}

// Allow reports whether one token may be taken now (the Table's clock) from
// key's bucket, and takes it if so.
func (t *Table) Allow(key string) bool {
	return t.allow(t.digestString(key), t.nowNs(), 1)
}

// AllowNow is AllowN at the Table's clock's now.
func (t *Table) AllowNow(key string, n int) bool {
	return t.allow(t.digestString(key), t.nowNs(), n)
}

// AllowBytes is Allow with the key as bytes.
func (t *Table) AllowBytes(key []byte) bool {
	return t.allow(t.digestBytes(key), t.nowNs(), 1)
}

// Take takes n tokens now (the Table's clock) from key's bucket; see TakeN.
func (t *Table) Take(key string, n int) Result {
	return t.take(t.digestString(key), t.nowNs(), n)
}

// AllowN reports whether n tokens may be taken at at from key's bucket, and
// takes them if so.
func (t *Table) AllowN(at time.Time, key string, n int) bool {
	return t.allow(t.digestString(key), nsOf(at), n)
}

// TakeN takes n tokens at at from key's bucket, creating it if needed; see
// Bucket.TakeN. A take that cannot change the bucket (n ≤ 0, or more than
// the burst) does not create it. When the Table's Budget is full the result
// has BudgetFull set; see Budget.
func (t *Table) TakeN(at time.Time, key string, n int) Result {
	return t.take(t.digestString(key), nsOf(at), n)
}

// TakeBytes is TakeN with the key as bytes. It never allocates, except to
// resize the Table.
func (t *Table) TakeBytes(at time.Time, key []byte, n int) Result {
	return t.take(t.digestBytes(key), nsOf(at), n)
}

// fits reports whether a take of n can change a bucket under p, and so
// creates one for a key without.
func fits(p *params, n int) bool { return n > 0 && int64(n) <= p.n && n <= p.burst }

// stale reports whether slotFor found no bucket for a take of n that was
// not allowed to create one, under parameters p (those in force under the
// lock) that would have: a Reconfigure raised the burst in between, and
// the take must start again rather than be answered by peek, which would
// admit it without taking anything.
func stale(i int, full, create bool, p *params, n int) bool {
	return i < 0 && !full && !create && fits(p, n)
}

// TryTakeN is TakeN reporting only Result.OK and Result.Remaining (see
// TryTakeBytes). What it takes cannot be given back: use TryTakeGrant.
func (t *Table) TryTakeN(at time.Time, key string, n int) (ok bool, remaining int64) {
	ok, remaining, _ = t.tryTake(t.digestString(key), nsOf(at), n, nil)
	return ok, remaining
}

// TryTakeBytes is TakeBytes reporting only Result.OK and Result.Remaining
// (see Bucket.TryTakeN): a refused take, including one refused because the
// Budget is full, takes nothing, and TakeBytes then gives the full Result.
// What it takes cannot be given back: use TryTakeGrantBytes.
func (t *Table) TryTakeBytes(at time.Time, key []byte, n int) (ok bool, remaining int64) {
	ok, remaining, _ = t.tryTake(t.digestBytes(key), nsOf(at), n, nil)
	return ok, remaining
}

// TryTakeGrant is TryTakeN that also writes the take's Grant to *g (zero
// on a denial), for hot paths that may give back (GiveBack).
func (t *Table) TryTakeGrant(at time.Time, key string, n int, g *Grant) (ok bool, remaining int64) {
	ok, remaining, _ = t.tryTake(t.digestString(key), nsOf(at), n, g)
	return ok, remaining
}

// TryTakeGrantBytes is TryTakeGrant with the key as bytes.
func (t *Table) TryTakeGrantBytes(at time.Time, key []byte, n int, g *Grant) (ok bool, remaining int64) {
	ok, remaining, _ = t.tryTake(t.digestBytes(key), nsOf(at), n, g)
	return ok, remaining
}

// TakeNs is TakeN at the instant ns (NowNs, NsOf).
func (t *Table) TakeNs(ns int64, key string, n int) Result {
	return t.take(t.digestString(key), ns, n)
}

// TakeBytesNs is TakeBytes at the instant ns (NowNs, NsOf).
func (t *Table) TakeBytesNs(ns int64, key []byte, n int) Result {
	return t.take(t.digestBytes(key), ns, n)
}

// TryTakeGrantNs is TryTakeGrant at the instant ns (NowNs, NsOf), for
// engines that read the clock once as nanoseconds, and deciding a refusal
// once: a refused take reports the rest of its Result in why
// (why.Result(remaining) is what TakeNs would have returned then), so the
// bucket need not be asked again. g may be nil (nothing to give back).
func (t *Table) TryTakeGrantNs(ns int64, key string, n int, g *Grant) (ok bool, remaining int64, why Refusal) {
	return t.tryTake(t.digestString(key), ns, n, g)
}

// TryTakeGrantBytesNs is TryTakeGrantNs with the key as bytes.
func (t *Table) TryTakeGrantBytesNs(ns int64, key []byte, n int, g *Grant) (ok bool, remaining int64, why Refusal) {
	return t.tryTake(t.digestBytes(key), ns, n, g)
}

func (t *Table) tryTake(d digest, ns int64, n int, g *Grant) (ok bool, remaining int64, why Refusal) {
	// The commonest take, straight through: the key's bucket exists, its
	// shard owes no maintenance on this operation, the take fits the
	// parameters in force under the lock. It does exactly what the path
	// below does in that case (slotFor, raise, tryTakeLocked), in one frame;
	// anything else unlocks having changed nothing and takes that path.
	if set := t.set.Load(); set != nil && n > 0 { // a check (n ≤ 0) takes the path below
		s := &set.shards[d.lo&set.mask]
		s.mu.Lock()
		if !s.moved && (s.ops+1)%sweepEvery != 0 {
			p := t.p.Load()
			if i, found := s.find(d); found && !p.inf && int64(n) <= p.n && n <= p.burst {
				s.ops++
				s.raise(ns)
				now := p.nsToTicks(ns)
				w := (*int64)(unsafe.Pointer(&s.slots[i].tat)) // the lock orders every access
				base := max(*w, now)
				newTat := base + int64(n)*p.unit
				if newTat-now > p.tau {
					s.mu.Unlock()
					if g != nil {
						*g = Grant{}
					}
					return false, p.divUnit(p.tau - (base - now)), p.refusal(ns, newTat)
				}
				*w = newTat
				if g != nil {
					*g = Grant{p: p, at: ns, end: newTat, n: int64(n), key: d.hi, q: s.given}
				}
				s.mu.Unlock()
				return true, p.divUnit(p.tau - (newTat - now)), Refusal{}
			}
		}
		s.mu.Unlock()
	}
	p := t.p.Load()
	if p.inf {
		if g != nil {
			*g = Grant{p: p, key: d.hi, n: int64(max(n, 0))}
		}
		return true, p.n, Refusal{}
	}
	create := fits(p, n)
	s, i, p, _ := t.slotFor(d, ns, create)
	if s == nil || i < 0 {
		// No bucket (not created, or no room): the full path decides.
		if s != nil {
			s.mu.Unlock()
		}
		r := t.take(d, ns, n)
		if g != nil {
			*g = r.Grant
		}
		return r.OK, r.Remaining, refusalOf(&r)
	}
	if n > 0 {
		s.raise(ns) // a take: see Grant
	}
	ok, remaining, why = p.tryTakeLocked(&s.slots[i].tat, ns, n, g)
	if ok && g != nil {
		g.key, g.q = d.hi, s.given
	}
	s.mu.Unlock()
	return ok, remaining, why
}

// tryTakeLocked is params.tryTake for the state of a Table's slot, which is
// only ever read or written under its shard's lock: a plain read and write
// instead of a compare-and-swap, one locked instruction fewer per take.
func (p *params) tryTakeLocked(s *atomic.Int64, ns int64, n int, g *Grant) (ok bool, remaining int64, why Refusal) {
	if p.inf || n <= 0 || int64(n) > p.n || n > p.burst {
		r, _ := p.take(s, nil, ns, n)
		if g != nil {
			*g = r.Grant
		}
		return r.OK, r.Remaining, refusalOf(&r)
	}
	now := p.nsToTicks(ns)
	w := (*int64)(unsafe.Pointer(s)) // the lock orders every access
	base := max(*w, now)
	newTat := base + int64(n)*p.unit
	if newTat-now > p.tau {
		if g != nil {
			*g = Grant{}
		}
		return false, p.divUnit(p.tau - (base - now)), p.refusal(ns, newTat)
	}
	*w = newTat
	if g != nil {
		*g = Grant{p: p, at: ns, end: newTat, n: int64(n)}
	}
	return true, p.divUnit(p.tau - (newTat - now)), Refusal{}
}

// allowLocked is tryTakeLocked reporting only whether the take succeeded,
// for Allow and AllowN: the same plain read and write under the shard's
// lock, without the compare-and-swap loop of params.allow and without
// working out what remains.
func (p *params) allowLocked(s *atomic.Int64, ns int64, n int) bool {
	if p.inf || n <= 0 || int64(n) > p.n || n > p.burst {
		ok, _ := p.allow(s, nil, ns, n)
		return ok
	}
	now := p.nsToTicks(ns)
	w := (*int64)(unsafe.Pointer(s)) // the lock orders every access
	newTat := max(*w, now) + int64(n)*p.unit
	if newTat-now > p.tau {
		return false
	}
	*w = newTat
	return true
}

// locate is slotFor for a take of n, creating d's bucket when such a take
// can change it, and starting again while a Reconfigure makes the answer
// stale (see stale). With inf set the Table is unlimited and nothing is
// locked; otherwise s, when not nil, is locked.
func (t *Table) locate(d digest, ns int64, n int) (s *shard, i int, p *params, full, create, inf bool) {
	for {
		p = t.p.Load()
		if p.inf {
			return nil, -1, p, false, false, true
		}
		create = fits(p, n)
		s, i, p, full = t.slotFor(d, ns, create)
		if !stale(i, full, create, p, n) {
			return s, i, p, full, create, false
		}
		if s != nil {
			s.mu.Unlock()
		}
	}
}

func (t *Table) take(d digest, ns int64, n int) Result {
	s, i, p, full, _, inf := t.locate(d, ns, n)
	if inf {
		return Result{OK: true, Remaining: p.n, Grant: Grant{p: p, key: d.hi, n: int64(max(n, 0))}}
	}
	if s == nil {
		return t.peek(nil, p, ns, n)
	}
	// No defer: it would force the Result through memory on every take.
	var r Result
	switch {
	case i >= 0:
		if n > 0 {
			s.raise(ns) // a take: see Grant
		}
		r, _ = p.take(&s.slots[i].tat, nil, ns, n)
		if r.OK {
			r.Grant.key, r.Grant.q = d.hi, s.given
		}
	case full:
		r = t.budgetDenial(s, p, ns)
	default:
		r = t.peek(s, p, ns, n)
	}
	s.mu.Unlock()
	return r
}

func (t *Table) allow(d digest, ns int64, n int) bool {
	// tryTake's straight path, reporting only OK: the key's bucket exists,
	// its shard owes no maintenance on this operation, the take fits the
	// parameters in force under the lock. It does exactly what the path
	// below does then (locate, raise, allowLocked) without the three calls
	// of locate; anything else unlocks having changed nothing and takes
	// that path.
	if set := t.set.Load(); set != nil && n > 0 { // a check (n ≤ 0) takes the path below
		s := &set.shards[d.lo&set.mask]
		s.mu.Lock()
		if !s.moved && (s.ops+1)%sweepEvery != 0 {
			p := t.p.Load()
			if i, found := s.find(d); found && !p.inf && int64(n) <= p.n && n <= p.burst {
				s.ops++
				s.raise(ns)
				now := p.nsToTicks(ns)
				w := (*int64)(unsafe.Pointer(&s.slots[i].tat)) // the lock orders every access
				newTat := max(*w, now) + int64(n)*p.unit
				ok := newTat-now <= p.tau
				if ok {
					*w = newTat
				}
				s.mu.Unlock()
				return ok
			}
		}
		s.mu.Unlock()
	}
	s, i, p, _, create, inf := t.locate(d, ns, n)
	if inf {
		return true
	}
	if s == nil {
		return t.peek(nil, p, ns, n).OK
	}
	ok := false
	switch {
	case i >= 0:
		if n > 0 {
			s.raise(ns) // a take: see Grant
		}
		ok = p.allowLocked(&s.slots[i].tat, ns, n)
	case !create:
		ok = t.peek(s, p, ns, n).OK
	}
	s.mu.Unlock()
	return ok
}

// peek evaluates a take that does not change state (n ≤ 0 or over burst)
// on a key without a bucket. s is locked, or nil when the Table is empty.
func (t *Table) peek(s *shard, p *params, ns int64, n int) Result {
	var tmp atomic.Int64
	tmp.Store(initial(s, p))
	r, _ := p.take(&tmp, nil, ns, n)
	r.Grant = Grant{} // nothing was taken: nothing to give back
	return r
}

// GiveBack returns n of the tokens that the take of key which made g took,
// and counts them off g; see Bucket.GiveBack and Grant. The Table's bound
// uses the latest instant of any take on the key's shard, so a give-back
// is exact when no take on the shard, before or since, has used a later
// instant than g's take (a Table cannot tell that nothing was taken from
// the key since: other keys share the mark). A
// key whose bucket was reclaimed since (it had refilled to full) gets
// nothing back; the tokens still count off g.
//
// After a Reconfigure, a give-back of an earlier take returns at most what
// of it had not refilled by the instant of the change.
//
// It returns an error matching ErrGiveBack, and gives nothing back, when
// n is negative or more than g.Outstanding(), when g records no take, or
// when g is from another key (or, almost surely, another Table).
func (t *Table) GiveBack(key string, g *Grant, n int) error {
	return t.giveBack(t.digestString(key), g, n)
}

// GiveBackBytes is GiveBack with the key as bytes.
func (t *Table) GiveBackBytes(key []byte, g *Grant, n int) error {
	return t.giveBack(t.digestBytes(key), g, n)
}

// GrantFor returns the Grant of a take of n tokens at at from key's bucket
// that the caller recorded itself; see Bucket.GrantFor, whose caveats
// apply: it trusts the caller that the tokens were taken then.
func (t *Table) GrantFor(at time.Time, key string, n int) Grant {
	if n <= 0 {
		return Grant{}
	}
	p := t.p.Load()
	ns := nsOf(at)
	return Grant{p: p, key: t.digestString(key).hi, at: ns, end: p.nsToTicks(ns), n: int64(n)}
}

func (t *Table) giveBack(d digest, g *Grant, n int) error {
	if err := g.check(n); err != nil {
		return err
	}
	if g.key != d.hi {
		return errForeign
	}
	if n == 0 {
		return nil
	}
	// A lookup at the earliest instant: its amortised sweep, if any, drops
	// nothing (see maintain).
	s, i, p, _ := t.slotFor(d, math.MinInt64, false)
	if i >= 0 && !p.inf {
		hi := p.nsToTicks(math.MinInt64)
		if s.highSet {
			hi = p.nsToTicks(s.high)
		}
		w := (*int64)(unsafe.Pointer(&s.slots[i].tat))                  // the lock orders every access
		if dd := g.bound(int64(n), p, hi, s.given); dd > 0 && *w > hi { // else nothing may come back, or full already
			*w = max(*w-dd, hi) // never below the latest instant, as Bucket.GiveBack
			s.given += dd
		}
	}
	g.n -= int64(n)
	if s != nil {
		s.mu.Unlock()
	}
	return nil
}

// ChargeN takes n tokens at at from key's bucket unconditionally, possibly
// into debt; see Bucket.ChargeN. A charge always records its debt: on a key
// without a bucket it creates one even when the Table's Budget is full
// (the Budget is then over its bound until buckets are reclaimed), since
// forgetting a debt would admit more than the limit.
func (t *Table) ChargeN(at time.Time, key string, n int) {
	t.charge(t.digestString(key), nsOf(at), n)
}

// ChargeBytes is ChargeN with the key as bytes.
func (t *Table) ChargeBytes(at time.Time, key []byte, n int) {
	t.charge(t.digestBytes(key), nsOf(at), n)
}

func (t *Table) charge(d digest, ns int64, n int) {
	if n <= 0 || t.p.Load().inf {
		return
	}
	s, i, p, _ := t.slotForMode(d, ns, modeForce)
	if i >= 0 {
		s.raise(ns)
		p.charge(&s.slots[i].tat, nil, ns, n)
	}
	s.mu.Unlock()
}

// TokensAt returns the tokens key's bucket holds at at (negative in debt),
// without creating it.
func (t *Table) TokensAt(at time.Time, key string) float64 {
	s, i, p, _ := t.slotFor(t.digestString(key), nsOf(at), false)
	if s == nil {
		return p.tokensAt(fresh, at)
	}
	defer s.mu.Unlock()
	if i >= 0 {
		return p.tokensAt(s.slots[i].tat.Load(), at)
	}
	return p.tokensAt(initial(s, p), at)
}

// Len returns the number of keys that have a bucket (live keys; reclaimed
// full buckets are not counted).
func (t *Table) Len() int {
	for {
		set := t.set.Load()
		if set == nil {
			return 0
		}
		n, moved := 0, false
		for i := range set.shards {
			s := &set.shards[i]
			s.mu.Lock()
			n += s.live
			moved = moved || s.moved
			s.mu.Unlock()
		}
		if !moved {
			return n
		}
	}
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
	np := newParams(r, b)
	for {
		set := t.set.Load()
		if set == nil {
			t.p.Store(&np)
			return
		}
		moved := false
		for i := range set.shards {
			set.shards[i].mu.Lock()
			moved = moved || set.shards[i].moved
		}
		if !moved {
			old := t.p.Load()
			for i := range set.shards {
				s := &set.shards[i]
				s.raise(nsOf(at)) // bounds the give-backs of earlier takes (Grant.bound)
				if np.inf {       // nothing to remember: every bucket is full
					t.dropAll(s)
					continue
				}
				if s.dropped {
					s.floor = convert(old, s.floor, at, &np)
				}
				for j := range s.slots {
					if st := &s.slots[j]; st.hi|st.lo != 0 {
						st.tat.Store(convert(old, st.tat.Load(), at, &np))
					}
				}
			}
			t.p.Store(&np)
		}
		for i := range set.shards {
			set.shards[i].mu.Unlock()
		}
		if !moved {
			return
		}
	}
}

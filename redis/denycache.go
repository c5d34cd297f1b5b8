package redis

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/stack"
)

// The near-cache of denials (issue #39).
//
// When the script denies a decision because of one bucket that needs time
// to refill, this process answers that bucket's denials itself until the
// instant Redis would admit it: no call, the same Outcome the script would
// give at that instant (Denied, RetryAfter counting down), except that
// Remaining is nil, as the script's general path leaves it on a denial. A
// cached denial only ever denies; everything this process does that can
// make the bucket admit sooner drops the entry:
//
//   - a Take that admitted, failed, or went anywhere but Redis (a local
//     fallback), for each of its buckets;
//   - an Adjust (a give-back, a settlement, a charge), before and after it;
//   - a call naming the bucket with other parameters (a reload that
//     changes its rate, period or burst): an entry records the Op's Rate,
//     Period, Burst and Cost, and answers only ops with the same four.
//
// What other processes do is seen up to the entry's RetryAfter late: a
// give-back by another process may make the bucket admit before the
// entry expires, and this process denies until then. That is the only
// cost. Takes by others only delay admission, so an entry never expires
// after Redis would admit.
//
// Race: a reply that denies is cached only when no call that may have
// changed the bucket completed between this call's start and its reply
// (a counter per hashed key, bumped by every such completion), so that a
// take or give-back whose script ran after this one's cannot leave a stale
// entry behind.
//
// Time: entries are in microseconds on the backend's clock when it has
// one (WithClock: the script's own instants, so an entry is exact), else
// on this process's monotonic clock, because the script then reads the
// server's TIME: an entry expires at the instant the call was sent plus
// RetryAfter, less 1 µs and RetryAfter/1024 for clock rates (the server
// read its TIME after the call started, so Redis admits no earlier), and
// it reports RetryAfter counted from when the reply arrived (so it is
// never early).

const (
	defaultDenialCache = 1 << 20 // bytes
	denyShards         = 64
	denySlots          = 1024
	// entryOverhead estimates what an entry costs beside its key: the
	// map's slot and the entry's fields.
	entryOverhead = 96
)

// WithDenialCache sets the size, in bytes, of the near-cache of denials:
// when Redis denies a bucket that needs time to refill, this process
// answers that bucket's denials itself, without a call, until the instant
// Redis would admit it (see the package documentation, "Denial cache").
// The cache is on by default with 1 MiB (an entry costs about 100 bytes
// plus its bucket key); when full, a random entry is evicted. bytes ≤ 0
// means the default; WithoutDenialCache turns it off.
func WithDenialCache(bytes int) Option {
	return optionFunc(func(o *options) {
		if bytes > 0 {
			o.denyBytes = bytes
		}
	})
}

// WithoutDenialCache turns the near-cache of denials off (WithDenialCache):
// every decision is a call to Redis.
func WithoutDenialCache() Option {
	return optionFunc(func(o *options) { o.denyBytes = -1 })
}

// DenialCacheStats reports how many decisions the near-cache of denials
// answered (hits) and how many entries it evicted for room, since New;
// both are 0 when the cache is off. otelmetric.Metrics.ObserveDenialCache
// exports them as OpenTelemetry counters.
func (b *Backend) DenialCacheStats() (hits, evictions int64) {
	if b.dc == nil {
		return 0, 0
	}
	for i := range b.dc.shards {
		s := &b.dc.shards[i]
		hits += s.hits.Load()
		evictions += s.evictions.Load()
	}
	return hits, evictions
}

// denyEntry is one cached denial of one bucket.
type denyEntry struct {
	rate, burst, cost int64
	period            time.Duration
	expiry            int64 // µs: answer only before it
	retryAt           int64 // µs: RetryAfter is retryAt - now
	// probe is set while one decision of this process asks Redis about
	// the bucket after the entry expired (or was dropped): the others with
	// the same op wait for its reply instead of all asking (a flood's
	// herd), then look again.
	probe *denyProbe
	// admits counts the admissions Redis gave since the bucket was last
	// denied: a second one removes the entry, so that a bucket whose flood
	// has ended is no longer asked about one decision at a time.
	admits uint8
}

// denyProbe is one decision asking Redis for the bucket of a dead entry.
type denyProbe struct{ done chan struct{} }

// dead is the expiry of an entry that never answers: kept only so that
// the next decisions on its bucket ask Redis one at a time.
const dead = -1 << 63

type denyShard struct {
	mu        sync.Mutex
	m         map[string]denyEntry
	bytes     int
	n         atomic.Int32 // len(m), read without the lock
	hits      atomic.Int64
	evictions atomic.Int64
	_         [40]byte
}

// denySlot guards inserts against a concurrent change of the bucket: gen
// counts completions of calls that may have changed a bucket hashed here;
// fp is the parameters the last call naming such a bucket carried.
type denySlot struct {
	gen atomic.Uint64
	fp  atomic.Uint64
}

type denyCache struct {
	seed     maphash.Seed
	maxBytes int // per shard
	shards   [denyShards]denyShard
	slots    [denySlots]denySlot
}

func newDenyCache(bytes int) *denyCache {
	c := &denyCache{seed: maphash.MakeSeed(), maxBytes: max(bytes/denyShards, 256)}
	for i := range c.shards {
		c.shards[i].m = map[string]denyEntry{}
	}
	return c
}

func (c *denyCache) hash(key string) uint64 { return maphash.String(c.seed, key) }

func opFP(op *stack.Op) uint64 {
	h := uint64(op.Rate)*0x9e3779b97f4a7c15 ^ uint64(op.Period)*0xc2b2ae3d27d4eb4f ^ uint64(op.Burst)*0x165667b19e3779f9
	return h | 1 // never 0, the slot's initial value
}

// now is the cache's instant in microseconds: the backend's clock, else
// this process's monotonic clock.
func (b *Backend) denyNow() int64 {
	if b.clock != nil {
		return b.clock().UnixMicro()
	}
	return b.realMono() / 1000
}

// lookup returns the live entry of op at now.
func (c *denyCache) lookup(op *stack.Op, now int64) (denyEntry, bool) {
	s := &c.shards[c.hash(op.Key)%denyShards]
	if s.n.Load() == 0 {
		return denyEntry{}, false
	}
	s.mu.Lock()
	e, ok := s.m[op.Key]
	if ok && now >= e.expiry {
		ok = false
	}
	s.mu.Unlock()
	if !ok || e.rate != op.Rate || e.period != op.Period || e.burst != op.Burst || e.cost != op.Cost {
		return denyEntry{}, false
	}
	return e, true
}

// probeOrWait is, for a decision of one op that the cache did not answer,
// the single flight of its bucket: when the bucket has a dead or expired
// entry with op's parameters and cost and no decision is asking Redis
// about it, it makes this decision that one (mine); when one is, it
// returns that one's probe to wait for.
func (c *denyCache) probeOrWait(op *stack.Op) (mine, wait *denyProbe) {
	s := &c.shards[c.hash(op.Key)%denyShards]
	if s.n.Load() == 0 {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[op.Key]
	if !ok || e.rate != op.Rate || e.period != op.Period || e.burst != op.Burst || e.cost != op.Cost {
		return nil, nil
	}
	if e.probe != nil {
		return nil, e.probe
	}
	e.probe = &denyProbe{done: make(chan struct{})}
	s.m[op.Key] = e
	return e.probe, nil
}

// release ends probe p of key's bucket: the decisions waiting for it look
// again.
func (c *denyCache) release(key string, p *denyProbe) {
	s := &c.shards[c.hash(key)%denyShards]
	s.mu.Lock()
	if e, ok := s.m[key]; ok && e.probe == p {
		e.probe = nil
		s.m[key] = e
	}
	s.mu.Unlock()
	close(p.done)
}

// remove deletes key from s, under s.mu.
func (c *denyCache) remove(s *denyShard, key string) {
	if _, ok := s.m[key]; ok {
		delete(s.m, key)
		s.bytes -= len(key) + entryOverhead
		s.n.Store(int32(len(s.m)))
	}
}

// answer returns the Outcome the script would give ops now, when the cache
// knows it: the first op that can deny (non-shadow, not a slot) has a live
// entry, every shadow op before it has one too (each is reported in
// ShadowDenied), no slot comes before it, and every non-shadow bucket after
// it has a live entry (the script's RetryAfter is the longest wait of
// them; a slot after it is not probed by the script either).
func (c *denyCache) answer(ops []stack.Op, now int64) (stack.Outcome, bool) {
	k := -1
	var retry int64
	nshadow := 0
	for i := range ops {
		op := &ops[i]
		if op.Conn {
			if k < 0 {
				return stack.Outcome{}, false
			}
			continue
		}
		if op.Shadow {
			if k >= 0 {
				continue
			}
			if _, ok := c.lookup(op, now); !ok {
				return stack.Outcome{}, false
			}
			nshadow++
			continue
		}
		e, ok := c.lookup(op, now)
		if !ok {
			return stack.Outcome{}, false
		}
		if k < 0 {
			k = i
		}
		retry = max(retry, e.retryAt-now)
	}
	if k < 0 {
		return stack.Outcome{}, false
	}
	out := stack.Outcome{Denied: k, RetryAfter: time.Duration(retry) * time.Microsecond}
	if nshadow > 0 {
		out.ShadowDenied = make([]int, 0, nshadow)
		for i := range ops[:k] {
			if ops[i].Shadow && !ops[i].Conn {
				out.ShadowDenied = append(out.ShadowDenied, i)
			}
		}
	}
	s := &c.shards[c.hash(ops[k].Key)%denyShards]
	s.hits.Add(1)
	return out, true
}

// maxTracked is how many ops of a decision begin records; a decision with
// more is never cached (only dropped).
const maxTracked = 8

// denyTicket is what begin records for end.
type denyTicket struct {
	gens [maxTracked]uint64
}

// mayHold reports whether op's shard holds any entry (a cheap check before
// reading the clock).
func (c *denyCache) mayHold(op *stack.Op) bool {
	return c.shards[c.hash(op.Key)%denyShards].n.Load() != 0
}

// begin records, before a call that names ops, each op's slot generation;
// a call with other parameters than the slot's last ones counts as a
// change.
func (c *denyCache) begin(ops []stack.Op, t *denyTicket) {
	for i := range ops {
		sl := &c.slots[c.hash(ops[i].Key)%denySlots]
		if fp := opFP(&ops[i]); sl.fp.Load() != fp {
			sl.fp.Store(fp)
			sl.gen.Add(1)
		}
		if i < maxTracked {
			t.gens[i] = sl.gen.Load()
		}
	}
}

// changed records that a call naming ops completed (or is about to run)
// and may have changed their buckets: their entries die (they answer no
// more), and inserts by calls in flight are refused. admitted says that
// Redis admitted the decision: a bucket admitted twice since its last
// denial loses its entry altogether (see denyEntry.admits).
func (c *denyCache) changed(ops []stack.Op, admitted bool) {
	for i := range ops {
		h := c.hash(ops[i].Key)
		c.slots[h%denySlots].gen.Add(1)
		s := &c.shards[h%denyShards]
		if s.n.Load() != 0 {
			s.mu.Lock()
			if e, ok := s.m[ops[i].Key]; ok {
				// dead, not gone: the next decisions on the bucket ask
				// Redis one at a time, until it has admitted twice
				e.expiry, e.retryAt = dead, dead
				if admitted {
					e.admits++
				}
				if e.admits >= 2 {
					c.remove(s, ops[i].Key)
				} else {
					s.m[ops[i].Key] = e
				}
			}
			s.mu.Unlock()
		}
	}
}

// end handles the reply of a take that began with t: a change drops what
// it touched; a denial that Redis gave (cacheable: the call went to Redis,
// and callAt is the call's instant, Backend.callInstant) may be cached.
func (c *denyCache) end(b *Backend, ops []stack.Op, t *denyTicket, out stack.Outcome, err error, cacheable bool, callAt int64) {
	if err != nil || out.Denied < 0 || out.Denied >= len(ops) || !cacheable {
		c.changed(ops, err == nil && out.Denied < 0)
		return
	}
	// A denial takes nothing; a call with other parameters than the
	// slot's last ones may have converted its bucket.
	for i := range ops {
		sl := &c.slots[c.hash(ops[i].Key)%denySlots]
		if sl.fp.Load() != opFP(&ops[i]) {
			c.changed(ops[i:i+1], false)
		}
	}
	k := out.Denied
	op := &ops[k]
	if k >= maxTracked || out.Permanent || out.RetryAfter <= 0 || op.Shadow || op.Conn {
		return
	}
	for i := range ops {
		if i < k && ops[i].Key == op.Key {
			return // an earlier op took from it first: its wait is not its own
		}
		if i > k && !ops[i].Shadow && !ops[i].Conn {
			return // RetryAfter may be another bucket's wait
		}
	}
	p, perr := paramsOf(*op)
	if perr != nil || p.u != 1 {
		return // coarser time units count down in steps: not cached
	}
	retry := int64(out.RetryAfter / time.Microsecond)
	var e denyEntry
	e.rate, e.period, e.burst, e.cost = op.Rate, op.Period, op.Burst, op.Cost
	if b.clock != nil {
		e.expiry, e.retryAt = callAt+retry, callAt+retry
	} else {
		e.expiry = callAt + retry - 1 - retry>>10
		e.retryAt = (b.realMono()+999)/1000 + retry
	}
	h := c.hash(op.Key)
	sl := &c.slots[h%denySlots]
	s := &c.shards[h%denyShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl.gen.Load() != t.gens[k] {
		return // something that may have changed the bucket completed meanwhile
	}
	if old, ok := s.m[op.Key]; ok {
		e.probe = old.probe // released by its own decision
	} else {
		size := len(op.Key) + entryOverhead
		if size > c.maxBytes {
			return // a key longer than a shard's share: not cached
		}
		for s.bytes+size > c.maxBytes && len(s.m) > 0 {
			for key := range s.m { // a random entry
				c.remove(s, key)
				s.evictions.Add(1)
				break
			}
		}
		s.bytes += size
	}
	s.m[op.Key] = e
	s.n.Store(int32(len(s.m)))
}

package stack

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucket"
	"github.com/sluicehq/sluice/internal/enginekit"
	"github.com/sluicehq/sluice/internal/hashmatch"
)

var errNegativeCost = errors.New("stack: negative token cost")

// item is one bucket that applies to the request being decided.
type item struct {
	rb *rateBucket // and through it, its entry and limit
	// A per-value bucket's key: kb[k0:k1] in the general plan's key
	// buffer (reservations keep k0 and k1), or key (the other plans).
	key    string
	k0, k1 int32
	rank   int32 // rb.rank, kept here for the sort
	taken  bool
	// shadowed is set when a shadow limit's bucket could not give the cost.
	shadowed bool
	cost     int
	// left is what the bucket held after the full take refused or decided
	// (what a MemoryBackend reports in Outcome.Remaining).
	left  int64
	lease uint64       // connections: the lease taken
	grant bucket.Grant // a bucket: what to give back if a later limit denies
}

// evaluateGeneral decides a request on the general plan: every shape of
// configuration, with or without a backend, reservations, and the
// evaluated list. Buffers live on the stack so the allowed path allocates
// nothing for ordinary configurations.
//
// Each distinct dimension name is looked up in keys once and its value
// hashed at most once (for matching); limits with the same keys as the one
// visited before share its values, hashes and encoding. A wildcard entry's
// bucket key is the request's value at its "*" position, or a keyed
// 128-bit digest of its values (appendBucketKey), so the memory of a
// bucket never grows with the length of the values. Items arrive nearly in
// rank order (c.order) and are kept sorted by an insertion on their
// precomputed rank; then the decider takes them in that order.
//
// With r non-nil (Reserve), connections limits are evaluated too, and on an
// allowed decision the buckets taken are recorded in r for settlement.
//
// ns and at are the instant as evaluate takes it.
func (s *Stack) evaluateGeneral(ctx context.Context, c *compiled, keys *sluice.Keys, ns int64, at *time.Time, tokens int, r *reservation, d *sluice.Decision) error {
	var t time.Time
	if at != nil {
		t = *at
	} else {
		t = bucket.TimeOfNs(ns)
	}
	if c.big {
		// More than the stack buffers hold: pooled buffers, so that large
		// configurations do not allocate per request either.
		sc := scratchPool.Get().(*scratch)
		b := bufs{items: sc.items[:0], kb: sc.kb[:0], dims: dimCache{val: sc.dimVal[:], hash: sc.dimHash[:]}, vals: sc.vals[:], hashes: sc.hashes[:]}
		items, kb, err := s.evaluateInto(ctx, c, keys, t, ns, tokens, r, d, &b)
		clear(items) // drop pointers into the configuration and the request
		clear(sc.dimVal[:])
		clear(sc.vals[:])
		sc.items, sc.kb = items[:0], kb[:0]
		scratchPool.Put(sc)
		return err
	}
	// Sized for ordinary configurations; compile sets big beyond.
	var (
		items   [inlineItems]item
		kb      [inlineKeyBytes]byte
		dimVal  [inlineDims]string
		dimHash [inlineDims]uint64
		vals    [inlineDims]string
		hashes  [inlineDims]uint64
	)
	var b bufs // filled field by field, not copied from a literal (see evaluateInto)
	b.items, b.kb = items[:0], kb[:0]
	b.dims.val, b.dims.hash = dimVal[:], dimHash[:]
	b.vals, b.hashes = vals[:], hashes[:]
	_, _, err := s.evaluateInto(ctx, c, keys, t, ns, tokens, r, d, &b)
	return err
}

// Stack buffers of evaluate: a configuration whose requests may need more
// (compiled.big) uses pooled ones.
const (
	inlineItems    = 4   // buckets per request
	inlineKeyBytes = 128 // per-value bucket keys per request
	inlineDims     = 4   // distinct dimension names, and keys of one limit
	// pooledDims is how many distinct dimension names a pooled buffer
	// resolves and hashes once each; names beyond are resolved per limit.
	pooledDims = 64
)

// bufs are evaluate's buffers: items and kb grow by append; dimVal and
// dimHash cache each distinct dimension's value and hash (len ≥ the
// number of names cached, at most 64); vals and hashes hold one limit's
// (len ≥ the keys of any limit).
type bufs struct {
	items  []item
	kb     []byte
	dims   dimCache
	vals   []string
	hashes []uint64
}

// scratch holds pooled buffers of evaluate.
type scratch struct {
	items   []item
	kb      []byte
	dimVal  [pooledDims]string
	dimHash [pooledDims]uint64
	vals    [hashmatch.MaxKeys]string
	hashes  [hashmatch.MaxKeys]uint64
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// evaluateInto is evaluate with its buffers given; it returns items and kb
// as grown.
func (s *Stack) evaluateInto(ctx context.Context, c *compiled, keys *sluice.Keys, t time.Time, ns int64, tokens int, r *reservation, d *sluice.Decision, b *bufs) ([]item, []byte, error) {
	items, kb := b.items, b.kb
	dc := &b.dims
	// The encoding buffer stays a local: stored through a pointer (in
	// matchState) it would move to the heap.
	var encArr [128]byte
	enc := encArr[:0]
	var ms matchState
	ms.vals, ms.hashes = b.vals, b.hashes
	dc.prefill(keys, c)

	for _, l := range c.order {
		var (
			he     *hotEntry
			k0, k1 int32
		)
		if l.single {
			// One key and only the all-wildcard entry (per-caller,
			// per-target…): no matching, the value is the bucket key.
			di := l.dim[0]
			var v string
			var ok bool
			if bit := uint64(1) << uint(di); dc.resolved&bit != 0 { // resolved already?
				v, ok = dc.val[di], dc.present&bit != 0
			} else {
				v, ok = dc.resolve(keys, di, l.keys[0])
			}
			if !ok {
				continue // a missing dimension skips the limit
			}
			he = &l.hot[l.all]
			k0 = int32(len(kb))
			kb = appendBucketKey1(kb, v)
			k1 = int32(len(kb))
		} else {
			var idx int
			var ok bool
			idx, ok, enc = ms.match(l, dc, keys, enc)
			if !ok {
				continue // a missing dimension, or no entry: the limit does not apply
			}
			he = &l.hot[idx]
			if n := len(l.keys); int(he.exact) < n {
				k0 = int32(len(kb))
				kb = appendBucketKey(kb, ms.vals[he.exact:n])
				k1 = int32(len(kb))
			}
		}
		if rb := he.rb; rb != nil {
			items = addItem(items, rb, k0, k1, tokens, r != nil)
			for _, rb := range he.more {
				items = addItem(items, rb, k0, k1, tokens, r != nil)
			}
		}
	}

	if s.backend != nil && len(items) > 0 {
		return items, kb, s.decideBackend(ctx, items, keys, t, r, d)
	}

	dec := decider{s: s, t: t, ns: ns, maxWindow: c.maxWindow, denied: -1, reserve: r != nil}
	for i := range items {
		dec.take(items, kb, i, d, keys)
	}
	dec.finish(items, d, keys)
	if r != nil && dec.denied < 0 {
		r.record(items, kb, t)
	}
	if enginekit.EvaluatedRequested(ctx) {
		n := len(items)
		if dec.denied >= 0 {
			n = dec.denied + 1
		}
		d.Evaluated = evaluatedList(items[:n], keys)
	}
	return items, kb, nil
}

// tighter returns the bucket an allowed decision describes after seeing
// rb with rem left, given the one so far (tight, with left): the least
// left, the first seen among equals (buckets come in rank order). Shadow
// and connections buckets never describe a decision.
func tighter(tight *rateBucket, left int64, rb *rateBucket, rem int64) (*rateBucket, int64) {
	if rb.shadow || rb.kind == kindConnections || (tight != nil && rem >= left) {
		return tight, left
	}
	return rb, rem
}

// allowed writes an allowed decision into d, described by tight with left
// units remaining (no limit applied when tight is nil).
func allowed(d *sluice.Decision, tight *rateBucket, left int64) {
	d.Allowed = true
	if tight != nil {
		d.Limit, d.Remaining, d.Window = tight.burst, max(left, 0), tight.window
		d.LimitID = tight.lim.id
	}
}

func fillDenial(d *sluice.Decision, it *item, keys *sluice.Keys) {
	d.LimitID = it.rb.lim.id
	d.LimitKey = limitKey(it, keys)
	d.Metric = it.rb.metric
	d.MatchedEntry = it.rb.ent.values
	d.ResolvedValues = resolvedValues(it.rb.lim, keys)
	d.Limit, d.Remaining, d.Window = it.rb.burst, 0, it.rb.window
}

// resolvedValues looks up the request's value of each of l's keys again:
// only denials and reports need them, so the hot path keeps no copy.
func resolvedValues(l *limit, keys *sluice.Keys) []string {
	out := make([]string, len(l.keys))
	for k, name := range l.keys {
		out[k], _ = keys.Get(name)
	}
	return out
}

// cost is what a request costing tokens of "tokens" limits (and one of
// every other) takes from rb.
func (rb *rateBucket) cost(tokens int) int {
	cost := 1
	if rb.kind == kindTokens {
		cost = tokens
	}
	if rb.rate == 0 && cost == 0 {
		cost = 1 // rate 0 blocks every matching request, whatever it costs
	}
	return cost
}

// addItem appends rb's item to items, kept sorted by rank: items arrive
// nearly in rank order, so an insertion moves little. Connections limits
// are skipped unless reserving (conns).
func addItem(items []item, rb *rateBucket, k0, k1 int32, tokens int, conns bool) []item {
	if rb.kind == kindConnections && !conns {
		return items // enforced by Reserve only
	}
	cost := rb.cost(tokens)
	// Built in place: a struct literal copied in would be read back in
	// 16-byte moves from 8-byte stores (a store-forwarding stall).
	i := len(items)
	items = append(items, item{})
	it := &items[i]
	it.rb, it.k0, it.k1, it.rank, it.cost = rb, k0, k1, rb.rank, cost
	for i > 0 && items[i].rank < items[i-1].rank {
		items[i], items[i-1] = items[i-1], items[i]
		i--
	}
	return items
}

// evaluatedList renders "<rateLimitId>:<metric>:<values>" for each item (see
// evaluatedName), in evaluation order (the order the seed's example shows:
// the stricter limit first), once each: two rates of one metric of one
// limit are one entry.
func evaluatedList(items []item, keys *sluice.Keys) []string {
	out := make([]string, 0, len(items))
	for i := range items {
		it := &items[i]
		e := evaluatedName(it, keys)
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// decideBackend hands the ordered buckets to the backend in one call.
func (s *Stack) decideBackend(ctx context.Context, items []item, keys *sluice.Keys, t time.Time, r *reservation, d *sluice.Decision) error {
	ops := make([]Op, len(items))
	for i := range items {
		it := &items[i]
		key := it.rb.keyPrefix
		if it.rb.ent.exact < len(it.rb.lim.keys) {
			key = wildcardKey(key, resolvedValues(it.rb.lim, keys)[it.rb.ent.exact:])
		}
		ops[i] = Op{Key: key, Rate: it.rb.rate, Period: time.Duration(it.rb.period), Burst: it.rb.burst, Cost: int64(it.cost), Shadow: it.rb.shadow}
		if it.rb.kind == kindConnections {
			ops[i] = Op{Key: key, Burst: it.rb.burst, Cost: 1, Shadow: it.rb.shadow, Conn: true, Lease: s.newLease(), TTL: s.leaseTTL}
		}
	}
	out, err := s.backend.Take(ctx, t, ops)
	if err != nil {
		if s.onError != nil {
			s.onError(err)
		}
		if s.failClosed {
			return err
		}
		d.Allowed = true // fail open
		return nil
	}
	if s.onError != nil {
		for _, n := range out.Notices {
			s.onError(n)
		}
	}
	for _, i := range out.ShadowDenied {
		if i >= 0 && i < len(items) {
			d.Shadowed = append(d.Shadowed, limitKey(&items[i], keys))
		}
	}
	n := len(items)
	if out.Denied >= 0 && out.Denied < len(items) {
		it := &items[out.Denied]
		d.RetryAfter, d.Permanent, d.OverBurst = out.RetryAfter, out.Permanent, out.OverBurst
		fillDenial(d, it, keys)
		n = out.Denied + 1
	} else {
		var tight *rateBucket
		var left int64
		for i := range items[:min(len(items), len(out.Remaining))] {
			tight, left = tighter(tight, left, items[i].rb, out.Remaining[i])
		}
		allowed(d, tight, left)
		if r != nil {
			r.at = t
			for i, op := range ops {
				if slices.Contains(out.ShadowDenied, i) {
					continue // took nothing
				}
				r.ops = append(r.ops, op)
				r.opTokens = append(r.opTokens, items[i].rb.metric == sluice.MetricTokens)
			}
		}
	}
	if enginekit.EvaluatedRequested(ctx) {
		d.Evaluated = evaluatedList(items[:n], keys)
	}
	return nil
}

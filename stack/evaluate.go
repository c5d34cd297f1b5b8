package stack

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/bucket"
	"github.com/sluicehq/sluice/match"
)

var errNegativeCost = errors.New("stack: negative token cost")

// item is one bucket that applies to the request being decided.
type item struct {
	rb     *rateBucket // and through it, its entry and limit
	k0, k1 int32       // the per-value bucket key (appendBucketKey) in the key buffer (tables only)
	rank   int32       // rb.rank, kept here for the sort
	taken  bool
	cost   int
	lease  uint64       // connections: the lease taken
	grant  bucket.Grant // a bucket: what to give back if a later limit denies
}

// take takes the item's cost from its bucket (a probe after a denial).
func (it *item) take(kb []byte, t time.Time, s *Stack) bucket.Result {
	rb := it.rb
	if rb.shared != nil {
		return rb.shared.TakeN(t, it.cost)
	}
	if rb.table != nil {
		return rb.table.get().TakeBytes(kb[it.k0:it.k1], t, it.cost)
	}
	return it.takeConn(kb, t, s)
}

// takeConn takes a slot of a connections limit.
func (it *item) takeConn(kb []byte, t time.Time, s *Stack) bucket.Result {
	rb := it.rb
	var ok bool
	var left int64
	it.lease = s.leaseSeq.Add(1)
	if rb.conn != nil {
		ok, left = rb.conn.acquire(t, it.lease, rb.burst, s.leaseTTL)
	} else {
		ok, left = rb.connTab.acquire(kb[it.k0:it.k1], t, it.lease, rb.burst, s.leaseTTL)
	}
	if ok {
		return bucket.Result{OK: true, Remaining: left}
	}
	if rb.burst == 0 {
		return bucket.Result{Permanent: true}
	}
	return bucket.Result{RetryAfter: connRetryAfter}
}

// refund gives back what the item took: a bucket's grant (refused only
// when a reload changed the bucket's rate or burst since, which converted
// its tokens then), or a connections slot.
func (it *item) refund(kb []byte) {
	rb := it.rb
	switch {
	case rb.shared != nil:
		_ = rb.shared.GiveBack(&it.grant, int(it.grant.Outstanding()))
	case rb.table != nil:
		rb.table.GiveBackBytes(kb[it.k0:it.k1], &it.grant, int(it.grant.Outstanding()))
	case rb.conn != nil:
		rb.conn.release(it.lease)
	default:
		rb.connTab.release(kb[it.k0:it.k1], it.lease)
	}
}

// evaluate decides one request against c's plan. Buffers live on the stack
// so the allowed path allocates nothing for ordinary configurations.
//
// Each distinct dimension name is looked up in keys once and its value
// hashed at most once (for matching); limits with the same keys as the one
// visited before share its values, hashes and encoding. A wildcard entry's
// bucket key is the request's value at its "*" position, or a keyed
// 128-bit digest of its values (appendBucketKey), so the memory of a
// bucket never grows with the length of the values. Items arrive nearly in
// rank order (c.order) and are kept sorted by an insertion on their
// precomputed rank.
//
// With r non-nil (Reserve), connections limits are evaluated too, and on an
// allowed decision the buckets taken are recorded in r for settlement.
//
// The decision is written into *d (zero on entry), saving copies of a large
// struct on the hot path.
func (s *Stack) evaluate(ctx context.Context, c *compiled, keys *sluice.Keys, t time.Time, tokens int, r *reservation, d *sluice.Decision) error {
	if r == nil && s.backend == nil {
		switch {
		case c.singles != nil:
			if s.evaluateSingles(ctx, c, keys, t, tokens, d) {
				return nil
			}
		case c.direct != nil:
			if s.evaluateDirect(ctx, c, keys, t, tokens, d) {
				return nil
			}
		}
	}
	if c.big {
		// More than the stack buffers hold: pooled buffers, so that large
		// configurations do not allocate per request either.
		sc := scratchPool.Get().(*scratch)
		b := bufs{items: sc.items[:0], kb: sc.kb[:0], dims: dimCache{val: sc.dimVal[:], hash: sc.dimHash[:]}, vals: sc.vals[:], hashes: sc.hashes[:]}
		items, kb, err := s.evaluateInto(ctx, c, keys, t, tokens, r, d, &b)
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
	_, _, err := s.evaluateInto(ctx, c, keys, t, tokens, r, d, &b)
	return err
}

// evaluateSingles decides a request against a singles plan (see
// compiled.singles) when every bucket admits it: each limit's value is its
// bucket's key, taken directly, in rank order. On the first refusal it
// gives back what it took and returns false, leaving d untouched, and
// evaluate decides the request again on the general path, which reports the
// denial (a refused take takes nothing, so the state is as before the call,
// up to concurrent requests). It returns false at once when the context asks
// for the evaluated list, and for a value too long to be its own bucket key.
func (s *Stack) evaluateSingles(ctx context.Context, c *compiled, keys *sluice.Keys, t time.Time, tokens int, d *sluice.Decision) bool {
	if sluice.EvaluatedRequested(ctx) {
		return false
	}
	var (
		taken [inlineItems]struct {
			tab *bucket.Table
			v   string
			g   bucket.Grant
		}
		n     int
		tight *rateBucket
		left  int64
	)
	for i := range c.singles {
		sl := &c.singles[i]
		v, found := keys.Get(sl.name)
		if !found {
			continue // a missing dimension skips the limit
		}
		rb := sl.rb
		cost := rb.cost(tokens)
		var ok bool
		var rem int64
		var g bucket.Grant
		tab := rb.table.get()
		if len(v) <= rawMax { // a longer value's key is a digest: the general path
			ok, rem, g = tab.TryTakeN(v, t, cost)
		}
		if !ok {
			for j := n - 1; j >= 0; j-- {
				tk := &taken[j]
				_ = tk.tab.GiveBack(tk.v, &tk.g, int(tk.g.Outstanding())) // see item.refund
			}
			return false
		}
		taken[n].tab, taken[n].v, taken[n].g = tab, v, g
		n++
		tight, left = tighter(tight, left, rb, rem)
	}
	allowed(d, tight, left)
	return true
}

// directTake is one bucket evaluateDirect takes: its key is the per-value
// value itself, or kb[k0:k1] (a digest) when k1 > k0; none for a shared
// bucket.
type directTake struct {
	rb     *rateBucket
	key    string
	k0, k1 int32
	cost   int
	g      bucket.Grant
}

// evaluateDirect decides a request against a direct plan (see
// compiled.direct) when every bucket admits it: each limit's entry is
// matched (MatchHashed: no encoding built) and its buckets listed, at most
// inlineItems of them, kept in rank order by an insertion; a value that is
// its own bucket key is used in place (only digests are written out). They
// are taken in rank order, as on the general path: a request it denies
// never reaches, and so never creates, the per-value buckets ranked after
// the denying one, which a permanent denial does not even probe. When all
// succeed the tightest bucket reported is the one with the least left, the
// first among equals. On the first refusal it gives back what it took and
// returns false, leaving d untouched, and evaluate decides the request
// again on the general path, which reports the denial (as evaluateSingles
// does). It returns false at once when the context asks for the evaluated
// list.
func (s *Stack) evaluateDirect(ctx context.Context, c *compiled, keys *sluice.Keys, t time.Time, tokens int, d *sluice.Decision) bool {
	if sluice.EvaluatedRequested(ctx) {
		return false
	}
	var (
		list   [inlineItems]directTake
		n      int
		kb     [inlineKeyBytes]byte
		kn     int32
		vals   [inlineDims]string
		hashes [inlineDims]uint64
		tight  *rateBucket
		left   int64
	)
plan:
	for _, l := range c.direct {
		var he *hotEntry
		var key string
		var k0, k1 int32
		nk := len(l.keys)
		for k, name := range l.keys {
			v, ok := keys.Get(name)
			if !ok {
				continue plan // a missing dimension skips the limit
			}
			vals[k] = v
		}
		if l.single {
			he = &l.hot[l.all]
		} else {
			for k := range l.depth {
				hashes[k] = match.Hash(vals[k])
			}
			idx, ok := l.matcher.MatchHashed(vals[:nk], hashes[:l.depth])
			if !ok {
				continue // no entry: the limit does not apply
			}
			he = &l.hot[idx]
		}
		if e := int(he.exact); e < nk {
			if w := vals[e:nk]; len(w) == 1 && len(w[0]) <= rawMax {
				key = w[0] // its own bucket key: no copy
			} else {
				k0 = kn
				kn = int32(len(appendBucketKey(kb[:kn], w)))
				k1 = kn
			}
		}
		for j := -1; j < len(he.more); j++ {
			rb := he.rb
			if j >= 0 {
				rb = he.more[j]
			}
			if rb == nil || rb.kind == kindConnections {
				continue // enforced by Reserve only
			}
			// Field by field: a struct literal copied in would be read back
			// in 16-byte moves from 8-byte stores (a store-forwarding stall).
			i := n
			tk := &list[i]
			tk.rb, tk.key, tk.k0, tk.k1, tk.cost = rb, key, k0, k1, rb.cost(tokens)
			n++
			for i > 0 && list[i].rb.rank < list[i-1].rb.rank {
				list[i], list[i-1] = list[i-1], list[i]
				i--
			}
		}
	}
	for i := range n {
		tk := &list[i]
		rb := tk.rb
		var ok bool
		var rem int64
		switch {
		case rb.shared != nil:
			ok, rem, tk.g = rb.shared.TryTakeN(t, tk.cost)
		case tk.k1 > tk.k0:
			ok, rem, tk.g = rb.table.get().TryTakeBytes(kb[tk.k0:tk.k1], t, tk.cost)
		default:
			ok, rem, tk.g = rb.table.get().TryTakeN(tk.key, t, tk.cost)
		}
		if !ok {
			for j := i - 1; j >= 0; j-- { // see item.refund
				tk := &list[j]
				k := int(tk.g.Outstanding())
				switch {
				case tk.rb.shared != nil:
					_ = tk.rb.shared.GiveBack(&tk.g, k)
				case tk.k1 > tk.k0:
					tk.rb.table.GiveBackBytes(kb[tk.k0:tk.k1], &tk.g, k)
				default:
					_ = tk.rb.table.get().GiveBack(tk.key, &tk.g, k)
				}
			}
			return false
		}
		tight, left = tighter(tight, left, rb, rem)
	}
	allowed(d, tight, left)
	return true
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
	vals    [match.MaxKeys]string
	hashes  [match.MaxKeys]uint64
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// evaluateInto is evaluate with its buffers given; it returns items and kb
// as grown.
func (s *Stack) evaluateInto(ctx context.Context, c *compiled, keys *sluice.Keys, t time.Time, tokens int, r *reservation, d *sluice.Decision, b *bufs) ([]item, []byte, error) {
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

	var tight *rateBucket
	var tightRemaining int64
	denied := -1
	var res bucket.Result // the denying take's result
	for i := range items {
		it := &items[i]
		// A Result has too many fields to live in registers: it goes
		// through memory, stored field by field and read back in 16-byte
		// moves (a store-forwarding stall on every take). The allowed path
		// asks the buckets for OK and Remaining only; a denial or a
		// reservation gets the full Result.
		var ok bool
		var left int64
		if rb := it.rb; r != nil || (rb.shared == nil && rb.table == nil) {
			res = it.take(kb, t, s) // a reservation keeps the Result
			ok, left, it.grant = res.OK, res.Remaining, res.Grant
		} else if rb.shared != nil {
			ok, left, it.grant = rb.shared.TryTakeN(t, it.cost)
		} else {
			ok, left, it.grant = rb.table.get().TryTakeBytes(kb[it.k0:it.k1], t, it.cost)
		}
		if !ok && r == nil && (it.rb.shared != nil || it.rb.table != nil) {
			// A refusal took nothing: take again for the full Result (which
			// may now succeed, and then has taken).
			res = it.take(kb, t, s)
			ok, left, it.grant = res.OK, res.Remaining, res.Grant
		}
		if ok {
			it.taken = true
			tight, tightRemaining = tighter(tight, tightRemaining, it.rb, left)
			continue
		}
		if it.rb.shadow {
			d.Shadowed = append(d.Shadowed, limitKey(it, keys))
			continue
		}
		denied = i
		d.RetryAfter = res.RetryAfter
		d.Permanent = res.Permanent || res.OverBurst
		d.OverBurst = res.OverBurst && it.rb.burst > 0
		if res.BudgetFull { // WithMaxBuckets: no room for this request's bucket
			d.Capacity, d.Permanent = true, false
			d.RetryAfter = max(res.RetryAfter, c.maxWindow)
		}
		break
	}

	if denied < 0 {
		allowed(d, tight, tightRemaining)
		if r != nil {
			r.record(items, kb, t)
		}
	} else {
		it := &items[denied]
		// A denied request consumes nothing: give back what was taken.
		for j := denied - 1; j >= 0; j-- {
			if items[j].taken {
				items[j].refund(kb)
			}
		}
		// RetryAfter must not be early: the buckets not reached may need
		// longer. Probe each (take and give back at once).
		if !d.Permanent {
			for j := denied + 1; j < len(items); j++ {
				o := &items[j]
				if o.rb.shadow {
					continue
				}
				if o.rb.metric == sluice.MetricConnections {
					continue // a probe cannot tell when a slot frees
				}
				res := o.take(kb, t, s)
				switch {
				case res.OK:
					o.grant = res.Grant
					o.refund(kb)
				case res.OverBurst || (res.Permanent && !res.BudgetFull):
					d.Permanent, d.RetryAfter = true, 0
					d.OverBurst = o.rb.burst > 0
				case res.BudgetFull:
					d.RetryAfter = max(d.RetryAfter, res.RetryAfter, c.maxWindow)
				default:
					d.RetryAfter = max(d.RetryAfter, res.RetryAfter)
				}
				if d.Permanent {
					break
				}
			}
		}
		fillDenial(d, it, keys)
	}
	if sluice.EvaluatedRequested(ctx) {
		n := len(items)
		if denied >= 0 {
			n = denied + 1
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

// evaluatedList renders "{rateLimitId}:{metric}:{v1,v2}" for each item, in
// evaluation order (the order the seed's example shows: the stricter limit
// first), once each: two rates of one metric of one limit are one entry.
func evaluatedList(items []item, keys *sluice.Keys) []string {
	out := make([]string, 0, len(items))
	for i := range items {
		it := &items[i]
		e := it.rb.lim.id + ":" + it.rb.metric + ":" + strings.Join(resolvedValues(it.rb.lim, keys), ",")
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
	if sluice.EvaluatedRequested(ctx) {
		d.Evaluated = evaluatedList(items[:n], keys)
	}
	return nil
}

// wildcardKey appends the request's values at the entry's "*" positions to a
// bucket key prefix, in BucketKey's length-prefixed form.
func wildcardKey(prefix string, values []string) string {
	n := len(prefix)
	for i, v := range values {
		if i > 0 {
			n++
		}
		n += decimalLen(len(v)) + 1 + len(v)
	}
	// One allocation, of the exact size: the Builder's bytes become the
	// string.
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteString(prefix)
	var num [20]byte
	for i, v := range values {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.Write(strconv.AppendInt(num[:0], int64(len(v)), 10))
		sb.WriteByte(':')
		sb.WriteString(v)
	}
	return sb.String()
}

// decimalLen is the number of decimal digits of n ≥ 0.
func decimalLen(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// limitKey renders "<rateLimitId>/<key>=<value>[,<key>=<value>…]" with the
// request's resolved values. Names and values are escaped (see appendEscaped)
// so the rendering is unambiguous: ("p,route=q", "r") and ("p", "q,route=r")
// give different keys, while plain values render unchanged.
func limitKey(it *item, keys *sluice.Keys) string {
	b := make([]byte, 0, 64)
	b = append(b, it.rb.lim.id...)
	b = append(b, '/')
	for k, name := range it.rb.lim.keys {
		if k > 0 {
			b = append(b, ',')
		}
		v, _ := keys.Get(name)
		b = appendEscaped(b, name)
		b = append(b, '=')
		b = appendEscaped(b, v)
	}
	return string(b)
}

// appendEscaped appends s to b with the LimitKey separators ',' '=' '/' and
// the escape character '%' percent-encoded (%2C %3D %2F %25); every other
// byte is kept as is.
func appendEscaped(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ',', '=', '/', '%':
			b = append(b, '%', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return b
}

// matchState carries a request's resolved values, hashes and encoding from
// one multi-key limit to the next (evaluateInto's plan loop), kept out of
// that loop so that it holds fewer live values across calls.
type matchState struct {
	vals      []string // the values of prev's keys
	hashes    []uint64 // hashes[:hashedTo] are those of vals
	prev      *limit   // the last limit whose values are in vals
	hashedTo  int
	encodedTo int // match's enc holds the encoding of vals[:encodedTo]
	ends      [match.MaxKeys + 1]int
	pre       [match.MaxKeys + 1]uint64 // pre[p]: prefix hash of vals[:p], p ≤ hashedTo
}

// match resolves l's values (a limit with the same dimension keys as the
// one matched just before reuses them), hashes and encodes them (into enc,
// returned as grown) as deep as l matches, and returns the index of l's
// most specific entry; false when a dimension is missing or no entry
// matches.
func (ms *matchState) match(l *limit, dc *dimCache, keys *sluice.Keys, enc []byte) (int, bool, []byte) {
	vals, hashes := ms.vals, ms.hashes
	if !l.sameDims || ms.prev != l.prev {
		ms.prev, ms.hashedTo, ms.encodedTo = nil, 0, 0
		enc = enc[:0]
		for k, di := range l.dim {
			var v string
			var ok bool
			if bit := uint64(1) << uint(di); dc.resolved&bit != 0 { // resolved already?
				v, ok = dc.val[di], dc.present&bit != 0
			} else {
				v, ok = dc.resolve(keys, di, l.keys[k])
			}
			if !ok {
				return 0, false, enc
			}
			vals[k] = v
		}
	}
	for ; ms.hashedTo < l.depth; ms.hashedTo++ {
		h := ms.hashedTo
		hashes[h] = dc.hashOf(l.dim[h], vals[h])
		ms.pre[h+1] = match.NextPrefix(ms.pre[h], hashes[h])
		// The encoding too, while it fits: a hit is then confirmed by one
		// comparison, not one per value.
		if ms.encodedTo == h && len(enc)+len(vals[h])+binary.MaxVarintLen64 <= cap(enc) {
			enc = match.AppendValue(enc, vals[h])
			ms.encodedTo++
			ms.ends[ms.encodedTo] = len(enc)
		}
	}
	ms.prev = l
	if l.depth == 0 {
		return l.all, true, enc // only an all-wildcard entry: nothing to match
	}
	n := len(l.keys)
	if ms.encodedTo >= l.depth {
		i, ok := l.matcher.MatchEncoded(vals[:n], ms.pre[:], enc, ms.ends[:])
		return i, ok, enc
	}
	i, ok := l.matcher.MatchHashed(vals[:n], hashes[:l.depth])
	return i, ok, enc
}

// dimCache resolves each distinct dimension name of a request once and
// hashes its value at most once. Names with an index beyond the buffers are
// resolved and hashed each time.
type dimCache struct {
	val                       []string
	hash                      []uint64
	resolved, present, hashed uint64 // bit i: dimension i looked up, found, hashed
}

// prefill resolves every dimension name of c that the buffers hold, and
// hashes the values that some limit matches on: one tight loop before the
// plan's, instead of a call per limit and key inside it.
func (dc *dimCache) prefill(keys *sluice.Keys, c *compiled) {
	n := min(len(c.dims), len(dc.val), len(dc.hash), 64)
	for di := range n {
		v, ok := keys.Get(c.dims[di])
		if !ok {
			continue
		}
		bit := uint64(1) << uint(di)
		dc.val[di] = v
		dc.present |= bit
		if c.hashDims&bit != 0 {
			dc.hash[di] = match.Hash(v)
			dc.hashed |= bit
		}
	}
	if n == 64 {
		dc.resolved = ^uint64(0)
	} else {
		dc.resolved = uint64(1)<<uint(n) - 1
	}
}

// resolve looks up dimension di (not prefilled) in keys, caching it when
// the buffers hold it.
func (dc *dimCache) resolve(keys *sluice.Keys, di int32, name string) (string, bool) {
	v, ok := keys.Get(name)
	if int(di) < len(dc.val) {
		dc.resolved |= 1 << di
		if ok {
			dc.present |= 1 << di
			dc.val[di] = v
		}
	}
	return v, ok
}

// hashOf returns match.Hash(v) for dimension di's value v.
func (dc *dimCache) hashOf(di int32, v string) uint64 {
	if dc.hashed&(uint64(1)<<uint(di)) != 0 { // set only for di < len(hash)
		return dc.hash[di]
	}
	return dc.hashSlow(di, v)
}

func (dc *dimCache) hashSlow(di int32, v string) uint64 {
	h := match.Hash(v)
	if int(di) < len(dc.hash) {
		dc.hashed |= 1 << di
		dc.hash[di] = h
	}
	return h
}

// appendBucketKey1 is appendBucketKey for a single value.
func appendBucketKey1(kb []byte, v string) []byte {
	if len(v) <= rawMax {
		return append(kb, v...)
	}
	return appendBucketKey(kb, []string{v})
}

// digestLen is the length of a digest key; rawMax the longest value used
// as its own key.
const (
	digestLen = 16
	rawMax    = 32
)

// Two independent process-random seeds: a digest key is a keyed 128-bit
// digest, so callers can neither choose colliding values nor learn the
// seeds from decisions.
var digestSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// appendBucketKey appends the key of the bucket that values (the request's
// values at an entry's "*" positions, in order) select, at most rawMax
// bytes whatever the values' length. A single value of up to rawMax bytes is
// its own key (no hashing; most per-caller limits); otherwise the key is a
// 16-byte keyed digest. Each value is hashed whole and the per-value hashes
// are folded in order, so ("a,b", "c") and ("a", "b,c") differ. Two
// different value lists share a bucket only if a 128-bit digest equals
// another digest or a raw value: with random seeds about 2^-128 per pair,
// and even then the two only share one bucket (stricter, never more).
func appendBucketKey(kb []byte, values []string) []byte {
	if len(values) == 1 && len(values[0]) <= rawMax {
		return append(kb, values[0]...)
	}
	var a, b uint64
	for _, v := range values {
		a = fold(a, maphash.String(digestSeeds[0], v))
		b = fold(b, maphash.String(digestSeeds[1], v))
	}
	kb = binary.LittleEndian.AppendUint64(kb, a)
	return binary.LittleEndian.AppendUint64(kb, b)
}

// fold mixes the hash h of the next value into acc, order-dependently.
func fold(acc, h uint64) uint64 {
	acc = (bits.RotateLeft64(acc, 31) ^ h) * 0xBF58476D1CE4E5B9
	return acc ^ acc>>29
}

package stack

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/bucket"
	"github.com/sluicehq/sluice/match"
)

var errNegativeCost = errors.New("stack: negative token cost")

// item is one bucket that applies to the request being decided.
type item struct {
	lim    *limit
	ent    *entry
	rb     *rateBucket
	vals   int32 // offset of the limit's resolved values in the values buffer
	k0, k1 int32 // the per-value bucket key in the key buffer (tables only)
	cost   int
	taken  bool
	lease  uint64 // connections: the lease taken
}

func (it *item) take(kb []byte, t time.Time, s *Stack) bucket.Result {
	rb := it.rb
	switch {
	case rb.shared != nil:
		return rb.shared.TakeN(t, it.cost)
	case rb.table != nil:
		return rb.table.TakeBytes(kb[it.k0:it.k1], t, it.cost)
	}
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

func (it *item) refund(kb []byte, t time.Time) {
	rb := it.rb
	switch {
	case rb.shared != nil:
		rb.shared.RefundN(t, it.cost)
	case rb.table != nil:
		rb.table.RefundBytes(kb[it.k0:it.k1], t, it.cost)
	case rb.conn != nil:
		rb.conn.release(it.lease)
	default:
		rb.connTab.release(kb[it.k0:it.k1], it.lease)
	}
}

// before orders evaluation: customer before service limits, more dimension
// keys first, then the stricter rate first (rate/period compared exactly).
func (it *item) before(o *item) bool {
	if it.lim.service != o.lim.service {
		return !it.lim.service
	}
	if len(it.lim.keys) != len(o.lim.keys) {
		return len(it.lim.keys) > len(o.lim.keys)
	}
	return it.rb.rate*o.rb.period < o.rb.rate*it.rb.period
}

// evaluate decides one request against c. Buffers live on the stack so the
// allowed path allocates nothing for ordinary configurations.
//
// With r non-nil (Reserve), connections limits are evaluated too, and on an
// allowed decision the buckets taken are recorded in r for settlement.
//
// The decision is written into *d (zero on entry), saving copies of a large
// struct on the hot path.
func (s *Stack) evaluate(ctx context.Context, c *compiled, keys *sluice.Keys, t time.Time, tokens int, r *Reservation, d *sluice.Decision) error {
	var (
		valsArr  [16]string
		itemsArr [8]item
		keyArr   [128]byte
	)
	vals, items, kb := valsArr[:0], itemsArr[:0], keyArr[:0]

	for _, l := range c.limits {
		start := len(vals)
		resolved := true
		for _, name := range l.keys {
			v, ok := keys.Get(name)
			if !ok {
				resolved = false // a missing dimension skips the limit
				break
			}
			vals = append(vals, v)
		}
		if !resolved {
			vals = vals[:start]
			continue
		}
		idx, ok := l.matcher.Match(vals[start:])
		if !ok {
			vals = vals[:start] // no entry: the limit does not apply
			continue
		}
		en := l.entries[idx]
		var k0, k1 int32
		if en.exact < len(l.keys) {
			k0 = int32(len(kb))
			if wild := vals[start+en.exact:]; len(wild) == 1 {
				kb = append(kb, wild[0]...) // one value per table key: no encoding needed
			} else {
				for _, v := range wild {
					kb = match.AppendValue(kb, v)
				}
			}
			k1 = int32(len(kb))
		}
		for _, rb := range en.rates {
			cost := 1
			switch rb.kind {
			case kindConnections:
				if r == nil {
					continue // enforced by Reserve only
				}
			case kindTokens:
				cost = tokens
			}
			if rb.rate == 0 && cost == 0 {
				cost = 1 // rate 0 blocks every matching request, whatever it costs
			}
			it := item{lim: l, ent: en, rb: rb, vals: int32(start), k0: k0, k1: k1, cost: cost}
			// Insertion keeps the list ordered; it is short.
			i := len(items)
			items = append(items, it)
			for i > 0 && items[i].before(&items[i-1]) {
				items[i], items[i-1] = items[i-1], items[i]
				i--
			}
		}
	}

	if s.backend != nil && len(items) > 0 {
		return s.decideBackend(ctx, items, vals, t, r, d)
	}

	tight := -1
	var tightRemaining int64
	denied := -1
	for i := range items {
		it := &items[i]
		res := it.take(kb, t, s)
		if res.OK {
			it.taken = true
			if r != nil {
				r.setResult(i, res)
			}
			if !it.lim.shadow && it.rb.kind != kindConnections && (tight < 0 || res.Remaining < tightRemaining) {
				tight, tightRemaining = i, res.Remaining
			}
			continue
		}
		if it.lim.shadow {
			d.Shadowed = append(d.Shadowed, limitKey(it, vals))
			continue
		}
		denied = i
		d.RetryAfter = res.RetryAfter
		d.Permanent = res.Permanent || res.OverBurst
		d.OverBurst = res.OverBurst && it.rb.burst > 0
		break
	}

	if denied < 0 {
		d.Allowed = true
		if tight >= 0 {
			rb := items[tight].rb
			d.Limit, d.Remaining, d.Window = rb.burst, max(tightRemaining, 0), rb.window
			d.LimitID = items[tight].lim.id
		}
		if r != nil {
			r.record(items, kb, t)
		}
	} else {
		it := &items[denied]
		// A denied request consumes nothing: give back what was taken.
		for j := denied - 1; j >= 0; j-- {
			if items[j].taken {
				items[j].refund(kb, t)
			}
		}
		// RetryAfter must not be early: the buckets not reached may need
		// longer. Probe each (take and give back at once).
		if !d.Permanent {
			for j := denied + 1; j < len(items); j++ {
				o := &items[j]
				if o.lim.shadow {
					continue
				}
				if o.rb.metric == sluice.MetricConnections {
					continue // a probe cannot tell when a slot frees
				}
				res := o.take(kb, t, s)
				switch {
				case res.OK:
					o.refund(kb, t)
				case res.OverBurst || res.Permanent:
					d.Permanent, d.RetryAfter = true, 0
					d.OverBurst = o.rb.burst > 0
				default:
					d.RetryAfter = max(d.RetryAfter, res.RetryAfter)
				}
				if d.Permanent {
					break
				}
			}
		}
		fillDenial(d, it, vals)
	}
	if sluice.EvaluatedRequested(ctx) {
		n := len(items)
		if denied >= 0 {
			n = denied + 1
		}
		d.Evaluated = evaluatedList(items[:n], vals)
	}
	return nil
}

func fillDenial(d *sluice.Decision, it *item, vals []string) {
	d.LimitID = it.lim.id
	d.LimitKey = limitKey(it, vals)
	d.Metric = it.rb.metric
	d.MatchedEntry = it.ent.values
	d.ResolvedValues = slices.Clone(vals[it.vals : int(it.vals)+len(it.lim.keys)])
	d.Limit, d.Remaining, d.Window = it.rb.burst, 0, it.rb.window
}

// evaluatedList renders "{rateLimitId}:{metric}:{v1,v2}" for each item, in
// evaluation order (the order the seed's example shows: the stricter limit
// first), once each: two rates of one metric of one limit are one entry.
func evaluatedList(items []item, vals []string) []string {
	out := make([]string, 0, len(items))
	for i := range items {
		it := &items[i]
		e := it.lim.id + ":" + it.rb.metric + ":" + strings.Join(vals[it.vals:int(it.vals)+len(it.lim.keys)], ",")
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// decideBackend hands the ordered buckets to the backend in one call.
func (s *Stack) decideBackend(ctx context.Context, items []item, vals []string, t time.Time, r *Reservation, d *sluice.Decision) error {
	ops := make([]Op, len(items))
	for i := range items {
		it := &items[i]
		key := it.rb.keyPrefix
		if it.ent.exact < len(it.lim.keys) {
			key = wildcardKey(key, vals[int(it.vals)+it.ent.exact:int(it.vals)+len(it.lim.keys)])
		}
		ops[i] = Op{Key: key, Rate: it.rb.rate, Period: time.Duration(it.rb.period), Burst: it.rb.burst, Cost: int64(it.cost), Shadow: it.lim.shadow}
		if it.rb.kind == kindConnections {
			ops[i] = Op{Key: key, Burst: it.rb.burst, Cost: 1, Shadow: it.lim.shadow, Conn: true, Lease: s.newLease(), TTL: s.leaseTTL}
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
			d.Shadowed = append(d.Shadowed, limitKey(&items[i], vals))
		}
	}
	n := len(items)
	if out.Denied >= 0 && out.Denied < len(items) {
		it := &items[out.Denied]
		d.RetryAfter, d.Permanent, d.OverBurst = out.RetryAfter, out.Permanent, out.OverBurst
		fillDenial(d, it, vals)
		n = out.Denied + 1
	} else {
		d.Allowed = true
		tight := -1
		for i := range items {
			if items[i].lim.shadow || i >= len(out.Remaining) || items[i].rb.kind == kindConnections {
				continue
			}
			if tight < 0 || out.Remaining[i] < out.Remaining[tight] {
				tight = i
			}
		}
		if tight >= 0 {
			rb := items[tight].rb
			d.Limit, d.Remaining, d.Window = rb.burst, max(out.Remaining[tight], 0), rb.window
			d.LimitID = items[tight].lim.id
		}
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
		d.Evaluated = evaluatedList(items[:n], vals)
	}
	return nil
}

// wildcardKey appends the request's values at the entry's "*" positions to a
// bucket key prefix, in BucketKey's length-prefixed form.
func wildcardKey(prefix string, values []string) string {
	b := make([]byte, 0, len(prefix)+32)
	b = append(b, prefix...)
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	return string(b)
}

// limitKey renders "<rateLimitId>/<key>=<value>[,<key>=<value>…]" with the
// request's resolved values.
func limitKey(it *item, vals []string) string {
	var b strings.Builder
	b.WriteString(it.lim.id)
	b.WriteByte('/')
	for k, name := range it.lim.keys {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(vals[int(it.vals)+k])
	}
	return b.String()
}

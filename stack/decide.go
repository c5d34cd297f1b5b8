package stack

// The one in-memory decider. Every plan (the general one, the ordered one,
// the one-limit one) finds a request's buckets its own way and hands them,
// in rank order, one at a time, to a decider, which takes each, records a
// denial once, gives back what was taken before it, and probes the rest
// for RetryAfter. No plan decides a denial of its own, and none hands a
// refused request to another to decide again.

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucket"
)

// decider decides one request in memory from its items, taken in rank
// order. Its methods take the items, the key buffer their k0 and k1 index
// (nil when each key is in item.key), the Decision and the Keys as
// arguments: stored in the decider, which holds pointers that escape, they
// would escape with them (escape analysis does not tell fields apart), and
// the stack buffers with them.
type decider struct {
	s *Stack
	// ns is the instant buckets are taken at (bucket.NsOf(t)); t is it as
	// a Time, for connections slots, which only the general plan and a
	// MemoryBackend take (the one-limit and ordered plans leave t zero).
	ns int64
	t  time.Time
	// maxWindow is the RetryAfter of a Capacity denial (compiled.maxWindow).
	maxWindow time.Duration
	// tight and left describe an allowed decision (see tighter).
	tight *rateBucket
	left  int64
	// denied is the index of the denying item, or -1.
	denied int
	// reserve is set for Reserve: every take gets the full Result (and
	// connections slots are taken).
	reserve bool
}

// take decides items[i], the request's next bucket in rank order: taken
// (the allowed path asks the bucket for OK and Remaining only, and a
// refusal for the rest of its Result at the same time, so the bucket is
// asked once), or, after a denial, probed.
func (dc *decider) take(items []item, kb []byte, i int, d *sluice.Decision, keys *sluice.Keys) {
	it := &items[i]
	if dc.denied >= 0 {
		dc.probe(it, kb, d)
		return
	}
	rb := it.rb
	var ok bool
	var left int64
	var why bucket.Refusal
	switch {
	case dc.reserve || (rb.shared == nil && rb.table == nil):
		dc.refused(items, kb, i, d, keys) // a reservation keeps the full Result
		return
	case rb.shared != nil:
		ok, left, why = rb.shared.TryTakeGrantNs(dc.ns, it.cost, &it.grant)
	case it.k1 > it.k0:
		ok, left, why = rb.table.get().TryTakeGrantBytesNs(dc.ns, kb[it.k0:it.k1], it.cost, &it.grant)
	default:
		ok, left, why = rb.table.get().TryTakeGrantNs(dc.ns, it.key, it.cost, &it.grant)
	}
	if !ok {
		res := why.Result(left)
		dc.decide(items, kb, i, d, keys, &res)
		return
	}
	it.taken = true
	dc.tight, dc.left = tighter(dc.tight, dc.left, rb, left)
}

// refused takes items[i] with the full Result (a reservation's take, a
// connections slot) and decides it.
func (dc *decider) refused(items []item, kb []byte, i int, d *sluice.Decision, keys *sluice.Keys) {
	res := items[i].take(kb, dc)
	dc.decide(items, kb, i, d, keys, &res)
}

// decide decides items[i] from res, the full Result of its one take (a
// try's refusal, why.Result, or a take's): an OK take has taken. A shadow
// limit's refusal is reported and passes; any other refusal is the
// denial: what items[:i] took is given back, the last first.
func (dc *decider) decide(items []item, kb []byte, i int, d *sluice.Decision, keys *sluice.Keys, res *bucket.Result) {
	it := &items[i]
	it.left = res.Remaining
	if res.OK {
		it.taken, it.grant = true, res.Grant
		dc.tight, dc.left = tighter(dc.tight, dc.left, it.rb, res.Remaining)
		return
	}
	if it.rb.shadow {
		it.shadowed = true
		if keys != nil { // nil: a MemoryBackend's ops, reported by index
			d.Shadowed = append(d.Shadowed, limitKey(it, keys))
		}
		return
	}
	dc.denied = i
	d.RetryAfter = res.RetryAfter
	d.Permanent = res.Permanent || res.OverBurst
	d.OverBurst = res.OverBurst && it.rb.burst > 0
	if res.BudgetFull { // WithMaxBuckets: no room for this request's bucket
		d.Capacity, d.Permanent = true, false
		d.RetryAfter = max(res.RetryAfter, dc.maxWindow)
	}
	// A denied request consumes nothing: give back what was taken.
	for j := i - 1; j >= 0; j-- {
		if items[j].taken {
			items[j].refund(kb)
			items[j].taken = false
		}
	}
}

// probe takes a bucket after the denying one and gives it back at once, so
// that RetryAfter covers it too (RetryAfter must not be early).
func (dc *decider) probe(o *item, kb []byte, d *sluice.Decision) {
	if d.Permanent || o.rb.shadow || o.rb.metric == sluice.MetricConnections {
		return // a probe cannot tell when a slot frees
	}
	res := o.take(kb, dc)
	switch {
	case res.OK:
		o.grant = res.Grant
		o.refund(kb)
	case res.OverBurst || (res.Permanent && !res.BudgetFull):
		d.Permanent, d.RetryAfter = true, 0
		d.OverBurst = res.OverBurst && o.rb.burst > 0 // (a Stack's permanent refusal without OverBurst has burst 0)
	case res.BudgetFull:
		d.RetryAfter = max(d.RetryAfter, res.RetryAfter, dc.maxWindow)
	default:
		d.RetryAfter = max(d.RetryAfter, res.RetryAfter)
	}
}

// finish writes the decision of items (all handed to take) into d.
func (dc *decider) finish(items []item, d *sluice.Decision, keys *sluice.Keys) {
	if dc.denied < 0 {
		allowed(d, dc.tight, dc.left)
		return
	}
	fillDenial(d, &items[dc.denied], keys)
}

// take takes the item's cost from its bucket at dc's instant, with the
// full Result. A table's key is kb[it.k0:it.k1], or it.key when that is
// empty.
func (it *item) take(kb []byte, dc *decider) bucket.Result {
	rb := it.rb
	if rb.shared != nil {
		return rb.shared.TakeNs(dc.ns, it.cost)
	}
	if rb.table != nil {
		if it.k1 > it.k0 {
			return rb.table.get().TakeBytesNs(dc.ns, kb[it.k0:it.k1], it.cost)
		}
		return rb.table.get().TakeNs(dc.ns, it.key, it.cost)
	}
	if rb.memConn != nil {
		return rb.memConn.take(dc.t, it)
	}
	return it.takeConn(kb, dc.t, dc.s)
}

// takeConn takes a slot of a connections limit.
// (Connections limits are Reserve's only, on the general plan: the key is
// kb[it.k0:it.k1].)
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

// refund gives back what the item took: a bucket's grant (the grant is the
// item's own, so GiveBack cannot refuse it), or a connections slot.
func (it *item) refund(kb []byte) {
	rb := it.rb
	switch {
	case rb.shared != nil:
		_ = rb.shared.GiveBack(&it.grant, int(it.grant.Outstanding()))
	case rb.table != nil && it.k1 > it.k0:
		rb.table.GiveBackBytes(kb[it.k0:it.k1], &it.grant, int(it.grant.Outstanding()))
	case rb.table != nil:
		_ = rb.table.get().GiveBack(it.key, &it.grant, int(it.grant.Outstanding()))
	case rb.memConn != nil:
		rb.memConn.release(it)
	case rb.conn != nil:
		rb.conn.release(it.lease)
	default:
		rb.connTab.release(kb[it.k0:it.k1], it.lease)
	}
}

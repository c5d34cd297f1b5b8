package stack

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucket"
	"github.com/sluicehq/sluice/internal/enginekit"
)

// reservation is the record behind a sluice.Reservation of a Stack: what
// Reserve took, until the request ends.
//
// Records are pooled. Each is handed out as the Reservation of enginekit.NewHandle(r, gen);
// the first Settle with the current gen moves gen on and puts the record back
// in the pool, so a stale copy of the Reservation (its gen is old) can never
// act on the record's next use.
type reservation struct {
	gen       atomic.Uint64
	s         *Stack
	at        time.Time
	estimate  int
	slotsOnly bool // ReserveSlots: settling only releases connection slots
	// items are indexed like the evaluation's items: evaluate stores each
	// take's grant, recorded on success.
	n        int
	items    [4]resItem
	more     []resItem
	keys     []byte
	keyArr   [64]byte
	ops      []Op   // when decided by a Backend: what Take took
	opTokens []bool // which of ops are tokens buckets
}

type resItem struct {
	rb     *rateBucket // nil: nothing taken (a shadow limit that would deny)
	k0, k1 int32
	lease  uint64
	grant  bucket.Grant // the take, for give-backs
}

var reservations = sync.Pool{New: func() any {
	r := new(reservation)
	r.keys = r.keyArr[:0]
	return r
}}

// Records that grew beyond these go back to the pool without their spill
// buffers, so that one large request does not pin memory in the pool.
const (
	maxPooledItems = 32
	maxPooledKeys  = 1 << 10
)

func newReservation(s *Stack, estimate int, slotsOnly bool) *reservation {
	r := reservations.Get().(*reservation)
	r.s, r.estimate, r.slotsOnly = s, estimate, slotsOnly
	return r
}

// free clears r and puts it back in the pool. Its gen is left as it is: only
// a Settle moves it on, and only a settled record's handles exist.
func (r *reservation) free() {
	r.s, r.at, r.estimate, r.slotsOnly = nil, time.Time{}, 0, false
	r.items = [4]resItem{}
	r.n = 0
	if cap(r.more) > maxPooledItems {
		r.more = nil
	} else {
		clear(r.more)
		r.more = r.more[:0]
	}
	if cap(r.keys) > maxPooledKeys {
		r.keys = r.keyArr[:0]
	} else {
		r.keys = r.keys[:0]
	}
	if cap(r.ops) > maxPooledItems {
		r.ops, r.opTokens = nil, nil
	} else {
		clear(r.ops)
		r.ops, r.opTokens = r.ops[:0], r.opTokens[:0]
	}
	reservations.Put(r)
}

// handle returns the Reservation of r's current generation.
func (r *reservation) handle() sluice.Reservation {
	return sluice.Reservation(enginekit.NewHandle(r, r.gen.Load()))
}

func (r *reservation) slot(i int) *resItem {
	if i < len(r.items) {
		return &r.items[i]
	}
	for len(r.more) <= i-len(r.items) {
		r.more = append(r.more, resItem{})
	}
	return &r.more[i-len(r.items)]
}

func (r *reservation) record(items []item, kb []byte, t time.Time) {
	r.at = t
	r.keys = append(r.keys[:0], kb...)
	r.n = len(items)
	for i := range items {
		it := &items[i]
		ri := r.slot(i)
		if !it.taken {
			*ri = resItem{}
			continue
		}
		ri.rb, ri.k0, ri.k1, ri.lease, ri.grant = it.rb, it.k0, it.k1, it.lease, it.grant
	}
}

// holdsSlots reports whether r took a connection slot.
func (r *reservation) holdsSlots() bool {
	for _, op := range r.ops {
		if op.Conn {
			return true
		}
	}
	for i := 0; i < r.n; i++ {
		if rb := r.slot(i).rb; rb != nil && rb.kind == kindConnections {
			return true
		}
	}
	return false
}

// hasConnections reports whether any entry of c has a connections limit: a
// configuration without one never needs a reservation for its slots.
func hasConnections(c *compiled) bool {
	for _, l := range c.limits {
		for _, en := range l.entries {
			for _, rb := range en.rates {
				if rb.kind == kindConnections {
					return true
				}
			}
		}
	}
	return false
}

// Reserve takes one request, estimate units of every tokens limit and one
// slot of every connections limit that applies, all or nothing. A denial
// returns sluice.NoReservation. If the estimate exceeds what a tokens limit
// has left, the request is throttled before any work starts, with a
// RetryAfter honest for that cost (or a permanent denial when the estimate
// exceeds the limit's burst).
//
//	r, d, err := limits.Reserve(ctx, keys, estimate)
//	if err != nil || !d.Allowed { … }
//	defer r.Cancel()            // no-op once reconciled; frees slots on panic
//	usage := callModel()
//	r.Reconcile(usage.Total)
//
// Reconcile charges the tokens limits actual − estimate more (debt allowed)
// or gives back estimate − actual, and releases the connection slots;
// Cancel gives everything back. A give-back is bounded by the takes since
// the reservation (bucket.Grant): a settlement long after, once other
// requests took from a bucket that had refilled, returns only what a
// request that had cost the actual amount from the start would have left.
// Reserving and settling allocate nothing for ordinary configurations (the
// records are pooled).
//
// An unsettled reservation leaks nothing. Its token and request units were
// consumed at Reserve and refill like any consumption; its connection slots
// expire after the Stack's lease TTL (WithLeaseTTL). A Reconcile or Cancel
// after that still adjusts the token buckets and does not release a slot
// twice. A reservation made before a Reload settles on the buckets it took
// from; those are the buckets in force when the limit and entry were kept,
// and detached ones (limit removed) when not.
func (s *Stack) Reserve(ctx context.Context, keys sluice.Keys, estimate int) (sluice.Reservation, sluice.Decision, error) {
	return s.reserve(ctx, s.clockNow(), &keys, estimate, false)
}

// ReserveAt is Reserve at an explicit instant t (settling still reads the
// Stack's clock). Like Reserve, it returns sluice.NoReservation when the
// request is denied or undecided.
func (s *Stack) ReserveAt(ctx context.Context, t time.Time, keys sluice.Keys, estimate int) (sluice.Reservation, sluice.Decision, error) {
	return s.reserve(ctx, t, &keys, estimate, false)
}

// ReserveSlots implements sluice.SlotReserver: it decides the request as
// Allow does and holds a slot of every connections limit that applies to
// it, in memory or on the Stack's Backend (slots a fleet shares), released
// by the Reservation's Reconcile or Cancel; either releases the slots only,
// the request stays charged. A configuration without connections limits
// costs exactly an Allow and returns sluice.NoReservation; so does a request
// no connections limit applies to.
func (s *Stack) ReserveSlots(ctx context.Context, keys sluice.Keys) (r sluice.Reservation, d sluice.Decision, err error) {
	// ReserveSlotsAt's body on the Stack's clock, not a call to it: the
	// middlewares' admission path copies no Keys and makes no extra call.
	c := s.cfg.Load()
	if !c.conns {
		// Decided into the result itself, as Allow does: no Decision copied.
		if err = ctx.Err(); err == nil {
			if s.now == nil {
				err = s.evaluate(ctx, c, &keys, bucket.NowNs(), nil, 0, nil, &d)
			} else {
				t := s.now()
				err = s.evaluate(ctx, c, &keys, bucket.NsOf(t), &t, 0, nil, &d)
			}
		}
		return sluice.NoReservation, d, err
	}
	return s.reserve(ctx, s.clockNow(), &keys, 0, true)
}

// ReserveSlotsAt is ReserveSlots at an explicit instant t (settling still
// reads the Stack's clock). Like ReserveSlots, it returns
// sluice.NoReservation when the request is denied or undecided, or when no
// connections limit applies to it.
func (s *Stack) ReserveSlotsAt(ctx context.Context, t time.Time, keys sluice.Keys) (r sluice.Reservation, d sluice.Decision, err error) {
	c := s.cfg.Load()
	if !c.conns {
		// Decided into the result itself, as Allow does: no Decision copied.
		if err = ctx.Err(); err == nil {
			err = s.evaluate(ctx, c, &keys, bucket.NsOf(t), &t, 0, nil, &d)
		}
		return sluice.NoReservation, d, err
	}
	return s.reserve(ctx, t, &keys, 0, true)
}

func (s *Stack) reserve(ctx context.Context, t time.Time, keys *sluice.Keys, estimate int, slotsOnly bool) (sluice.Reservation, sluice.Decision, error) {
	var d sluice.Decision
	if err := ctx.Err(); err != nil {
		return sluice.NoReservation, d, err
	}
	if estimate < 0 {
		return sluice.NoReservation, d, errNegativeCost
	}
	r := newReservation(s, estimate, slotsOnly)
	err := s.evaluate(ctx, s.cfg.Load(), keys, bucket.NsOf(t), &t, estimate, r, &d)
	if err != nil || !d.Allowed || (slotsOnly && !r.holdsSlots()) {
		r.free()
		return sluice.NoReservation, d, err
	}
	return r.handle(), d, nil
}

// Settle implements enginekit.Settler for the Reservations a Stack hands out.
func (r *reservation) Settle(gen uint64, actual int, cancel bool) error {
	if !cancel && actual < 0 {
		return errNegativeCost
	}
	if !r.gen.CompareAndSwap(gen, gen+1) {
		return nil // settled already: this handle is stale
	}
	err := r.settle(int64(actual)-int64(r.estimate), cancel)
	r.free()
	return err
}

// settle releases the connection slots r holds and, unless r holds slots
// only (ReserveSlots), adjusts or gives back what it took by delta, or all
// of it on cancel: on the Backend for a reservation decided there, in
// memory otherwise.
func (r *reservation) settle(delta int64, cancel bool) error {
	if len(r.ops) > 0 {
		var adj []Op
		for i, op := range r.ops {
			taken := op.Cost // what the reservation's take took
			switch {
			case op.Conn:
				op.Cost = -1 // release the slot
			case r.slotsOnly:
				continue // the request stays charged
			case cancel:
				op.Cost = -op.Cost // the backend bounds it (Backend.Adjust)
			case r.opTokens[i] && delta < 0:
				op.Cost = max(delta, -op.Cost)
			case r.opTokens[i]:
				op.Cost = delta
			default:
				continue
			}
			if op.Cost != 0 {
				// a give-back is bounded by the take's instant and cost
				op.TakenAt, op.Taken = r.at, taken
				adj = append(adj, op)
			}
		}
		if len(adj) == 0 {
			return nil
		}
		err := r.s.backend.Adjust(context.Background(), r.s.clockNow(), adj)
		if err != nil && r.s.onError != nil {
			r.s.onError(err) // a middleware's deferred release ignores it
		}
		return err
	}
	kb := r.keys
	for i := 0; i < r.n; i++ {
		ri := r.slot(i)
		rb := ri.rb
		if rb == nil {
			continue // nothing was taken here
		}
		key := kb[ri.k0:ri.k1]
		switch {
		case rb.conn != nil:
			rb.conn.release(ri.lease)
		case rb.connTab != nil:
			rb.connTab.release(key, ri.lease)
		case r.slotsOnly:
			// the request stays charged
		case cancel:
			giveBack(rb, key, &ri.grant, ri.grant.Outstanding())
		case rb.metric == sluice.MetricTokens && delta > 0:
			if rb.shared != nil {
				rb.shared.ChargeN(r.s.clockNow(), int(delta))
			} else {
				rb.table.ChargeBytes(r.s.clockNow(), key, int(delta))
			}
		case rb.metric == sluice.MetricTokens && delta < 0:
			giveBack(rb, key, &ri.grant, min(-delta, ri.grant.Outstanding()))
		}
	}
	return nil
}

// giveBack gives back n units of the take g recorded, bounded by the takes
// since (see bucket.Grant): a late settlement never re-creates units that
// later requests may already have used, nor, after a reload that changed
// the bucket's rate or burst, what had refilled by the reload.
func giveBack(rb *rateBucket, key []byte, g *bucket.Grant, n int64) {
	if n <= 0 {
		return
	}
	if rb.shared != nil {
		_ = rb.shared.GiveBack(g, int(n))
	} else {
		rb.table.GiveBackBytes(key, g, int(n))
	}
}

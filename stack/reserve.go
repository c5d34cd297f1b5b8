package stack

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/bucket"
)

// Reservation holds what Reserve took from a Stack until the request ends.
// It implements sluice.Reservation.
//
// Lifetime: an unsettled reservation leaks nothing. Its token and request
// units were consumed at Reserve and refill like any consumption; its
// connection slots expire after the Stack's lease TTL (WithLeaseTTL). A
// Reconcile or Cancel after that still adjusts the token buckets and does
// not release a slot twice. A reservation made before a Reload settles on the
// buckets it took from; those are the buckets in force when the limit and
// entry were kept, and detached ones (limit removed) when not.
type Reservation struct {
	s         *Stack
	at        time.Time
	estimate  int
	actual    atomic.Int64
	hasActual atomic.Bool
	done      atomic.Bool
	// items are indexed like the evaluation's items: evaluate stores each
	// take's result as it happens (setResult), record the rest on success.
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
	cost   int
	lease  uint64
	res    bucket.Result // the take, for bounded refunds
}

func (r *Reservation) slot(i int) *resItem {
	if i < len(r.items) {
		return &r.items[i]
	}
	for len(r.more) <= i-len(r.items) {
		r.more = append(r.more, resItem{})
	}
	return &r.more[i-len(r.items)]
}

func (r *Reservation) setResult(i int, res bucket.Result) { r.slot(i).res = res }

func (r *Reservation) record(items []item, kb []byte, t time.Time) {
	r.at = t
	r.keys = append(r.keyArr[:0], kb...)
	r.n = len(items)
	for i := range items {
		it := &items[i]
		ri := r.slot(i)
		if !it.taken {
			*ri = resItem{}
			continue
		}
		ri.rb, ri.k0, ri.k1, ri.cost, ri.lease = it.rb, it.k0, it.k1, it.cost, it.lease
	}
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
func (s *Stack) Reserve(ctx context.Context, keys sluice.Keys, estimate int) (sluice.Reservation, sluice.Decision, error) {
	r, d, err := s.ReserveAt(ctx, keys, s.now(), estimate)
	if r == nil {
		return sluice.NoReservation, d, err
	}
	return r, d, err
}

// ReserveAt is Reserve at an explicit instant. It returns a nil
// *Reservation when the request is denied or undecided.
func (s *Stack) ReserveAt(ctx context.Context, keys sluice.Keys, t time.Time, estimate int) (*Reservation, sluice.Decision, error) {
	if err := ctx.Err(); err != nil {
		return nil, sluice.Decision{}, err
	}
	if estimate < 0 {
		return nil, sluice.Decision{}, errNegativeCost
	}
	r := &Reservation{s: s, estimate: estimate}
	var d sluice.Decision
	err := s.evaluate(ctx, s.cfg.Load(), &keys, t, estimate, r, &d)
	if err != nil || !d.Allowed {
		return nil, d, err
	}
	return r, d, nil
}

// SetActual records the actual cost for Settle.
func (r *Reservation) SetActual(actual int) {
	r.actual.Store(int64(actual))
	r.hasActual.Store(true)
}

// Settle reconciles with the cost given to SetActual, or with the estimate
// when none was given; it is the short form for a defer:
//
//	defer r.Settle()
//	… r.SetActual(usage.Total)
func (r *Reservation) Settle() error {
	actual := r.estimate
	if r.hasActual.Load() {
		actual = int(r.actual.Load())
	}
	return r.Reconcile(actual)
}

// Reconcile implements sluice.Reservation: the tokens limits are charged
// actual − estimate more (debt allowed) or refunded estimate − actual, at the
// Stack's current time, and connection slots are released. Only the first
// Reconcile or Cancel takes effect.
func (r *Reservation) Reconcile(actual int) error {
	if actual < 0 {
		return errNegativeCost
	}
	if !r.done.CompareAndSwap(false, true) {
		return nil
	}
	return r.settle(int64(actual)-int64(r.estimate), false)
}

// Cancel implements sluice.Reservation: everything taken is given back.
func (r *Reservation) Cancel() {
	if !r.done.CompareAndSwap(false, true) {
		return
	}
	_ = r.settle(0, true)
}

func (r *Reservation) settle(delta int64, cancel bool) error {
	now := r.s.now()
	if r.ops != nil {
		var adj []Op
		elapsed := now.Sub(r.at)
		for i, op := range r.ops {
			switch {
			case op.Conn:
				op.Cost = -1 // release the slot
			case cancel:
				op.Cost = -outstanding(op, elapsed, op.Cost)
			case r.opTokens[i] && delta < 0:
				op.Cost = -outstanding(op, elapsed, -delta)
			case r.opTokens[i]:
				op.Cost = delta
			default:
				continue
			}
			if op.Cost != 0 {
				adj = append(adj, op)
			}
		}
		if len(adj) == 0 {
			return nil
		}
		return r.s.backend.Adjust(context.Background(), now, adj)
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
		case cancel:
			refund(rb, key, ri.res, now, ri.cost)
		case rb.metric == sluice.MetricTokens && delta > 0:
			if rb.shared != nil {
				rb.shared.ChargeN(now, int(delta))
			} else {
				rb.table.ChargeBytes(key, now, int(delta))
			}
		case rb.metric == sluice.MetricTokens && delta < 0:
			refund(rb, key, ri.res, now, int(-delta))
		}
	}
	return nil
}

// outstanding bounds a refund of n units of op, taken elapsed ago, through a
// backend: at most the part of the take that refill alone has not yet
// covered (op.Cost − rate·elapsed, rounded against the refund). It is the
// backend form of bucket.RefundTake: a late refund never re-creates units
// that later requests may already have used.
func outstanding(op Op, elapsed time.Duration, n int64) int64 {
	if elapsed < 0 {
		elapsed = 0
	}
	refilled := int64(0)
	if op.Period > 0 && op.Rate > 0 {
		refilled = int64(math.Ceil(float64(elapsed) * float64(op.Rate) / float64(op.Period)))
	}
	return max(0, min(n, op.Cost-refilled))
}

// refund gives back up to n units of the take res, bounded so that a late
// refund never re-creates units that have refilled since (bucket.RefundTake).
func refund(rb *rateBucket, key []byte, res bucket.Result, t time.Time, n int) {
	if n <= 0 {
		return
	}
	if rb.shared != nil {
		rb.shared.RefundTake(res, t, n)
	} else {
		rb.table.RefundTakeBytes(key, res, t, n)
	}
}

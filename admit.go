package sluice

import "context"

// Admitter admits whole requests to a Limiter the way the middlewares
// (httplimit, grpclimit, mcplimit) do, holding connection slots for the
// length of each request when the Limiter has them:
//
//   - a SlotReserver (a stack.Stack, and its otelattr and otelmetric
//     wrappers) is asked ReserveSlots, so a request holds a slot of every
//     connections limit that applies to it, and a request no connections
//     limit applies to costs what Allow costs;
//   - a Limiter that is only a Reserver is asked Reserve with an estimate of
//     0;
//   - any other Limiter is asked Allow, and holds nothing.
//
// NewAdmitter makes that choice once. Admit is then one call, which the
// compiler inlines into its caller: through a SlotReserver (and Unlimited
// and Deny, which are SlotReservers that hold nothing) it costs exactly
// what calling ReserveSlots directly costs. A Reserver or a plain Limiter
// is reached through a small adapter, one more call. Requests limits are
// charged once whichever method is chosen; tokens limits are not charged
// (nothing is estimated): a caller that knows a request's cost calls
// Reserve and Reconcile itself.
//
// To admit through Allow alone, hiding the reserving methods of a Limiter
// (connections limits are then not enforced), wrap it:
// NewAdmitter(struct{ sluice.Limiter }{l}), or call Allow.
//
// An Admitter is safe for concurrent use when its Limiter is. Build it with
// NewAdmitter: the zero Admitter has no Limiter, and its Admit panics.
type Admitter struct {
	// sr is l when l is a SlotReserver, and otherwise an adapter that
	// gives l's Reserve or Allow the same shape. One interface call is all
	// Admit makes: with two (one per shape) it would no longer be inlined,
	// and every path would pay a call and the copies of Keys and Decision.
	sr SlotReserver
}

// NewAdmitter returns the Admitter of l. It panics if l is nil (a
// programming error, caught at construction like the middlewares' own; the
// message names l).
func NewAdmitter(l Limiter) Admitter {
	switch l := l.(type) {
	case nil:
		panic("sluice: NewAdmitter: the Limiter l is nil")
	case SlotReserver:
		return Admitter{l}
	case Reserver:
		return Admitter{&reserveSlots{l}}
	default:
		return Admitter{&allowSlots{l}}
	}
}

// Admit decides one request with keys. It returns what the request holds
// until it ends (call its Reconcile(0) then, also when the request panics:
// a deferred call does both; the request's charge stays), the Decision, and
// the Limiter's error when it could not decide. On a denial and on an error
// the Reservation is NoReservation, so it is always safe to call its
// methods.
func (a *Admitter) Admit(ctx context.Context, keys Keys) (Reservation, Decision, error) {
	return a.sr.ReserveSlots(ctx, keys)
}

// reserveSlots admits to a Reserver that is no SlotReserver: Reserve with
// no estimate holds its connection slots, and Reconcile(0) keeps the
// request's charge.
type reserveSlots struct{ Reserver }

func (r *reserveSlots) ReserveSlots(ctx context.Context, keys Keys) (Reservation, Decision, error) {
	return r.Reserve(ctx, keys, 0)
}

// allowSlots admits to a plain Limiter: Allow, holding nothing.
type allowSlots struct{ Limiter }

func (l *allowSlots) ReserveSlots(ctx context.Context, keys Keys) (Reservation, Decision, error) {
	d, err := l.Allow(ctx, keys)
	return NoReservation, d, err
}

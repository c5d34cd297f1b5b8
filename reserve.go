package sluice

import "context"

// Reserver is implemented by limiters that hold units for the length of a
// request: an estimated cost (tokens) settled later with the actual cost, and
// concurrency slots (connections) released when the request ends.
// Middleware uses Reserve instead of Allow when the limiter offers it.
type Reserver interface {
	Limiter
	// Reserve takes one request, estimate units of every tokens limit and a
	// slot of every connections limit that applies, all or nothing. On a
	// denial the Decision says why and the Reservation is NoReservation, so
	// it is always safe to call its methods.
	Reserve(ctx context.Context, keys Keys, estimate int) (Reservation, Decision, error)
}

// SlotReserver is implemented by limiters that may have connections limits
// (a stack.Stack). Middleware that holds nothing for a request but its
// concurrency slots calls ReserveSlots instead of Reserve: a limiter with no
// connections limit for the request then costs what Allow costs.
type SlotReserver interface {
	Limiter
	// ReserveSlots decides one request as Allow does and, when the request is
	// allowed and connections limits apply to it, also takes a slot of each,
	// all or nothing. Reconcile and Cancel of the Reservation only release
	// those slots (the request's units of other limits stay charged). It
	// returns NoReservation when it holds nothing: on a denial, on an error,
	// and when no connections limit applies.
	ReserveSlots(ctx context.Context, keys Keys) (Reservation, Decision, error)
}

// Reservation is what a Reserve took, until it is settled. It is a small
// value, never nil: copy it freely.
//
// Exactly one Reconcile or Cancel takes effect, whichever copy it is called
// on; later calls of either do nothing, so both are safe in defers. The zero
// Reservation, NoReservation, holds nothing: its methods do nothing.
type Reservation struct {
	s   Settler
	gen uint64
}

// NoReservation is the Reservation of a denied or undecided request, and of
// a request that needed nothing held: both methods do nothing.
var NoReservation Reservation

// Settler is implemented by the engines behind Reservations (a stack.Stack's
// reservation records). Applications do not call it: they call the
// Reservation's methods. An engine hands out NewReservation(s, gen) and may
// reuse its record once settled, with a new gen: a stale copy of an earlier
// Reservation then carries an old gen, and Settle must ignore it.
type Settler interface {
	// Settle settles the reservation whose generation is gen, if it is
	// still unsettled: with cancel, everything it took is given back;
	// otherwise actual replaces the estimate. It does nothing and returns
	// nil when gen is not the current, unsettled generation.
	Settle(gen uint64, actual int, cancel bool) error
}

// NewReservation returns the Reservation that s settles as generation gen.
// It is for Reserver implementers, as Settler is.
// Engines call it; a nil s gives NoReservation.
func NewReservation(s Settler, gen uint64) Reservation { return Reservation{s: s, gen: gen} }

// Held reports whether r holds anything (it is not NoReservation).
func (r Reservation) Held() bool { return r.s != nil }

// Reconcile replaces the estimate with the actual cost: an overrun is
// charged (the bucket may go into debt, so later requests wait), an underrun
// is refunded exactly. It releases every connection slot.
func (r Reservation) Reconcile(actual int) error {
	if r.s == nil {
		return nil
	}
	return r.s.Settle(r.gen, actual, false)
}

// Cancel gives back everything the reservation took, as if the request had
// never been made, and releases every connection slot.
func (r Reservation) Cancel() {
	if r.s != nil {
		_ = r.s.Settle(r.gen, 0, true)
	}
}

package sluice

import (
	"context"

	"github.com/sluicehq/sluice/internal/enginekit"
)

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

// Reservation is what a request holds until it ends: the units a Reserve
// took, the connection slots a ReserveSlots or an Admitter's Admit took. It
// is a small value, never nil: copy it freely.
//
// Exactly one Reconcile or Cancel takes effect, whichever copy it is called
// on; later calls of either do nothing, so both are safe in defers. The zero
// Reservation, NoReservation, holds nothing: its methods do nothing.
//
// Engines build Reservations through a package internal to this module;
// other Limiters hand out NoReservation (or the Reservation of a Limiter
// they wrap).
type Reservation enginekit.Handle

// NoReservation is the Reservation of a denied or undecided request, and of
// a request that needed nothing held: both methods do nothing.
var NoReservation Reservation

// Held reports whether r holds anything (it is not NoReservation); a caller
// can skip settling one that does not.
func (r Reservation) Held() bool { return enginekit.Handle(r).Held() }

// Reconcile replaces the estimate with the actual cost: an overrun is
// charged (the bucket may go into debt, so later requests wait), an underrun
// is refunded exactly. It releases every connection slot. For a Reservation
// of ReserveSlots only the slots are released, and actual is ignored; a
// request admitted by an Admitter calls Reconcile(0) when it ends. The error is a
// backend's that could not settle (a slot a backend holds as a lease is
// then freed when the lease expires); a deferred Reconcile drops it.
func (r Reservation) Reconcile(actual int) error {
	return enginekit.Handle(r).Settle(actual, false)
}

// Cancel gives back everything the reservation took, as if the request had
// never been made, and releases every connection slot.
func (r Reservation) Cancel() {
	_ = enginekit.Handle(r).Settle(0, true)
}

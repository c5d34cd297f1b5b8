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
	// denial the Decision says why and the Reservation is a no-op, so it is
	// always safe to call its methods.
	Reserve(ctx context.Context, keys Keys, estimate int) (Reservation, Decision, error)
}

// Reservation is what a Reserve took, until it is settled.
//
// Exactly one of Reconcile and Cancel takes effect; later calls of either do
// nothing, so both are safe in defers.
type Reservation interface {
	// Reconcile replaces the estimate with the actual cost: an overrun is
	// charged (the bucket may go into debt, so later requests wait), an
	// underrun is refunded exactly. It releases every connection slot.
	Reconcile(actual int) error
	// Cancel gives back everything the reservation took, as if the request
	// had never been made, and releases every connection slot.
	Cancel()
}

type noopReservation struct{}

func (noopReservation) Reconcile(int) error { return nil }
func (noopReservation) Cancel()             {}

// NoReservation is the Reservation of a denied request: both methods do nothing.
var NoReservation Reservation = noopReservation{}

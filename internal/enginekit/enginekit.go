// Package enginekit holds what the engines of this repository (stack, and
// the wrappers and tests around it) need from the root package sluice that
// applications do not: the record behind a sluice.Reservation and the
// context flag that asks for sluice.Decision.Evaluated.
//
// The root package imports it and builds its exported names on it
// (sluice.Reservation is a Handle; sluice.WithEvaluated sets the flag), so
// the root's API holds only what applications call, and no engine.
package enginekit

import (
	"context"
	"sync/atomic"
)

// Settler is implemented by the records behind Reservations (a stack.Stack's
// reservation records). An engine hands out a Handle of (s, gen) and may
// reuse its record once settled, with a new gen: a stale copy of an earlier
// Handle then carries an old gen, and Settle must ignore it.
type Settler interface {
	// Settle settles the reservation whose generation is gen, if it is
	// still unsettled: with cancel, everything it took is given back;
	// otherwise actual replaces the estimate. It does nothing and returns
	// nil when gen is not the current, unsettled generation.
	Settle(gen uint64, actual int, cancel bool) error
}

// Handle is the value of a sluice.Reservation: sluice.Reservation is
// defined as a Handle, so an engine builds one with
// sluice.Reservation(enginekit.NewHandle(s, gen)), a conversion that costs
// nothing. The zero Handle holds nothing.
type Handle struct {
	s   Settler
	gen uint64
}

// NewHandle returns the Handle that s settles as generation gen; a nil s
// gives the zero Handle.
func NewHandle(s Settler, gen uint64) Handle { return Handle{s: s, gen: gen} }

// Held reports whether h holds anything.
func (h Handle) Held() bool { return h.s != nil }

// Settle settles h (see Settler); the zero Handle does nothing.
func (h Handle) Settle(actual int, cancel bool) error {
	if h.s == nil {
		return nil
	}
	return h.s.Settle(h.gen, actual, cancel)
}

type evaluatedKey struct{}

// evaluatedUsed is set once WithEvaluated has made a context asking for
// Decision.Evaluated: until then no context can ask, and engines need not
// walk theirs to find out on every decision.
var evaluatedUsed atomic.Bool

// WithEvaluated returns a context that asks engines to fill
// Decision.Evaluated (sluice.WithEvaluated is this function).
func WithEvaluated(ctx context.Context) context.Context {
	if EvaluatedRequested(ctx) {
		return ctx
	}
	evaluatedUsed.Store(true)
	return context.WithValue(ctx, evaluatedKey{}, true)
}

// EvaluatedRequested reports whether ctx asks for Decision.Evaluated: an
// engine fills it only then (building it allocates).
func EvaluatedRequested(ctx context.Context) bool {
	if ctx == nil || !evaluatedUsed.Load() {
		return false
	}
	v, _ := ctx.Value(evaluatedKey{}).(bool)
	return v
}

package sluice

import (
	"context"
)

// Limiter decides whether one request may proceed.
//
// Allow returns a Decision; a denial is Decision.Allowed == false, not an
// error. The error is for "could not decide": the context ended, or a backend
// failed and the limiter's policy is fail-closed. Implementations are safe for
// concurrent use.
//
// The engines that decide whole requests implement Limiter, so they compose
// with the middlewares and with each other: a stack.Stack is a Limiter, and
// so is a category.Set. A bucket.Bucket is the primitive underneath them and
// is not a Limiter: it has no Keys to look at (its Allow takes none).
type Limiter interface {
	Allow(ctx context.Context, keys Keys) (Decision, error)
}

// LimiterFunc adapts a function to the Limiter interface.
type LimiterFunc func(ctx context.Context, keys Keys) (Decision, error)

// Allow calls f(ctx, keys).
func (f LimiterFunc) Allow(ctx context.Context, keys Keys) (Decision, error) { return f(ctx, keys) }

type unlimited struct{}

func (unlimited) Allow(context.Context, Keys) (Decision, error) {
	return Decision{Allowed: true}, nil
}

// ReserveSlots makes Unlimited a SlotReserver that holds nothing, so that
// an Admitter calls it directly, without the adapter it needs for a plain
// Limiter.
func (unlimited) ReserveSlots(context.Context, Keys) (Reservation, Decision, error) {
	return NoReservation, Decision{Allowed: true}, nil
}

type deny struct{}

func (deny) Allow(context.Context, Keys) (Decision, error) {
	return Decision{Allowed: false, Permanent: true, LimitID: "deny", LimitKey: "deny", Metric: MetricRequests}, nil
}

// ReserveSlots makes Deny a SlotReserver too (see unlimited.ReserveSlots).
func (d deny) ReserveSlots(ctx context.Context, keys Keys) (Reservation, Decision, error) {
	dec, err := d.Allow(ctx, keys)
	return NoReservation, dec, err
}

// Unlimited allows every request. It is the Limiter to use where limiting is
// switched off.
var Unlimited Limiter = unlimited{}

// Deny denies every request permanently (rate 0): its decisions carry
// LimitID "deny", metric "requests" and Permanent set.
var Deny Limiter = deny{}

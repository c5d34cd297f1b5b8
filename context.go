package sluice

import (
	"context"
	"sync/atomic"
)

type evaluatedKey struct{}

// evaluatedUsed is set once WithEvaluated has made a context asking for
// Decision.Evaluated: until then no context can ask, and engines need not
// walk theirs to find out on every decision.
var evaluatedUsed atomic.Bool

// WithEvaluated returns a context that asks engines to fill
// Decision.Evaluated, the list of every bucket checked. Building that list
// allocates, so engines skip it unless asked; otelattr asks only when the
// span in the context is recording.
func WithEvaluated(ctx context.Context) context.Context {
	if EvaluatedRequested(ctx) {
		return ctx
	}
	evaluatedUsed.Store(true)
	return context.WithValue(ctx, evaluatedKey{}, true)
}

// EvaluatedRequested reports whether ctx asks for Decision.Evaluated. It is
// for Limiter implementers: an engine fills Decision.Evaluated only when it
// reports true (applications ask with WithEvaluated).
func EvaluatedRequested(ctx context.Context) bool {
	if ctx == nil || !evaluatedUsed.Load() {
		return false
	}
	v, _ := ctx.Value(evaluatedKey{}).(bool)
	return v
}

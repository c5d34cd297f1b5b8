package sluice

import "context"

type evaluatedKey struct{}

// WithEvaluated returns a context that asks engines to fill
// Decision.Evaluated, the list of every bucket checked. Building that list
// allocates, so engines skip it unless asked; otelattr asks only when the
// span in the context is recording.
func WithEvaluated(ctx context.Context) context.Context {
	if EvaluatedRequested(ctx) {
		return ctx
	}
	return context.WithValue(ctx, evaluatedKey{}, true)
}

// EvaluatedRequested reports whether ctx asks for Decision.Evaluated.
func EvaluatedRequested(ctx context.Context) bool {
	if ctx == nil {
		return false
	}
	v, _ := ctx.Value(evaluatedKey{}).(bool)
	return v
}

package sluice

import (
	"context"

	"github.com/sluicehq/sluice/internal/enginekit"
)

// WithEvaluated returns a context that asks engines to fill
// Decision.Evaluated, the list of every bucket checked. Building that list
// allocates, so engines skip it unless asked; otelattr asks only when the
// span in the context is recording.
func WithEvaluated(ctx context.Context) context.Context {
	return enginekit.WithEvaluated(ctx)
}

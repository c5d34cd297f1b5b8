package grpclimit

import (
	"context"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
)

// Adapter returns a go-grpc-middleware ratelimit.Limiter backed by l, for
// servers already built on that package's interceptors. The key function
// receives the method from grpc.Method(ctx).
//
// Those interceptors rebuild the error as a plain ResourceExhausted status
// with the text of the one Limit returns, so the RetryInfo and QuotaFailure
// details are lost on the way; the grpc-retry-pushback-ms trailer, which
// Limit sets itself, still reaches the client. Prefer
// UnaryServerInterceptor and StreamServerInterceptor when clients should
// read the details.
//
// As the interceptors, Adapter panics when l or keys is nil.
func Adapter(l sluice.Limiter, keys KeyFunc, opts ...Option) ratelimit.Limiter {
	return adapter{newLimiter(l, keys, opts)}
}

type adapter struct{ lim *limiter }

// Limit returns nil to let the call through; for a throttled call the
// *errors.ThrottledError, whose message names the limit and the retry delay
// and which the ratelimit interceptor puts into its ResourceExhausted
// status; otherwise the status error of a call that could not be decided
// (the interceptor reports it as ResourceExhausted too).
func (a adapter) Limit(ctx context.Context) error {
	method, _ := grpc.Method(ctx)
	err := a.lim.allow(ctx, method)
	if te, ok := err.(*slerrors.ThrottledError); ok {
		_ = grpc.SetTrailer(ctx, pushback(te))
	}
	return err
}

// Package grpclimit rate-limits gRPC servers with any sluice.Limiter.
//
// A throttled call fails with codes.ResourceExhausted, carrying
// google.rpc.RetryInfo (the delay after which a retry succeeds) and
// google.rpc.QuotaFailure (which limit, which metric), plus the gRFC A6
// trailer grpc-retry-pushback-ms that gRPC's built-in retry policy obeys.
// UnaryServerInterceptor and StreamServerInterceptor do this for every call;
// Adapter plugs a sluice.Limiter into go-grpc-middleware's ratelimit
// interceptors instead.
//
// On the client side, RetryDelay reads the delay back from the error, and
// UnaryClientInterceptor and StreamClientInterceptor pace calls with a
// pace.Transport: a RESOURCE_EXHAUSTED answer with RetryInfo or
// grpc-retry-pushback-ms pauses every call to that upstream.
//
// # When the limiter cannot decide
//
// A Limiter error means "could not decide": the call fails with
// codes.Unavailable and the handler does not run. Whether a failed backend
// is such an error is the policy of the engine that talks to it, set there
// once: a stack.Stack over a Backend fails open by default (it admits and
// returns no error, so calls pass) and fails closed with
// stack.WithFailClosed (it returns the error, so every call fails with
// Unavailable).
package grpclimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
)

// PushbackTrailer is the gRFC A6 trailer that tells gRPC clients with a
// retry policy how many milliseconds to wait before retrying.
const PushbackTrailer = "grpc-retry-pushback-ms"

// KeyFunc resolves the rate-limit keys of a call from its context (which
// holds the incoming metadata and peer) and its full method name
// ("/pkg.Service/Method"). An error fails the call with
// codes.InvalidArgument without asking the Limiter; the error handler
// (WithErrorHandler) observes it.
type KeyFunc func(ctx context.Context, fullMethod string) (sluice.Keys, error)

// MethodKey returns a KeyFunc that puts the full method name under the
// dimension name.
func MethodKey(name string) KeyFunc {
	return func(_ context.Context, fullMethod string) (sluice.Keys, error) {
		return sluice.NewKeys(name, fullMethod), nil
	}
}

// Status returns the gRPC status of a throttled call: ResourceExhausted
// with the error's message, a google.rpc.QuotaFailure naming the limit
// (subject: the limit key; quota_id: the rate-limit id; quota_metric: the
// metric; quota_value: the limit) and, unless the denial is permanent, a
// google.rpc.RetryInfo with the retry delay. A nil te gives a bare
// ResourceExhausted status.
func Status(te *slerrors.ThrottledError) *status.Status {
	if te == nil {
		return status.New(codes.ResourceExhausted, slerrors.Message)
	}
	st := status.New(codes.ResourceExhausted, te.Error())
	details := []protoadapt.MessageV1{
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject:     validUTF8(te.LimitKey),
			Description: slerrors.Message,
			QuotaId:     validUTF8(te.LimitID),
			QuotaMetric: validUTF8(te.Metric),
			QuotaValue:  te.Limit,
		}}},
	}
	if !te.Permanent {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(max(te.RetryAfter, 0))})
	}
	if withDetails, err := st.WithDetails(details...); err == nil {
		return withDetails
	}
	return st
}

// validUTF8 makes s marshalable as a protobuf string, which must be UTF-8.
func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// RetryDelay returns the retry delay carried by a gRPC error's RetryInfo
// detail, and false when err has none (not a status error, or a permanent
// denial).
func RetryDelay(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// pushback returns the gRFC A6 trailer for te: the delay in milliseconds,
// rounded up; a negative value (which clients read as "do not retry") for a
// permanent denial.
func pushback(te *slerrors.ThrottledError) metadata.MD {
	ms := int64(-1)
	if !te.Permanent {
		ms = int64(te.RetryAfter / time.Millisecond)
		if te.RetryAfter%time.Millisecond != 0 || ms <= 0 {
			ms++
		}
		ms = min(ms, 1<<31-1) // clients parse it as a 32-bit integer
	}
	return metadata.Pairs(PushbackTrailer, strconv.FormatInt(ms, 10))
}

type config struct {
	onError func(error)
}

// Option configures the interceptors and Adapter.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithErrorHandler sets a function that observes every error the
// interceptors and Adapter handle without returning it to you: the
// Limiter's (the call then fails with codes.Unavailable) and the
// KeyFunc's, for logs and metrics. It must be safe for concurrent use and
// quick. nil means the default: no handler.
func WithErrorHandler(f func(error)) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.onError = f
		}
	})
}

type limiter struct {
	cfg  config
	l    sluice.Limiter  // for Adapter, which has no call end to release slots at
	adm  sluice.Admitter // l, for the interceptors
	keys KeyFunc
}

func newLimiter(l sluice.Limiter, keys KeyFunc, opts []Option) *limiter {
	if l == nil {
		panic("grpclimit: the Limiter l is nil")
	}
	if keys == nil {
		panic("grpclimit: the KeyFunc keys is nil")
	}
	lim := &limiter{l: l, adm: sluice.NewAdmitter(l), keys: keys}
	for _, o := range opts {
		if o != nil {
			o.apply(&lim.cfg)
		}
	}
	return lim
}

// admit decides one call for StreamServerInterceptor (the unary interceptor
// has the same code written out), through the sluice.Admitter, so a
// limiter that holds connection slots (a stack does) holds them for the
// call's length. It returns the Reservation to reconcile with 0 when
// the call ends (it holds nothing unless the call is let through) and
// nil to let the call through; the *ThrottledError of a throttled call
// (the caller sends its pushback trailer); or the status error of a call
// that could not be decided.
func (lim *limiter) admit(ctx context.Context, method string) (sluice.Reservation, error) {
	keys, err := lim.keys(ctx, method)
	if err != nil {
		return sluice.NoReservation, lim.keysErr(err)
	}
	slots, d, err := lim.adm.Admit(ctx, keys)
	if err == nil && d.Allowed {
		return slots, nil
	}
	return sluice.NoReservation, lim.refusal(&d, err)
}

// allow is admit for Adapter, which has no call end to release slots at:
// the Limiter's Allow, holding nothing.
func (lim *limiter) allow(ctx context.Context, method string) error {
	keys, err := lim.keys(ctx, method)
	if err != nil {
		return lim.keysErr(err)
	}
	d, err := lim.l.Allow(ctx, keys)
	if err == nil && d.Allowed {
		return nil
	}
	return lim.refusal(&d, err)
}

func (lim *limiter) keysErr(err error) error {
	err = status.Error(codes.InvalidArgument, "grpclimit: resolving rate-limit keys: "+err.Error())
	if lim.cfg.onError != nil {
		lim.cfg.onError(err)
	}
	return err
}

// refusal is the error of a call that was not let through: the
// Unavailable status error when the Limiter failed, and otherwise the
// denial's *ThrottledError. It is apart
// from admit and allow, which then hold only the admitted path, and takes
// the 192-byte Decision by pointer so that a denial does not copy it again.
func (lim *limiter) refusal(d *sluice.Decision, err error) error {
	if err != nil {
		if lim.cfg.onError != nil {
			lim.cfg.onError(fmt.Errorf("grpclimit: rate limiter failed: %w", err))
		}
		return status.Error(codes.Unavailable, "grpclimit: rate limiter failed: "+err.Error())
	}
	te, _ := slerrors.AsThrottled(d.Err())
	return te
}

// refuseUnary is the error a unary call that was not admitted fails with
// (see refusal), its pushback trailer set first. It is apart from the
// interceptor, which then holds only the admitted path.
func (lim *limiter) refuseUnary(ctx context.Context, d *sluice.Decision, err error) error {
	return statusErr(lim.refusal(d, err), func(md metadata.MD) error { return grpc.SetTrailer(ctx, md) })
}

// statusErr turns admit's result into the error an interceptor returns,
// handing a throttled call's pushback trailer to setTrailer first.
func statusErr(err error, setTrailer func(metadata.MD) error) error {
	if te, ok := err.(*slerrors.ThrottledError); ok {
		_ = setTrailer(pushback(te))
		return Status(te).Err()
	}
	return err
}

// UnaryServerInterceptor returns an interceptor that asks l about every
// unary call and fails throttled ones with Status and the pushback trailer.
//
// It panics, at construction, when l or keys is nil (a programming error;
// the message names the argument): the keys are what select a call's
// limits, so there is no default (MethodKey keys by method). A nil Option
// is ignored.
func UnaryServerInterceptor(l sluice.Limiter, keys KeyFunc, opts ...Option) grpc.UnaryServerInterceptor {
	lim := newLimiter(l, keys, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		// admit's body, written out: the call to it, its frame and its
		// results cost 24 of the ≈ 1,850 instructions of an admitted call
		// (callgrind, bench/middleware BenchmarkInterceptorSide), but
		// 1.17–1.23 × the interceptor's wall time (the interceptor calling
		// admit against this one, alternated: scripts/abbench.sh,
		// GRPCInterceptor, 4 rounds; the cause was not found). Streams,
		// decided once each, call it.
		keys, err := lim.keys(ctx, info.FullMethod)
		if err != nil {
			return nil, lim.keysErr(err)
		}
		slots, d, err := lim.adm.Admit(ctx, keys)
		if err != nil || !d.Allowed {
			return nil, lim.refuseUnary(ctx, &d, err)
		}
		if !slots.Held() {
			return handler(ctx, req) // nothing to release: no defer to run
		}
		defer slots.Reconcile(0) // frees connection slots, also on panic
		return handler(ctx, req)
	}
}

// StreamServerInterceptor returns an interceptor that asks l once when each
// stream opens and fails a throttled stream with Status and the pushback
// trailer.
//
// It panics, at construction, when l or keys is nil (a programming error;
// the message names the argument): the keys are what select a call's
// limits, so there is no default (MethodKey keys by method). A nil Option
// is ignored.
func StreamServerInterceptor(l sluice.Limiter, keys KeyFunc, opts ...Option) grpc.StreamServerInterceptor {
	lim := newLimiter(l, keys, opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		slots, err := lim.admit(ss.Context(), info.FullMethod)
		if err != nil {
			return statusErr(err, func(md metadata.MD) error { ss.SetTrailer(md); return nil })
		}
		defer slots.Reconcile(0) // the slot is held until the stream ends
		return handler(srv, ss)
	}
}

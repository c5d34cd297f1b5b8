package grpclimit_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
)

// TestOptionsNotGiven walks every option with the values the option rule
// calls "not given" (nil): none panics, and the interceptors keep the
// defaults (no error handler; a limiter error refuses the call with
// Unavailable, a key error with InvalidArgument). The constructors
// have no error result: no option can be wrong in another way.
func TestOptionsNotGiven(t *testing.T) {
	broken := sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) {
		return sluice.Decision{}, errors.New("backend down")
	})
	badKey := func(context.Context, string) (sluice.Keys, error) { return sluice.Keys{}, errors.New("no caller") }
	info := &grpc.UnaryServerInfo{FullMethod: "/pkg.Svc/Call"}
	handler := func(context.Context, any) (any, error) { return "handled", nil }
	for name, opts := range map[string][]grpclimit.Option{
		"nil Option":                           {nil},
		"WithErrorHandler(nil)":                {grpclimit.WithErrorHandler(nil)},
		"WithErrorHandler(f), then nil (kept)": nil, // filled below
	} {
		t.Run(name, func(t *testing.T) {
			var observed []error
			if opts == nil {
				opts = []grpclimit.Option{grpclimit.WithErrorHandler(func(err error) { observed = append(observed, err) }), grpclimit.WithErrorHandler(nil)}
			}
			icpt := grpclimit.UnaryServerInterceptor(broken, grpclimit.MethodKey("method"), opts...)
			if resp, err := icpt(context.Background(), nil, info, handler); resp != nil || status.Code(err) != codes.Unavailable {
				t.Errorf("limiter error: %v, %v; want Unavailable", resp, err)
			}
			icpt = grpclimit.UnaryServerInterceptor(broken, badKey, opts...)
			if _, err := icpt(context.Background(), nil, info, handler); status.Code(err) != codes.InvalidArgument {
				t.Errorf("key error: %v, want InvalidArgument", err)
			}
			if name == "WithErrorHandler(f), then nil (kept)" && len(observed) != 2 {
				t.Errorf("the earlier handler observed %v, want both errors", observed)
			}
			// The stream interceptor and the Adapter take the same options.
			_ = grpclimit.StreamServerInterceptor(broken, grpclimit.MethodKey("method"), opts...)
			if err := grpclimit.Adapter(broken, grpclimit.MethodKey("method"), opts...).Limit(context.Background()); status.Code(err) != codes.Unavailable {
				t.Errorf("Adapter, limiter error: %v; want Unavailable", err)
			}
		})
	}
}

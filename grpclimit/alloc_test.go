package grpclimit_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/internal/racecheck"
	"github.com/sluicehq/sluice/stack"
)

type callerCtxKey struct{}

// ctxCaller takes the caller from a context value: a KeyFunc that does not
// allocate, so the test counts the interceptor's allocations alone.
func ctxCaller(ctx context.Context, _ string) (sluice.Keys, error) {
	c, _ := ctx.Value(callerCtxKey{}).(string)
	return sluice.NewKeys("caller", c), nil
}

// An admitted unary call costs the interceptor no allocation, with a
// connections slot held for the call (the reservation is pooled) or
// without one (Allow's path).
func TestUnaryInterceptorAllocatesNothing(t *testing.T) {
	if racecheck.Enabled || testing.CoverMode() != "" {
		t.Skip("allocation counts differ under -race and coverage")
	}
	for _, conns := range []bool{false, true} {
		cfg := stack.Config{RateLimits: []stack.RateLimit{{
			RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 10_000_000, Period: "minute"}}}},
		}}}
		if conns {
			cfg.RateLimits = append(cfg.RateLimits, stack.RateLimit{
				RateLimitID: "in-flight", DimensionKeys: []string{"caller"},
				Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Connections: []stack.Rate{{Rate: 1, Period: "second"}}}},
			})
		}
		s, err := stack.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		icpt := grpclimit.UnaryServerInterceptor(s, ctxCaller)
		ctx := context.WithValue(context.Background(), callerCtxKey{}, "alice")
		info := &grpc.UnaryServerInfo{FullMethod: "/pkg.Svc/Call"}
		calls := 0
		handler := func(context.Context, any) (any, error) { calls++; return nil, nil }
		allocs := testing.AllocsPerRun(1000, func() {
			if _, err := icpt(ctx, nil, info, handler); err != nil {
				t.Fatal(err) // with one slot, a leaked slot denies the next call
			}
		})
		if calls < 1000 {
			t.Fatalf("handler ran %d times", calls)
		}
		if allocs > 0 {
			t.Errorf("connections limit %v: the interceptor allocates %.1f times per call, want 0", conns, allocs)
		}
	}
}

package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/stack"
)

// With a stack (a sluice.Reserver), a stream holds a connections slot for
// its whole life and gives it back when it ends. The test learns that the
// interceptor has returned (and so released) from an interceptor wrapped
// around it: the next stream must then be admitted at the first try.
func TestStreamHoldsConnectionSlot(t *testing.T) {
	s, err := stack.New(stack.Config{RateLimits: []stack.RateLimit{{
		RateLimitID: "streams", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Connections: []stack.Rate{{Rate: 1, Period: "second"}}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 8) // one per stream the server ran, after grpclimit's interceptor returned
	outer := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := handler(srv, ss)
		ended <- err
		return err
	}
	client := serve(t, grpc.ChainStreamInterceptor(outer, grpclimit.StreamServerInterceptor(s, callerKey)))
	open := func(ctx context.Context) error {
		st, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	// awaitEnd waits for the server to finish one stream: an event, with a
	// deadline only for a hang.
	awaitEnd := func(what string) {
		t.Helper()
		select {
		case <-ended:
		case <-time.After(time.Minute):
			t.Fatalf("%s: the server never finished the stream", what)
		}
	}
	ctx1, cancel1 := context.WithCancel(asCaller("alice"))
	defer cancel1()
	if err := open(ctx1); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	ctx2, cancel2 := context.WithCancel(asCaller("alice"))
	err = open(ctx2)
	cancel2()
	if status.Code(err) != codes.ResourceExhausted || quotaFailure(t, err).Subject != "streams/caller=alice" {
		t.Fatalf("second stream while the first is open: %v", err)
	}
	awaitEnd("the denied stream")
	ctx3, cancel3 := context.WithCancel(asCaller("bob"))
	if err := open(ctx3); err != nil {
		t.Fatalf("another caller has its own slot: %v", err)
	}
	cancel3()
	awaitEnd("bob's stream")
	cancel1() // the server handler returns and the interceptor releases
	awaitEnd("alice's first stream")
	ctx4, cancel4 := context.WithCancel(asCaller("alice"))
	defer cancel4()
	if err := open(ctx4); err != nil {
		t.Fatalf("after the first stream ended: %v", err)
	}
	if n := len(ended); n != 0 {
		t.Fatalf("%d streams ended unaccounted for", n)
	}
}

// A unary call holds its connections slot while its handler runs (a second
// call of the same caller from inside it is denied), and gives it back when
// the handler returns and when it panics. The interceptor defers the
// release only when a slot is held: this checks that branch, which the
// allocation test's call without a connections limit does not take.
func TestUnaryHoldsConnectionSlot(t *testing.T) {
	s, err := stack.New(stack.Config{RateLimits: []stack.RateLimit{{
		RateLimitID: "in-flight", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Connections: []stack.Rate{{Rate: 1, Period: "second"}}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	icpt := grpclimit.UnaryServerInterceptor(s, ctxCaller)
	ctx := context.WithValue(context.Background(), callerCtxKey{}, "alice")
	info := &grpc.UnaryServerInfo{FullMethod: "/pkg.Svc/Call"}
	ok := func(context.Context, any) (any, error) { return nil, nil }
	var inner error
	nested := func(ctx context.Context, _ any) (any, error) {
		_, inner = icpt(ctx, nil, info, ok)
		return nil, nil
	}
	if _, err := icpt(ctx, nil, info, nested); err != nil {
		t.Fatalf("first call: %v", err)
	}
	if status.Code(inner) != codes.ResourceExhausted {
		t.Fatalf("a call while the caller's only slot is held: %v, want ResourceExhausted", inner)
	}
	if _, err := icpt(ctx, nil, info, ok); err != nil {
		t.Fatalf("after the first call returned: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the handler's panic did not reach the caller")
			}
		}()
		_, _ = icpt(ctx, nil, info, func(context.Context, any) (any, error) { panic("handler") })
	}()
	if _, err := icpt(ctx, nil, info, ok); err != nil {
		t.Fatalf("after a handler panicked: %v", err)
	}
}

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
// its whole life and gives it back when it ends.
func TestStreamHoldsConnectionSlot(t *testing.T) {
	s, err := stack.New(stack.Config{RateLimits: []stack.RateLimit{{
		RateLimitID: "streams", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Connections: []stack.Rate{{Rate: 1, Period: "second"}}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	client := serve(t, grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(s, callerKey)))
	open := func(ctx context.Context) error {
		st, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	ctx1, cancel1 := context.WithCancel(asCaller("alice"))
	if err := open(ctx1); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	ctx2, cancel2 := context.WithCancel(asCaller("alice"))
	err = open(ctx2)
	cancel2()
	if status.Code(err) != codes.ResourceExhausted || quotaFailure(t, err).Subject != "streams/caller=alice" {
		t.Fatalf("second stream while the first is open: %v", err)
	}
	if err := open(asCaller("bob")); err != nil {
		t.Fatalf("another caller has its own slot: %v", err)
	}
	cancel1() // the server handler returns and the interceptor releases
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx3, cancel3 := context.WithCancel(asCaller("alice"))
		err := open(ctx3)
		cancel3()
		if err == nil {
			break
		}
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("after the first stream ended: %v", err)
		}
	}
}

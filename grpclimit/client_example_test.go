package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/pace"
	"github.com/sluicehq/sluice/stack"
)

// A server allowing 1 call per second answers the second call with
// RESOURCE_EXHAUSTED and a 1 s RetryInfo; the paced client then waits that
// second before its third call instead of being throttled again. Server and
// client share a simulated clock, so the example runs in no time.
func ExampleUnaryClientInterceptor() {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var elapsed atomic.Int64 // the simulated clock, read by server and client
	clock := func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	limits, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "per-method", "dimensionKeys": ["method"],
	  "entries": [{"dimensions": {"method": "*"}, "requests": [{"rate": 1, "period": "second"}]}]}]}`), stack.WithClock(sluice.ClockFunc(clock)))
	if err != nil {
		panic(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(grpclimit.UnaryServerInterceptor(limits, grpclimit.MethodKey("method"))))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()

	p := pace.New(nil, pace.WithClock(clockFuncs{clock, func(_ context.Context, d time.Duration) error { elapsed.Add(int64(d)); return nil }}),
		pace.WithJitter(func(time.Duration) time.Duration { return 0 }))
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(grpclimit.UnaryClientInterceptor(p, "")))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for i := range 3 {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		fmt.Printf("call %d: %v at +%v\n", i+1, status.Code(err), clock().Sub(start))
	}
	// Output:
	// call 1: OK at +0s
	// call 2: ResourceExhausted at +0s
	// call 3: OK at +1s
}

// clockFuncs makes a sluice.Clock of a time function and a sleep function
// (nil: return at once).
type clockFuncs struct {
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

func (c clockFuncs) Now() time.Time { return c.now() }
func (c clockFuncs) Sleep(ctx context.Context, d time.Duration) error {
	if c.sleep == nil {
		return ctx.Err()
	}
	return c.sleep(ctx, d)
}

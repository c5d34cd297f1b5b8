// Command grpc serves a gRPC API rate-limited with grpclimit (2 calls per
// second per caller, read from the x-caller metadata; the standard health
// service stands in for an application service), and is also its client.
//
//	go run ./examples/grpc -addr 127.0.0.1:50051          # serve until interrupted
//	go run ./examples/grpc -client -addr 127.0.0.1:50051  # call it 3 times as alice
//
// The client prints each call's outcome and, once throttled, the RetryInfo
// delay and the grpc-retry-pushback-ms trailer it received:
//
//	call 1: OK
//	call 2: OK
//	call 3: ResourceExhausted "sluice: rate limit exceeded for per-caller/caller=alice (requests), retry after 498.2ms"
//	  RetryInfo delay: 498.2ms
//	  grpc-retry-pushback-ms: [499]
//
// The delay is what is left of the half second the 2-per-second bucket needs
// to refill one call after two, so it is a few milliseconds under 500ms
// (exactly 500ms in the test, whose clock stands still). Any gRPC client works
// as well, for instance grpcurl:
//
//	grpcurl -plaintext -H 'x-caller: alice' 127.0.0.1:50051 grpc.health.v1.Health/Check
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/stack"
)

const config = `{"rateLimits": [
  {"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
    {"dimensions": {"caller": "*"}, "requests": [{"rate": 2, "period": "second"}]}
  ]}
]}`

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "address to serve on, or with -client to call")
	client := flag.Bool("client", false, "call the server at -addr instead of serving")
	caller := flag.String("caller", "alice", "with -client: the x-caller metadata the calls send")
	calls := flag.Int("n", 3, "with -client: how many calls to make")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *client {
		err = runClient(ctx, os.Stdout, *addr, *caller, *calls)
	} else {
		err = serve(ctx, os.Stdout, *addr, time.Now)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// callerKey reads the caller from the x-caller metadata; a call without one
// is not limited by per-caller (the limit is skipped).
func callerKey(ctx context.Context, method string) (sluice.Keys, error) {
	var k sluice.Keys
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-caller"); len(v) > 0 {
		k.Set("caller", v[0])
	}
	k.Set("method", method)
	return k, nil
}

// newServer returns a gRPC server (the standard health service stands in
// for an application service) whose unary and stream calls are limited.
func newServer(now func() time.Time) (*grpc.Server, error) {
	limits, err := stack.Load([]byte(config), stack.WithClock(now))
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(limits, callerKey)),
		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(limits, callerKey)),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	return srv, nil
}

// serve listens on addr, says where on w, and serves until ctx ends.
func serve(ctx context.Context, w io.Writer, addr string, now func() time.Time) error {
	srv, err := newServer(now)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "serving gRPC on %s (2 calls per second per x-caller)\n", lis.Addr())
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		srv.GracefulStop()
	}()
	err = srv.Serve(lis)
	<-done
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

// runClient makes n health checks against addr as caller and prints what
// each returned.
func runClient(ctx context.Context, w io.Writer, addr, caller string, n int) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	ctx = metadata.AppendToOutgoingContext(ctx, "x-caller", caller)
	for i := 1; i <= n; i++ {
		var trailer metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
		if err == nil {
			fmt.Fprintf(w, "call %d: OK\n", i)
			continue
		}
		st := status.Convert(err)
		delay, ok := grpclimit.RetryDelay(err)
		if !ok {
			return fmt.Errorf("call %d failed without RetryInfo: %w", i, err)
		}
		fmt.Fprintf(w, "call %d: %s %q\n", i, st.Code(), st.Message())
		fmt.Fprintf(w, "  RetryInfo delay: %v\n", delay.Round(time.Millisecond))
		fmt.Fprintf(w, "  %s: %v\n", grpclimit.PushbackTrailer, trailer.Get(grpclimit.PushbackTrailer))
	}
	return nil
}

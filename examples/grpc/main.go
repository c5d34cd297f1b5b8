// Command grpc runs a gRPC server rate-limited with grpclimit (2 calls per
// second per caller, read from the x-caller metadata) on 127.0.0.1, and a
// client that calls it until it is throttled and prints the RetryInfo
// delay and the grpc-retry-pushback-ms trailer it received.
//
//	go run ./examples/grpc
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
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
	if err := run(os.Stdout, time.Now); err != nil {
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
	limits, err := stack.Load([]byte(config), stack.WithNow(now))
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

func run(w io.Writer, now func() time.Time) error {
	srv, err := newServer(now)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-caller", "alice")
	for i := 1; i <= 3; i++ {
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
		fmt.Fprintf(w, "  RetryInfo delay: %v\n", delay)
		fmt.Fprintf(w, "  %s: %v\n", grpclimit.PushbackTrailer, trailer.Get(grpclimit.PushbackTrailer))
	}
	return nil
}

package middleware

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
)

const apiKeyMD = "x-api-key"

// mdCaller is the API key of a call, from its incoming metadata; both
// limiters resolve their key with it.
func mdCaller(ctx context.Context) string {
	if v := metadata.ValueFromIncomingContext(ctx, apiKeyMD); len(v) > 0 {
		return v[0]
	}
	return ""
}

func grpcCallerKeys(ctx context.Context, _ string) (sluice.Keys, error) {
	return sluice.NewKeys("caller", mdCaller(ctx)), nil
}

// perKeyRate is the usual go-grpc-middleware ratelimit.Limiter: one
// golang.org/x/time/rate.Limiter per API key in a sync.Map (never evicted).
// Its limit matches perCallerStack's: 1/s, burst a million.
type perKeyRate struct{ m sync.Map }

var errLimited = errors.New("rate limited")

func (p *perKeyRate) Limit(ctx context.Context) error {
	key := mdCaller(ctx)
	l, ok := p.m.Load(key)
	if !ok {
		l, _ = p.m.LoadOrStore(key, rate.NewLimiter(1, 1_000_000))
	}
	if !l.(*rate.Limiter).Allow() {
		return errLimited
	}
	return nil
}

// grpcSides are the unary interceptors compared: none, go-grpc-middleware's
// ratelimit over x/time/rate, and grpclimit over a stack with one per-caller
// limit.
func grpcSides() []struct {
	name string
	icpt grpc.UnaryServerInterceptor
} {
	pass := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(ctx, req)
	}
	return []struct {
		name string
		icpt grpc.UnaryServerInterceptor
	}{
		{"bare", pass},
		{"ratelimit", ratelimit.UnaryServerInterceptor(&perKeyRate{})},
		{"sluice", grpclimit.UnaryServerInterceptor(perCallerStack(), grpcCallerKeys)},
	}
}

// healthClient serves the gRPC health service behind icpt on an in-memory
// listener (bufconn: the real gRPC transport, no network) and returns a
// client for it.
func healthClient(tb testing.TB, icpt grpc.UnaryServerInterceptor) healthpb.HealthClient {
	tb.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.UnaryInterceptor(icpt))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	tb.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// callerContexts are outgoing contexts carrying each of 10k API keys.
func callerContexts() []context.Context {
	ctxs := make([]context.Context, callers)
	for i := range ctxs {
		ctxs[i] = metadata.AppendToOutgoingContext(context.Background(), apiKeyMD, "key-"+strconv.Itoa(i))
	}
	return ctxs
}

// BenchmarkGRPC is one unary call (grpc.health.v1.Health/Check) through a
// real gRPC client and server over bufconn, cycling through 10k API keys,
// with each side's interceptor; every call is admitted. The sides run
// interleaved in rounds (see compare):
//
//	go test -run '^$' -bench GRPC -benchtime 300ms -rounds 8
func BenchmarkGRPC(b *testing.B) {
	ctxs := callerContexts()
	var sides []side
	for _, s := range grpcSides() {
		client := healthClient(b, s.icpt)
		sides = append(sides, side{s.name, func(b *testing.B) {
			req := &healthpb.HealthCheckRequest{}
			i := 0
			for b.Loop() {
				if _, err := client.Check(ctxs[i], req); err != nil {
					b.Fatalf("%s: %v", s.name, err)
				}
				if i++; i == len(ctxs) {
					i = 0
				}
			}
		}, func() {
			for _, ctx := range ctxs {
				_, _ = client.Check(ctx, &healthpb.HealthCheckRequest{})
			}
		}})
	}
	compare(b, "gRPC unary call over bufconn", sides)
}

// BenchmarkGRPCInterceptor calls each side's interceptor directly, with the
// incoming-metadata context a server hands it: the limiter's share of a
// call without the transport's, which dwarfs it in BenchmarkGRPC.
func BenchmarkGRPCInterceptor(b *testing.B) {
	ctxs := make([]context.Context, callers)
	for i := range ctxs {
		ctxs[i] = metadata.NewIncomingContext(context.Background(), metadata.Pairs(apiKeyMD, "key-"+strconv.Itoa(i)))
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	var sides []side
	for _, s := range grpcSides() {
		sides = append(sides, side{s.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, err := s.icpt(ctxs[i], nil, info, handler); err != nil {
					b.Fatalf("%s: %v", s.name, err)
				}
				if i++; i == len(ctxs) {
					i = 0
				}
			}
		}, func() {
			for _, ctx := range ctxs {
				_, _ = s.icpt(ctx, nil, info, handler)
			}
		}})
	}
	compare(b, "gRPC interceptor alone", sides)
}

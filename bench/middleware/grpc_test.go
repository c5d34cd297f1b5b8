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
	"github.com/sluicehq/sluice/bucket"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/internal/monoclock"
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

// sideKeyFunc is grpcCallerKeys as grpclimit calls it, through a function
// value (a package variable: the compiler cannot make the call direct).
var sideKeyFunc grpclimit.KeyFunc = grpcCallerKeys

// interceptorSides are the sides of BenchmarkGRPCInterceptor: grpcSides'
// three, then two that split sluice's cost against a floor, all called
// directly with the incoming-metadata contexts ctxs in turn and every call
// admitted:
//
//   - keyfunc: the metadata read both limiters resolve their key with, and
//     nothing else; what any limiter keyed this way pays. sluice − keyfunc
//     and ratelimit − keyfunc are the limiters' own costs (see compare).
//   - keys: keyfunc, and the sluice.Keys built from it as grpclimit gets
//     them, returned by a KeyFunc called through a function value; keys −
//     keyfunc is what the API's 224-byte Keys costs before any limiting.
//   - allow: the same stack's Allow with the key read from metadata, in an
//     interceptor of two lines; sluice − allow is grpclimit's own path.
//   - table: the metadata read and one take from a bucket.Table with the
//     stack's limit, clock and key (the caller's value): the least any
//     limiter built on sluice's Table costs here.
func interceptorSides(ctxs []context.Context) []side {
	info := &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	icpts := grpcSides()
	st := perCallerStack()
	tab := bucket.NewTable(rate.Limit(1), 1_000_000)
	icpts = append(icpts, []struct {
		name string
		icpt grpc.UnaryServerInterceptor
	}{
		{floorSide, func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			keySink += len(mdCaller(ctx))
			return h(ctx, req)
		}},
		{"keys", func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			k, err := sideKeyFunc(ctx, info.FullMethod)
			if err != nil {
				return nil, err
			}
			keySink += k.Len()
			return h(ctx, req)
		}},
		{"allow", func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if d, err := st.Allow(ctx, sluice.NewKeys("caller", mdCaller(ctx))); err != nil || !d.Allowed {
				return nil, errLimited
			}
			return h(ctx, req)
		}},
		{"table", func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if !tab.AllowAt(monoclock.Now(), mdCaller(ctx), 1) {
				return nil, errLimited
			}
			return h(ctx, req)
		}},
	}...)
	var sides []side
	for _, s := range icpts {
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
	return sides
}

// incomingContexts are the contexts a server hands its interceptors for
// calls from each of 10k API keys.
func incomingContexts() []context.Context {
	ctxs := make([]context.Context, callers)
	for i := range ctxs {
		ctxs[i] = metadata.NewIncomingContext(context.Background(), metadata.Pairs(apiKeyMD, "key-"+strconv.Itoa(i)))
	}
	return ctxs
}

// BenchmarkGRPCInterceptor calls each side's interceptor directly, with the
// incoming-metadata context a server hands it: the limiter's share of a
// call without the transport's, which dwarfs it in BenchmarkGRPC. The
// sides are interceptorSides'.
//
//	go test -run '^$' -bench GRPCInterceptor$ -benchtime 300ms -rounds 9
func BenchmarkGRPCInterceptor(b *testing.B) {
	compare(b, "gRPC interceptor alone", interceptorSides(incomingContexts()))
}

// BenchmarkInterceptorSide runs each side of BenchmarkGRPCInterceptor
// on its own (warmed first), for measurements that take one side at a time:
// instruction counts, where the difference of two runs of different
// lengths divided by the difference of their lengths is the cost of one
// call (the set-up and the warm-up cancel out), and profiles. GOGC=off
// keeps the collector's work, which does not grow in step with the calls,
// out of the difference; cpu.rdtscp=off keeps the runtime off RDTSCP, an
// instruction valgrind 3.19 does not know.
//
//	go test -c && GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off GOMAXPROCS=1 valgrind --tool=callgrind \
//	  ./middleware.test -test.run '^$' -test.bench 'InterceptorSide/sluice$' -test.benchtime 200000x
func BenchmarkInterceptorSide(b *testing.B) {
	runAlone(b, interceptorSides(incomingContexts()))
}

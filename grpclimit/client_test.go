package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/pace"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func noJitter(time.Duration) time.Duration { return 0 }

// A real server limited to 1 call per second (burst 1) by grpclimit's own
// interceptor: the paced client's second call is throttled with RetryInfo,
// and its third waits the delay instead of being throttled again.
func TestUnaryClientInterceptorLearnsRetryInfo(t *testing.T) {
	clk := limitertest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	limits, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "per-method", "dimensionKeys": ["method"],
	  "entries": [{"dimensions": {"method": "*"}, "requests": [{"rate": 1, "period": "second"}]}]}]}`), stack.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	p := pace.New(nil, pace.WithClock(clk), pace.WithJitter(noJitter))
	client := serveWithClient(t, []grpc.ServerOption{grpc.UnaryInterceptor(grpclimit.UnaryServerInterceptor(limits, grpclimit.MethodKey("method")))},
		grpc.WithUnaryInterceptor(grpclimit.UnaryClientInterceptor(p, "")))
	var codesSeen []codes.Code
	for range 3 {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		codesSeen = append(codesSeen, status.Code(err))
	}
	if fmt.Sprint(codesSeen) != "[OK ResourceExhausted OK]" {
		t.Fatalf("codes %v", codesSeen)
	}
	if got := fmt.Sprint(clk.Slept()); got != "[1s]" {
		t.Fatalf("slept %s, want [1s]", got)
	}
}

// Only the pushback trailer: the pause follows it; a malformed or
// negative one falls back to the default pause.
func TestUnaryClientInterceptorPushback(t *testing.T) {
	for _, tc := range []struct {
		trailer string
		want    string
	}{
		{"1500", "[1.5s]"},
		{"-1", "[1s]"},
		{"soon", "[1s]"},
		{"99999999999", "[1s]"},
	} {
		t.Run(tc.trailer, func(t *testing.T) {
			clk := limitertest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			p := pace.New(nil, pace.WithClock(clk), pace.WithJitter(noJitter))
			var calls int
			throttleFirst := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				calls++
				if calls == 1 {
					_ = grpc.SetTrailer(ctx, metadata.Pairs(grpclimit.PushbackTrailer, tc.trailer))
					return nil, status.Error(codes.ResourceExhausted, "slow down")
				}
				return h(ctx, req)
			}
			client := serveWithClient(t, []grpc.ServerOption{grpc.UnaryInterceptor(throttleFirst)},
				grpc.WithUnaryInterceptor(grpclimit.UnaryClientInterceptor(p, "")))
			client.Check(context.Background(), &healthpb.HealthCheckRequest{})
			if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(clk.Slept()); got != tc.want {
				t.Fatalf("slept %s, want %s", got, tc.want)
			}
		})
	}
}

// A pause longer than the maximum wait fails the call before sending.
func TestUnaryClientInterceptorMaxWait(t *testing.T) {
	clk := limitertest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	p := pace.New(nil, pace.WithClock(clk), pace.WithMaxWait(time.Second))
	var calls int
	server := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		calls++
		return nil, grpclimit.Status(sluiceDenial(time.Minute)).Err()
	}
	client := serveWithClient(t, []grpc.ServerOption{grpc.UnaryInterceptor(server)},
		grpc.WithUnaryInterceptor(grpclimit.UnaryClientInterceptor(p, "")))
	client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if !errors.Is(err, pace.ErrMaxWait) || calls != 1 {
		t.Fatalf("err %v after %d calls, want ErrMaxWait after 1", err, calls)
	}
}

// Streams are paced at their start and learn from their end.
func TestStreamClientInterceptor(t *testing.T) {
	clk := limitertest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	p := pace.New(nil, pace.WithClock(clk), pace.WithJitter(noJitter))
	var calls int
	server := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		calls++
		if calls == 1 {
			return grpclimit.Status(sluiceDenial(2 * time.Second)).Err()
		}
		return status.Error(codes.Unimplemented, "done")
	}
	client := serveWithClient(t, []grpc.ServerOption{grpc.StreamInterceptor(server)},
		grpc.WithStreamInterceptor(grpclimit.StreamClientInterceptor(p, "")))
	for range 2 {
		st, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err == nil {
			t.Fatal("stream did not end")
		}
	}
	if got := fmt.Sprint(clk.Slept()); got != "[2s]" {
		t.Fatalf("slept %s, want [2s]", got)
	}
}

func sluiceDenial(retry time.Duration) *slerrors.ThrottledError {
	te, _ := slerrors.AsThrottled(sluice.Decision{Allowed: false, RetryAfter: retry, LimitID: "l", Metric: "requests"}.Err())
	return te
}

// serveWithClient starts a real gRPC server with the health service on
// 127.0.0.1 and returns a client dialled with dopts.
func serveWithClient(t *testing.T, sopts []grpc.ServerOption, dopts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(sopts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), append(dopts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func FuzzPushback(f *testing.F) {
	f.Add("1500")
	f.Add("-1")
	f.Add("999999999999999")
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := grpclimit.Pushback(metadata.Pairs(grpclimit.PushbackTrailer, v))
		if d < 0 || d > 24*time.Hour || (!ok && d != 0) {
			t.Fatalf("Pushback(%q) = %v, %v", v, d, ok)
		}
	})
}

// upstream names the pace the calls share: with a name, a pushback on one
// connection pauses the calls of another connection given the same name;
// with "", each connection is its own upstream (its target).
func TestClientInterceptorUpstreamName(t *testing.T) {
	for _, tc := range []struct {
		upstream string
		want     string // what the second connection's call slept
	}{
		{"shared", "[1.5s]"},
		{"", "[]"},
	} {
		t.Run(fmt.Sprintf("%q", tc.upstream), func(t *testing.T) {
			clk := limitertest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			p := pace.New(nil, pace.WithClock(clk), pace.WithJitter(noJitter))
			pushback := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				_ = grpc.SetTrailer(ctx, metadata.Pairs(grpclimit.PushbackTrailer, "1500"))
				return nil, status.Error(codes.ResourceExhausted, "slow down")
			}
			a := serveWithClient(t, []grpc.ServerOption{grpc.UnaryInterceptor(pushback)},
				grpc.WithUnaryInterceptor(grpclimit.UnaryClientInterceptor(p, tc.upstream)))
			b := serveWithClient(t, nil, grpc.WithUnaryInterceptor(grpclimit.UnaryClientInterceptor(p, tc.upstream)))
			if _, err := a.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("first connection: %v, want ResourceExhausted", err)
			}
			if _, err := b.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(clk.Slept()); got != tc.want {
				t.Fatalf("slept %s, want %s", got, tc.want)
			}
		})
	}
}

package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
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
	"github.com/sluicehq/sluice/stack/limitertest"
)

// callerKey takes the caller from the x-caller metadata and adds the method.
func callerKey(ctx context.Context, method string) (sluice.Keys, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var k sluice.Keys
	if v := md.Get("x-caller"); len(v) > 0 {
		if v[0] == "bad" {
			return k, errors.New("malformed caller")
		}
		k.Set("caller", v[0])
	}
	k.Set("method", method)
	return k, nil
}

// serve starts a real gRPC server with the health service on 127.0.0.1 and
// returns a client for it.
func serve(t *testing.T, opts ...grpc.ServerOption) healthpb.HealthClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func asCaller(caller string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-caller", caller)
}

func quotaFailure(t *testing.T, err error) *errdetails.QuotaFailure_Violation {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if qf, ok := d.(*errdetails.QuotaFailure); ok && len(qf.Violations) == 1 {
			return qf.Violations[0]
		}
	}
	t.Fatalf("no QuotaFailure in %v", err)
	return nil
}

func TestUnaryInterceptor(t *testing.T) {
	lim, clock := limitertest.NewPerValue("caller", 1, 1500*time.Millisecond+time.Microsecond)
	client := serve(t, grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, callerKey)))

	if _, err := client.Check(asCaller("alice"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	var trailer metadata.MD
	_, err := client.Check(asCaller("alice"), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second call: %v, want ResourceExhausted", err)
	}
	if d, ok := grpclimit.RetryDelay(err); !ok || d != 1500*time.Millisecond+time.Microsecond {
		t.Errorf("RetryInfo delay %v %v, want 1.500001s", d, ok)
	}
	v := quotaFailure(t, err)
	if v.Subject != "per-caller/caller=alice" || v.QuotaId != "per-caller" || v.QuotaMetric != "requests" || v.QuotaValue != 1 {
		t.Errorf("QuotaFailure %v", v)
	}
	if got := trailer.Get(grpclimit.PushbackTrailer); len(got) != 1 || got[0] != "1501" {
		t.Errorf("pushback trailer %v, want [1501]", got)
	}
	if !strings.Contains(status.Convert(err).Message(), "per-caller/caller=alice") {
		t.Errorf("message %q does not name the limit", status.Convert(err).Message())
	}
	if _, err := client.Check(asCaller("bob"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("bob throttled by alice's bucket: %v", err)
	}
	clock.Advance(1500 * time.Millisecond)
	if _, err := client.Check(asCaller("alice"), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("admitted before the RetryInfo delay: %v", err)
	}
	clock.Advance(time.Microsecond)
	if _, err := client.Check(asCaller("alice"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("throttled after waiting the RetryInfo delay: %v", err)
	}
}

func TestStreamInterceptor(t *testing.T) {
	lim, _ := limitertest.NewPerValue("caller", 1, time.Second)
	client := serve(t, grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(lim, callerKey)))

	ctx, cancel := context.WithCancel(asCaller("alice"))
	defer cancel()
	first, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Recv(); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	second, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = second.Recv()
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second stream: %v, want ResourceExhausted", err)
	}
	if d, ok := grpclimit.RetryDelay(err); !ok || d != time.Second {
		t.Errorf("RetryInfo delay %v %v", d, ok)
	}
	if got := second.Trailer().Get(grpclimit.PushbackTrailer); len(got) != 1 || got[0] != "1000" {
		t.Errorf("pushback trailer %v", got)
	}
}

func TestAdapter(t *testing.T) {
	lim, _ := limitertest.NewPerValue("caller", 1, time.Second)
	var methods []string
	var mu sync.Mutex
	keys := func(ctx context.Context, method string) (sluice.Keys, error) {
		mu.Lock()
		methods = append(methods, method)
		mu.Unlock()
		return callerKey(ctx, method)
	}
	var _ ratelimit.Limiter = grpclimit.Adapter(lim, keys)
	client := serve(t, grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(grpclimit.Adapter(lim, keys))))
	if _, err := client.Check(asCaller("alice"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	var trailer metadata.MD
	_, err := client.Check(asCaller("alice"), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "rate limit exceeded for per-caller/caller=alice (requests), retry after 1s") {
		t.Fatalf("second call: %v", err)
	}
	if strings.Count(err.Error(), "rpc error") != 1 {
		t.Errorf("status nested in the message: %v", err)
	}
	if got := trailer.Get(grpclimit.PushbackTrailer); len(got) != 1 || got[0] != "1000" {
		t.Errorf("pushback trailer %v", got)
	}
	if len(methods) != 2 || methods[0] != "/grpc.health.v1.Health/Check" {
		t.Errorf("key func saw methods %v", methods)
	}
}

// A Limiter error always refuses the call with Unavailable.
func TestLimiterErrorRefuses(t *testing.T) {
	boom := errors.New("redis down")
	broken := sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) { return sluice.Decision{}, boom })

	closed := serve(t, grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(broken, callerKey)))
	if _, err := closed.Check(asCaller("a"), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("limiter error: %v, want Unavailable", err)
	}
	if _, err := closed.Check(asCaller("bad"), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("key error: %v, want InvalidArgument", err)
	}
	// Called directly, the interceptor does not run the handler, and the
	// error handler observes the Limiter's error.
	var observed []error
	ran := false
	icpt := grpclimit.UnaryServerInterceptor(broken, grpclimit.MethodKey("method"), grpclimit.WithErrorHandler(func(err error) { observed = append(observed, err) }))
	resp, err := icpt(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/pkg.Svc/Call"},
		func(context.Context, any) (any, error) { ran = true; return "handled", nil })
	if resp != nil || status.Code(err) != codes.Unavailable || ran {
		t.Errorf("interceptor called directly: %v, %v, handler ran %v; want Unavailable and no handler", resp, err, ran)
	}
	if len(observed) != 1 || !errors.Is(observed[0], boom) {
		t.Errorf("the error handler observed %v, want the limiter's error", observed)
	}
	// A key function's error is observed too, and refuses the call.
	observed = nil
	badKey := func(context.Context, string) (sluice.Keys, error) { return sluice.Keys{}, errors.New("no caller") }
	icpt = grpclimit.UnaryServerInterceptor(broken, badKey, grpclimit.WithErrorHandler(func(err error) { observed = append(observed, err) }))
	if _, err := icpt(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/pkg.Svc/Call"},
		func(context.Context, any) (any, error) { return "handled", nil }); status.Code(err) != codes.InvalidArgument {
		t.Errorf("key error: %v, want InvalidArgument", err)
	}
	if len(observed) != 1 || status.Code(observed[0]) != codes.InvalidArgument {
		t.Errorf("key error: the error handler observed %v", observed)
	}
}

func TestPermanentDenial(t *testing.T) {
	client := serve(t, grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(sluice.Deny, grpclimit.MethodKey("method"))))
	var trailer metadata.MD
	_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("%v", err)
	}
	if d, ok := grpclimit.RetryDelay(err); ok {
		t.Errorf("permanent denial carries RetryInfo %v", d)
	}
	if got := trailer.Get(grpclimit.PushbackTrailer); len(got) != 1 || got[0] != "-1" {
		t.Errorf("pushback %v, want -1 (do not retry)", got)
	}
}

func TestStatusOddInput(t *testing.T) {
	if st := grpclimit.Status(nil); st.Code() != codes.ResourceExhausted {
		t.Errorf("Status(nil) = %v", st)
	}
	st := grpclimit.Status(&slerrors.ThrottledError{RetryAfter: -time.Second, LimitKey: "\xff"})
	if d, ok := grpclimit.RetryDelay(st.Err()); !ok || d != 0 {
		t.Errorf("negative RetryAfter gave delay %v %v, want 0", d, ok)
	}
	if _, ok := grpclimit.RetryDelay(errors.New("plain")); ok {
		t.Error("RetryDelay of a plain error")
	}
}

// TestConcurrentCalls: on a frozen clock, exactly burst calls of many
// concurrent ones pass.
func TestConcurrentCalls(t *testing.T) {
	lim, _ := limitertest.NewPerValue("caller", 30, time.Second)
	client := serve(t, grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, callerKey)))
	var ok, throttled atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				_, err := client.Check(asCaller("shared"), &healthpb.HealthCheckRequest{})
				switch status.Code(err) {
				case codes.OK:
					ok.Add(1)
				case codes.ResourceExhausted:
					throttled.Add(1)
				default:
					t.Errorf("unexpected %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 30 || throttled.Load() != 170 {
		t.Errorf("ok %d throttled %d, want 30 and 170", ok.Load(), throttled.Load())
	}
}

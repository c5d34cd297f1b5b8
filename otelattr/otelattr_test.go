package otelattr_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/enginekit"
	"github.com/sluicehq/sluice/internal/racecheck"
	"github.com/sluicehq/sluice/otelattr"
	"github.com/sluicehq/sluice/stack"
)

// fakeEngine denies every request after the first allowed ones, and fills
// Evaluated only when the context asks for it, like a real engine.
type fakeEngine struct {
	mu      sync.Mutex
	allowed int
	sawAsk  []bool
}

func (f *fakeEngine) Allow(ctx context.Context, keys sluice.Keys) (sluice.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	asked := enginekit.EvaluatedRequested(ctx)
	f.sawAsk = append(f.sawAsk, asked)
	target, _ := keys.Get("targetName")
	caller, _ := keys.Get("caller")
	d := sluice.Decision{Allowed: f.allowed > 0}
	if asked {
		d.Evaluated = []string{"per-caller-rpm:requests:" + caller, "per-target-rps:requests:" + target}
	}
	if d.Allowed {
		f.allowed--
		return d, nil
	}
	d.LimitID = "per-target-rps"
	d.LimitKey = "per-target-rps/targetName=" + target + ",caller=" + caller
	d.Metric = sluice.MetricRequests
	d.MatchedEntry = []string{target, "*"}
	d.ResolvedValues = []string{target, caller}
	return d, nil
}

func newRecorder() (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	sr := tracetest.NewSpanRecorder()
	return sr, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
}

func attrs(kvs []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

func TestWrapRecordsGatewayNames(t *testing.T) {
	sr, tp := newRecorder()
	eng := &fakeEngine{allowed: 1}
	l := otelattr.Wrap(eng, otelattr.WithSchema(otelattr.Gateway))
	keys := sluice.NewKeys("targetName", "my-target", "caller", "alice")

	for i := range 2 {
		ctx, span := tp.Tracer("test").Start(context.Background(), "req")
		d, err := l.Allow(ctx, keys)
		span.End()
		if err != nil || d.Allowed != (i == 0) {
			t.Fatalf("call %d: %+v, %v", i, d, err)
		}
	}
	spans := sr.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans recorded", len(spans))
	}
	evaluated := []string{"per-caller-rpm:requests:alice", "per-target-rps:requests:my-target"}
	wantAllowed := map[string]any{
		"aws.agentcore.gateway.throttle.customer.decision":  "allowed",
		"aws.agentcore.gateway.throttle.customer.evaluated": evaluated,
	}
	wantThrottled := map[string]any{
		"aws.agentcore.gateway.throttle.customer.decision":        "throttled",
		"aws.agentcore.gateway.throttle.customer.limit_key":       "per-target-rps",
		"aws.agentcore.gateway.throttle.customer.metric":          "requests",
		"aws.agentcore.gateway.throttle.customer.matched_entry":   "my-target,*",
		"aws.agentcore.gateway.throttle.customer.resolved_values": "my-target,alice",
		"aws.agentcore.gateway.throttle.customer.evaluated":       evaluated,
	}
	if diff := cmp.Diff(wantAllowed, attrs(spans[0].Attributes())); diff != "" {
		t.Errorf("allowed span attributes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantThrottled, attrs(spans[1].Attributes())); diff != "" {
		t.Errorf("throttled span attributes (-want +got):\n%s", diff)
	}
	if !eng.sawAsk[0] || !eng.sawAsk[1] {
		t.Errorf("engine was not asked for the evaluated list: %v", eng.sawAsk)
	}
}

func TestDefaultNamespace(t *testing.T) {
	got := attrs(otelattr.Default.Attributes(sluice.Decision{Allowed: true}))
	want := map[string]any{"sluice.ratelimit.decision": "allowed", "sluice.ratelimit.evaluated": []string{}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The Default schema's keys are the Key constants.
	throttled := otelattr.Default.Attributes(sluice.Decision{LimitKey: "l/k=v", Metric: "requests"})
	for i, k := range []attribute.Key{otelattr.KeyDecision, otelattr.KeyLimitKey, otelattr.KeyMetric, otelattr.KeyMatchedEntry, otelattr.KeyResolvedValues, otelattr.KeyEvaluated} {
		if i >= len(throttled) || throttled[i].Key != k {
			t.Errorf("attribute %d of a denial is %v, want the key %s", i, throttled, k)
			break
		}
	}
	custom := otelattr.NewSchema("acme.rl")
	got = attrs(custom.Attributes(sluice.Decision{LimitKey: "per-ip/ip=1.2.3.4", Metric: "requests"}))
	if got["acme.rl.limit_key"] != "per-ip" || got["acme.rl.decision"] != "throttled" || got["acme.rl.matched_entry"] != "" {
		t.Errorf("custom schema: %v", got)
	}
}

func TestNotRecordingSpan(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()), sdktrace.WithSpanProcessor(sr))
	eng := &fakeEngine{}
	l := otelattr.Wrap(eng)
	ctx, span := tp.Tracer("test").Start(context.Background(), "req")
	if _, err := l.Allow(ctx, sluice.NewKeys("targetName", "t")); err != nil {
		t.Fatal(err)
	}
	span.End()
	if _, err := l.Allow(context.Background(), sluice.NewKeys("targetName", "t")); err != nil {
		t.Fatal(err)
	}
	if len(sr.Ended()) != 0 {
		t.Errorf("unsampled span was recorded")
	}
	if eng.sawAsk[0] || eng.sawAsk[1] {
		t.Errorf("engine asked for the evaluated list without a recording span: %v", eng.sawAsk)
	}
	otelattr.Default.Record(span, sluice.Decision{}) // must not panic on a non-recording span
	otelattr.Default.Record(nil, sluice.Decision{})
}

func TestErrorRecordsNothing(t *testing.T) {
	sr, tp := newRecorder()
	boom := errors.New("backend down")
	l := otelattr.Wrap(sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) {
		return sluice.Decision{}, boom
	}))
	ctx, span := tp.Tracer("test").Start(context.Background(), "req")
	if _, err := l.Allow(ctx, sluice.Keys{}); !errors.Is(err, boom) {
		t.Fatalf("error %v not passed through", err)
	}
	span.End()
	if n := len(sr.Ended()[0].Attributes()); n != 0 {
		t.Errorf("%d attributes recorded for a failed decision", n)
	}
}

func TestNoAllocationWhenNotRecording(t *testing.T) {
	if testing.CoverMode() != "" || racecheck.Enabled {
		t.Skip("allocation counts differ under -cover and -race")
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	ctx, span := tp.Tracer("test").Start(context.Background(), "req")
	defer span.End()
	inner := sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) {
		return sluice.Decision{Allowed: true}, nil
	})
	l := otelattr.Wrap(inner)
	keys := sluice.NewKeys("targetName", "t", "toolName", "x")
	for name, c := range map[string]context.Context{"no span": context.Background(), "unsampled span": ctx} {
		if n := testing.AllocsPerRun(200, func() { _, _ = l.Allow(c, keys) }); n != 0 {
			t.Errorf("%s: %v allocs per Allow, want 0", name, n)
		}
		if n := testing.AllocsPerRun(200, func() { otelattr.Default.Record(span, sluice.Decision{}) }); n != 0 {
			t.Errorf("%s: %v allocs per Record, want 0", name, n)
		}
	}
}

func TestConcurrentRecording(t *testing.T) {
	sr, tp := newRecorder()
	eng := &fakeEngine{allowed: 500}
	l := otelattr.Wrap(eng)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 125 {
				ctx, span := tp.Tracer("test").Start(context.Background(), "req")
				_, _ = l.Allow(ctx, sluice.NewKeys("targetName", "t", "caller", string(rune('a'+g))))
				span.End()
			}
		}()
	}
	wg.Wait()
	counts := map[any]int{}
	for _, s := range sr.Ended() {
		counts[attrs(s.Attributes())["sluice.ratelimit.decision"]]++
	}
	if counts["allowed"] != 500 || counts["throttled"] != 500 {
		t.Errorf("decisions recorded %v, want 500 allowed and 500 throttled", counts)
	}
}

func BenchmarkWrapNotRecording(b *testing.B) {
	inner := sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) {
		return sluice.Decision{Allowed: true}, nil
	})
	ctx := context.Background()
	keys := sluice.NewKeys("targetName", "t")
	b.Run("bare", func(b *testing.B) {
		var l sluice.Limiter = inner // through the interface, as callers hold it
		b.ReportAllocs()
		for b.Loop() {
			_, _ = l.Allow(ctx, keys)
		}
	})
	b.Run("wrapped", func(b *testing.B) {
		l := otelattr.Wrap(inner)
		b.ReportAllocs()
		for b.Loop() {
			_, _ = l.Allow(ctx, keys)
		}
	})
}

// A wrapped stack keeps ReserveSlots, so middleware behind Wrap holds no
// reservation for a request no connections limit applies to, and the
// decision lands on the span as for Allow.
func TestWrapForwardsReserveSlots(t *testing.T) {
	sr, tp := newRecorder()
	st, err := stack.Load([]byte(`[
	  {"rateLimitId": "conns", "dimensionKeys": ["caller"], "entries": [
	    {"dimensions": {"caller": "alice"}, "connections": [{"rate": 1, "period": "second"}]}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	slots, ok := otelattr.Wrap(st).(sluice.SlotReserver)
	if !ok {
		t.Fatal("a wrapped stack is not a SlotReserver")
	}
	ctx, span := tp.Tracer("test").Start(context.Background(), "req")
	r, d, err := slots.ReserveSlots(ctx, sluice.NewKeys("caller", "alice"))
	if err != nil || !d.Allowed || !r.Held() {
		t.Fatalf("first alice: %+v held=%v, %v", d, r.Held(), err)
	}
	// The one slot is held: a second request is denied until it is released.
	if _, d, err := slots.ReserveSlots(ctx, sluice.NewKeys("caller", "alice")); err != nil || d.Allowed {
		t.Fatalf("second alice while the slot is held: %+v, %v", d, err)
	}
	r.Cancel()
	if r2, d, err := slots.ReserveSlots(ctx, sluice.NewKeys("caller", "bob")); err != nil || !d.Allowed || r2.Held() {
		t.Fatalf("bob, whom no connections limit covers: %+v held=%v, %v", d, r2.Held(), err)
	}
	span.End()
	got := attrs(sr.Ended()[0].Attributes())
	if got["sluice.ratelimit.decision"] == nil {
		t.Fatalf("ReserveSlots recorded nothing on the span: %v", got)
	}
}

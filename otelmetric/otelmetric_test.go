package otelmetric_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/otelmetric"
	"github.com/sluicehq/sluice/stack"
)

const testConfig = `{"rateLimits": [
  {"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
    {"dimensions": {"caller": "*"}, "requests": [{"rate": 2, "period": "minute"}]}]},
  {"rateLimitId": "new-limit", "dimensionKeys": ["caller"], "shadow": true, "entries": [
    {"dimensions": {"caller": "*"}, "requests": [{"rate": 1, "period": "minute"}]}]}
]}`

// collect returns every metric the reader has, by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelmetric.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// attrs renders an attribute set as "k=v,k=v" (sorted by key).
func attrs(s attribute.Set) string {
	var out string
	for i, kv := range s.ToSlice() {
		if i > 0 {
			out += ","
		}
		out += string(kv.Key) + "=" + kv.Value.String()
	}
	return out
}

// sums returns an int64 sum's points as attributes → value, checking that
// it is a monotonic cumulative counter.
func sums(t *testing.T, m metricdata.Metrics) map[string]int64 {
	t.Helper()
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, want an int64 sum", m.Name, m.Data)
	}
	if !s.IsMonotonic || s.Temporality != metricdata.CumulativeTemporality {
		t.Errorf("%s: monotonic %v, temporality %v", m.Name, s.IsMonotonic, s.Temporality)
	}
	out := map[string]int64{}
	for _, p := range s.DataPoints {
		out[attrs(p.Attributes)] = p.Value
	}
	return out
}

func gauge[N int64 | float64](t *testing.T, m metricdata.Metrics) N {
	t.Helper()
	g, ok := m.Data.(metricdata.Gauge[N])
	if !ok || len(g.DataPoints) != 1 {
		t.Fatalf("%s: %#v, want a gauge with one point", m.Name, m.Data)
	}
	return g.DataPoints[0].Value
}

// stepClock advances by step at every reading.
func stepClock(step time.Duration) func() time.Time {
	var n atomic.Int64
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time { return t0.Add(time.Duration(n.Add(1)) * step) }
}

func TestDecisions(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := otelmetric.New(mp, otelmetric.WithDurationSampling(1), otelmetric.WithClock(sluice.ClockFunc(stepClock(3*time.Microsecond))))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st, err := stack.Load([]byte(testConfig), stack.WithClock(sluice.ClockFunc(func() time.Time { return t0 })))
	if err != nil {
		t.Fatal(err)
	}
	l := m.Wrap(st)
	ctx := context.Background()
	// alice: allowed; allowed but new-limit would deny; throttled.
	// bob: allowed.
	for _, caller := range []string{"alice", "alice", "alice", "bob"} {
		if _, err := l.Allow(ctx, sluice.NewKeys("caller", caller)); err != nil {
			t.Fatal(err)
		}
	}
	// A call that cannot decide.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Allow(canceled, sluice.NewKeys("caller", "carol")); err == nil {
		t.Fatal("Allow with an ended context succeeded")
	}
	// Reserve is counted too.
	if _, ok := l.(sluice.Reserver); !ok {
		t.Fatal("a wrapped stack is not a Reserver")
	}
	if _, d, err := l.(sluice.Reserver).Reserve(ctx, sluice.NewKeys("caller", "bob"), 0); err != nil || !d.Allowed {
		t.Fatalf("Reserve: %+v, %v", d, err)
	}
	// So is ReserveSlots, which a wrapped stack keeps.
	if _, d, err := l.(sluice.SlotReserver).ReserveSlots(ctx, sluice.NewKeys("caller", "dave")); err != nil || !d.Allowed {
		t.Fatalf("ReserveSlots: %+v, %v", d, err)
	}

	got := collect(t, reader)
	want := map[string]int64{
		"sluice.ratelimit.decision=allowed,sluice.ratelimit.limit_key=per-caller":                                    5,
		"sluice.ratelimit.decision=throttled,sluice.ratelimit.limit_key=per-caller,sluice.ratelimit.metric=requests": 1,
		"sluice.ratelimit.decision=error": 1,
	}
	if diff := cmp.Diff(want, sums(t, got[otelmetric.Decisions])); diff != "" {
		t.Errorf("%s (-want +got):\n%s", otelmetric.Decisions, diff)
	}
	// alice's second and third requests, and bob's second.
	wantShadow := map[string]int64{"sluice.ratelimit.limit_key=new-limit": 3}
	if diff := cmp.Diff(wantShadow, sums(t, got[otelmetric.ShadowDenials])); diff != "" {
		t.Errorf("%s (-want +got):\n%s", otelmetric.ShadowDenials, diff)
	}
	if u := got[otelmetric.Decisions].Unit; u != "{decision}" {
		t.Errorf("decisions unit %q", u)
	}

	h, ok := got[otelmetric.DecisionDuration].Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s: %T", otelmetric.DecisionDuration, got[otelmetric.DecisionDuration].Data)
	}
	if u := got[otelmetric.DecisionDuration].Unit; u != "s" {
		t.Errorf("duration unit %q", u)
	}
	var count uint64
	var sum float64
	for _, p := range h.DataPoints {
		count += p.Count
		sum += p.Sum
		if p.Sum != float64(p.Count)*3e-6 {
			t.Errorf("%s: sum %v over %d decisions of 3µs", attrs(p.Attributes), p.Sum, p.Count)
		}
	}
	if count != 7 {
		t.Errorf("%d decisions timed, want all 7", count)
	}

	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := collect(t, reader)[otelmetric.Decisions]; ok {
		t.Error("decisions still reported after Close")
	}
}

func TestDurationSampling(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), otelmetric.WithDurationSampling(8))
	if err != nil {
		t.Fatal(err)
	}
	l := m.Wrap(sluice.Unlimited)
	const n = 8000
	for range n {
		_, _ = l.Allow(context.Background(), sluice.Keys{})
	}
	got := collect(t, reader)
	if d := sums(t, got[otelmetric.Decisions]); d["sluice.ratelimit.decision=allowed,sluice.ratelimit.limit_key="] != n {
		t.Errorf("decisions %v, want exactly %d", d, n)
	}
	h := got[otelmetric.DecisionDuration].Data.(metricdata.Histogram[float64])
	// 1000 expected; 5 standard deviations is ±150.
	if c := h.DataPoints[0].Count; c < 850 || c > 1150 {
		t.Errorf("%d of %d decisions timed, want about 1 in 8", c, n)
	}

	// Off.
	reader = sdkmetric.NewManualReader()
	m, err = otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), otelmetric.WithoutDurations())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = m.Wrap(sluice.Unlimited).Allow(context.Background(), sluice.Keys{})
	if h, ok := collect(t, reader)[otelmetric.DecisionDuration]; ok {
		t.Errorf("histogram with sampling off: %+v", h)
	}
}

func TestLimitIDsBounded(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range otelmetric.MaxLimitIDs + 10 {
		m.Record(sluice.Decision{LimitID: fmt.Sprint("id-", i), LimitKey: fmt.Sprint("id-", i, "/k=v"), Metric: "weird"}, nil)
	}
	d := sums(t, collect(t, reader)[otelmetric.Decisions])
	if len(d) != otelmetric.MaxLimitIDs+1 {
		t.Errorf("%d series, want %d ids and the overflow", len(d), otelmetric.MaxLimitIDs)
	}
	if n := d["otel.metric.overflow=true,sluice.ratelimit.decision=throttled,sluice.ratelimit.metric=_OTHER"]; n != 10 {
		t.Errorf("overflow series %d, want 10 (series: %d)", n, len(d))
	}
}

func TestConcurrentCountsExact(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), otelmetric.WithDurationSampling(3))
	if err != nil {
		t.Fatal(err)
	}
	l := m.Wrap(sluice.LimiterFunc(func(_ context.Context, k sluice.Keys) (sluice.Decision, error) {
		id, _ := k.Get("id")
		return sluice.Decision{Allowed: true, LimitID: id, Shadowed: []string{"shadow/id=" + id}}, nil
	}))
	const goroutines, each = 8, 2000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				_, _ = l.Allow(context.Background(), sluice.NewKeys("id", fmt.Sprint("l", (g+i)%4)))
			}
		})
	}
	// Collect while counting.
	wg.Go(func() {
		for range 20 {
			collect(t, reader)
		}
	})
	wg.Wait()
	got := collect(t, reader)
	var total int64
	for k, v := range sums(t, got[otelmetric.Decisions]) {
		if v != goroutines*each/4 {
			t.Errorf("%s: %d", k, v)
		}
		total += v
	}
	if total != goroutines*each {
		t.Errorf("total %d", total)
	}
	if s := sums(t, got[otelmetric.ShadowDenials]); s["sluice.ratelimit.limit_key=shadow"] != goroutines*each {
		t.Errorf("shadow %v", s)
	}
}

func TestErrorHandler(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	var passed []error
	h := m.ErrorHandler(func(err error) { passed = append(passed, err) })
	refused := errors.New("connection refused")
	state := func() int64 { return gauge[int64](t, collect(t, reader)[otelmetric.BackendFallback]) }

	if got := state(); got != 0 {
		t.Fatalf("fallback %d before any event", got)
	}
	events := []error{
		fmt.Errorf("take: %w", context.DeadlineExceeded),
		&stack.FallbackError{Active: true, Failures: 1, Err: refused},
		&stack.FallbackError{Active: true, Failures: 4, Err: refused}, // still local: 3 more
		&stack.SourceError{Op: stack.SourceFetch, Err: refused},       // not a backend error
	}
	for _, e := range events {
		h(e)
	}
	if got := state(); got != 1 {
		t.Fatalf("fallback %d while local", got)
	}
	h(&stack.FallbackError{Active: false, Failures: 5}) // back, one more failure before
	if got := state(); got != 0 {
		t.Fatalf("fallback %d after recovery", got)
	}
	h(&stack.FallbackError{Active: true, Failures: 2, Err: refused}) // a second outage

	got := collect(t, reader)
	wantErrs := map[string]int64{"error.type=timeout": 1, "error.type=*errors.errorString": 1 + 3 + 2}
	wantErrs["error.type=_OTHER"] = 1 // the recovery event's failure has no Err
	if diff := cmp.Diff(wantErrs, sums(t, got[otelmetric.BackendErrors])); diff != "" {
		t.Errorf("%s (-want +got):\n%s", otelmetric.BackendErrors, diff)
	}
	if diff := cmp.Diff(map[string]int64{"": 2}, sums(t, got[otelmetric.BackendFallbacks])); diff != "" {
		t.Errorf("%s (-want +got):\n%s", otelmetric.BackendFallbacks, diff)
	}
	if len(passed) != len(events)+2 || passed[3] != events[3] {
		t.Errorf("next got %d errors, want all %d in order", len(passed), len(events)+2)
	}
	// nil next is allowed.
	m.ErrorHandler(nil)(refused)
}

func TestObserveSource(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := collect(t, reader)[otelmetric.ConfigGeneration]; ok {
		t.Error("generation reported without a source")
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var doc atomic.Value
	doc.Store(testConfig)
	st, err := stack.Load([]byte(testConfig), stack.WithClock(sluice.ClockFunc(func() time.Time { return now })),
		stack.WithErrorHandler(m.ErrorHandler(nil)))
	if err != nil {
		t.Fatal(err)
	}
	src := stack.NewSource(st, func(context.Context) ([]byte, error) { return []byte(doc.Load().(string)), nil })
	m.ObserveSource(src)
	ctx := context.Background()
	if err := src.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	now = now.Add(90 * time.Second)
	doc.Store(`{"rateLimits": [`)
	_ = src.Refresh(ctx)
	_ = src.Refresh(ctx)

	got := collect(t, reader)
	if g := gauge[int64](t, got[otelmetric.ConfigGeneration]); g != 1 {
		t.Errorf("generation %d", g)
	}
	if a := gauge[float64](t, got[otelmetric.ConfigRefreshAge]); a != 90 {
		t.Errorf("age %v s, want 90", a)
	}
	if u := got[otelmetric.ConfigRefreshAge].Unit; u != "s" {
		t.Errorf("age unit %q", u)
	}
	if e := sums(t, got[otelmetric.ConfigRefreshErrors]); e[""] != 2 {
		t.Errorf("refresh errors %v", e)
	}
	if _, ok := got[otelmetric.BackendErrors]; ok {
		t.Error("a refresh failure was counted as a backend error")
	}
}

// TestNoAllocs: counting and timing a decision allocates nothing once the
// limit's series exist.
func TestNoAllocs(t *testing.T) {
	for _, every := range []int{1, otelmetric.DefaultDurationSampling} {
		reader := sdkmetric.NewManualReader()
		m, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), otelmetric.WithDurationSampling(every))
		if err != nil {
			t.Fatal(err)
		}
		d := sluice.Decision{LimitID: "per-caller", LimitKey: "per-caller/caller=bob", Metric: sluice.MetricRequests}
		l := m.Wrap(sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) { return d, nil }))
		ctx, keys := context.Background(), sluice.NewKeys("caller", "bob")
		_, _ = l.Allow(ctx, keys)
		if n := testing.AllocsPerRun(1000, func() { _, _ = l.Allow(ctx, keys) }); n != 0 {
			t.Errorf("sampling 1/%d: %v allocations per decision", every, n)
		}
	}
}

// flakyBackend is the in-memory backend, failing while down is set.
type flakyBackend struct {
	stack.Backend
	down atomic.Bool
}

var errStoreDown = errors.New("store down")

func (b *flakyBackend) Take(ctx context.Context, at time.Time, ops []stack.Op) (stack.Outcome, error) {
	if b.down.Load() {
		return stack.Outcome{}, errStoreDown
	}
	return b.Backend.Take(ctx, at, ops)
}

// TestBackendErrorsThroughStack: a real stack's backend failures reach the
// handler, fail open (allowed, counted as backend errors) or fail closed
// (an "error" decision too).
func TestBackendErrorsThroughStack(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int64
	handler := m.ErrorHandler(func(error) { seen.Add(1) })
	b := &flakyBackend{Backend: stack.NewMemoryBackend()}
	open, err := stack.Load([]byte(testConfig), stack.WithBackend(b), stack.WithErrorHandler(handler))
	if err != nil {
		t.Fatal(err)
	}
	closed, err := stack.Load([]byte(testConfig), stack.WithBackend(b), stack.WithErrorHandler(handler), stack.WithFailClosed())
	if err != nil {
		t.Fatal(err)
	}
	ctx, keys := context.Background(), sluice.NewKeys("caller", "dave")
	b.down.Store(true)
	if d, err := m.Wrap(open).Allow(ctx, keys); err != nil || !d.Allowed {
		t.Fatalf("fail open: %+v, %v", d, err)
	}
	if _, err := m.Wrap(closed).Allow(ctx, keys); !errors.Is(err, errStoreDown) {
		t.Fatalf("fail closed: %v", err)
	}
	got := collect(t, reader)
	if diff := cmp.Diff(map[string]int64{"error.type=*errors.errorString": 2}, sums(t, got[otelmetric.BackendErrors])); diff != "" {
		t.Errorf("%s (-want +got):\n%s", otelmetric.BackendErrors, diff)
	}
	want := map[string]int64{
		"sluice.ratelimit.decision=allowed,sluice.ratelimit.limit_key=": 1,
		"sluice.ratelimit.decision=error":                               1,
	}
	if diff := cmp.Diff(want, sums(t, got[otelmetric.Decisions])); diff != "" {
		t.Errorf("%s (-want +got):\n%s", otelmetric.Decisions, diff)
	}
	if seen.Load() != 2 {
		t.Errorf("next handler saw %d errors", seen.Load())
	}
}

func TestObserveDenialCache(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := collect(t, reader)[otelmetric.DenialCacheHits]; ok {
		t.Error("denial cache hits reported without a backend")
	}
	var hits, evictions atomic.Int64
	m.ObserveDenialCache(func() (int64, int64) { return hits.Load(), evictions.Load() })
	hits.Store(42)
	evictions.Store(3)
	got := collect(t, reader)
	if h := sums(t, got[otelmetric.DenialCacheHits]); h[""] != 42 {
		t.Errorf("hits %v, want 42", h)
	}
	if e := sums(t, got[otelmetric.DenialCacheEvictions]); e[""] != 3 {
		t.Errorf("evictions %v, want 3", e)
	}
	m.ObserveDenialCache(nil)
	if _, ok := collect(t, reader)[otelmetric.DenialCacheHits]; ok {
		t.Error("reported after ObserveDenialCache(nil)")
	}
}

package otelmetric_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/otelmetric"
	"github.com/sluicehq/sluice/pace"
)

type upstreamFunc func(*http.Request) (*http.Response, error)

func (f upstreamFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Three requests to an upstream announcing 10/s with none left, the second
// answered 429: three requests recorded, the second and third waited
// (100 ms for the interval, then 2 s for Retry-After), one 429, 10/s
// learned.
func TestPaceHooks(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	hooks, err := otelmetric.PaceHooks(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	calls := 0
	up := upstreamFunc(func(*http.Request) (*http.Response, error) {
		calls++
		h := http.Header{}
		h.Set("RateLimit-Policy", `"p";q=10;w=1`)
		h.Set("RateLimit", `"p";r=0;t=1`)
		status := 200
		if calls == 2 {
			status = 429
			h.Set("Retry-After", "2")
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(""))}, nil
	})
	tr := pace.New(up, pace.WithHooks(hooks), pace.WithClock(clockFuncs{func() time.Time { return now },
		func(_ context.Context, d time.Duration) error { now = now.Add(d); return nil }}),
		pace.WithJitter(func(time.Duration) time.Duration { return 0 }))
	roundTrips(t, tr, 3)
	got := collect(t, reader)
	if s := sums(t, got[otelmetric.PaceRequests]); s[""] != 3 {
		t.Errorf("requests %v, want 3", s)
	}
	if s := sums(t, got[otelmetric.PaceThrottled]); len(s) != 1 || s["sluice.pace.status=429"] != 1 {
		t.Errorf("throttled %v, want one 429", s)
	}
	if g := gauge[float64](t, got[otelmetric.PaceLimit]); g != 10 {
		t.Errorf("limit learned %v, want 10/s", g)
	}
	h, ok := got[otelmetric.PaceWaitDuration].Data.(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 {
		t.Fatalf("wait histogram %#v", got[otelmetric.PaceWaitDuration].Data)
	}
	if p := h.DataPoints[0]; p.Count != 3 || p.Sum < 2.099 || p.Sum > 2.101 {
		t.Errorf("waits: %d recorded, sum %.3fs; want 3 and 2.1s", p.Count, p.Sum)
	}
}

type failingStore struct{}

func (failingStore) Load(context.Context, string) (pace.Learned, error) {
	return pace.Learned{}, errors.New("redis: connection refused")
}

func (failingStore) Merge(context.Context, string, pace.Learned) (pace.Learned, error) {
	return pace.Learned{}, errors.New("redis: connection refused")
}

// A store that fails is counted, once per call, and the request goes on.
func TestPaceHooksStoreErrors(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	hooks, err := otelmetric.PaceHooks(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	up := upstreamFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(""))}, nil
	})
	tr := pace.New(up, pace.WithHooks(hooks), pace.WithClock(clockFuncs{now: func() time.Time { return now }}),
		pace.WithStore(failingStore{}, time.Second))
	roundTrips(t, tr, 3)
	got := collect(t, reader)
	if s := sums(t, got[otelmetric.PaceStoreErrors]); s[""] != 1 {
		t.Errorf("store errors %v, want 1 (one read per interval)", s)
	}
}

// roundTrips sends n requests to one upstream through tr.
func roundTrips(t *testing.T, tr http.RoundTripper, n int) {
	t.Helper()
	for range n {
		req, _ := http.NewRequest("GET", "https://api.test/", nil)
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
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

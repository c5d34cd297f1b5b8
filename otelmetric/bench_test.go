package otelmetric_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/otelmetric"
	"github.com/sluicehq/sluice/stack"
)

// BenchmarkOverhead measures one decision through the sluice.Limiter
// interface, bare and wrapped (SDK MeterProvider with a ManualReader), for a
// trivial limiter (the overhead alone) and a stack with one limit. Run with
// -count N: the sides alternate within each round.
func BenchmarkOverhead(b *testing.B) {
	fixed := sluice.Decision{Allowed: true, LimitID: "per-caller", Limit: 100, Remaining: 50}
	trivial := sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) { return fixed, nil })
	// The stack's clock advances 1µs per decision: 10 units of refill at
	// 10M/s, so every decision is an allowed one.
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var tick atomic.Int64
	st, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
	  {"dimensions": {"caller": "*"}, "requests": [{"rate": 10000000, "period": "second"}]}]}]}`),
		stack.WithNow(func() time.Time { return t0.Add(time.Duration(tick.Add(1)) * time.Microsecond) }))
	if err != nil {
		b.Fatal(err)
	}
	for _, inner := range []struct {
		name string
		l    sluice.Limiter
	}{{"trivial", trivial}, {"stack", st}} {
		wrap := func(every int) sluice.Limiter {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			m, err := otelmetric.New(mp, otelmetric.WithDurationSampling(every))
			if err != nil {
				b.Fatal(err)
			}
			return m.Wrap(inner.l)
		}
		for _, side := range []struct {
			name string
			l    sluice.Limiter
		}{
			{"bare", inner.l},
			{"metrics", wrap(otelmetric.DefaultDurationSampling)},
			{"metrics-timed-1in16", wrap(16)},
			{"metrics-timed-all", wrap(1)},
			{"metrics-untimed", wrap(0)},
		} {
			b.Run(inner.name+"/"+side.name, func(b *testing.B) {
				ctx, keys := context.Background(), sluice.NewKeys("caller", "alice")
				b.ReportAllocs()
				for b.Loop() {
					_, _ = side.l.Allow(ctx, keys)
				}
			})
		}
	}
}

// BenchmarkOverheadParallel is BenchmarkOverhead/trivial with every
// goroutine deciding at once: the per-limit counter is shared.
func BenchmarkOverheadParallel(b *testing.B) {
	fixed := sluice.Decision{Allowed: true, LimitID: "per-caller", Limit: 100, Remaining: 50}
	trivial := sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) { return fixed, nil })
	m, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())))
	if err != nil {
		b.Fatal(err)
	}
	for _, side := range []struct {
		name string
		l    sluice.Limiter
	}{{"bare", trivial}, {"metrics", m.Wrap(trivial)}} {
		b.Run(side.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ctx, keys := context.Background(), sluice.NewKeys("caller", "alice")
				for pb.Next() {
					_, _ = side.l.Allow(ctx, keys)
				}
			})
		})
	}
}

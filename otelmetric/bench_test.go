package otelmetric_test

import (
	"context"
	"slices"
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
		stack.WithClock(sluice.ClockFunc(func() time.Time { return t0.Add(time.Duration(tick.Add(1)) * time.Microsecond) })))
	if err != nil {
		b.Fatal(err)
	}
	for _, inner := range []struct {
		name string
		l    sluice.Limiter
	}{{"trivial", trivial}, {"stack", st}} {
		wrap := func(o otelmetric.Option) sluice.Limiter {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			m, err := otelmetric.New(mp, o)
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
			{"metrics", wrap(otelmetric.WithDurationSampling(otelmetric.DefaultDurationSampling))},
			{"metrics-timed-1in16", wrap(otelmetric.WithDurationSampling(16))},
			{"metrics-timed-all", wrap(otelmetric.WithDurationSampling(1))},
			{"metrics-untimed", wrap(otelmetric.WithoutDurations())},
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

// BenchmarkOverheadAB interleaves bare and wrapped decisions finely, so
// that the machine's load drifts out of the comparison: each round runs
// 1000 decisions of every side, in an order that rotates, and the metrics
// reported are the medians over rounds of the per-decision difference to
// bare ("Δns/op-<side>"), and bare's own median ("ns/op-bare"); ns/op is
// the mean over all sides. The control side is bare again: its Δ shows the
// method's bias.
func BenchmarkOverheadAB(b *testing.B) {
	fixed := sluice.Decision{Allowed: true, LimitID: "per-caller", Limit: 100, Remaining: 50}
	trivial := sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) { return fixed, nil })
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var tick atomic.Int64
	st, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
	  {"dimensions": {"caller": "*"}, "requests": [{"rate": 10000000, "period": "second"}]}]}]}`),
		stack.WithClock(sluice.ClockFunc(func() time.Time { return t0.Add(time.Duration(tick.Add(1)) * time.Microsecond) })))
	if err != nil {
		b.Fatal(err)
	}
	for _, inner := range []struct {
		name string
		l    sluice.Limiter
	}{{"trivial", trivial}, {"stack", st}} {
		b.Run(inner.name, func(b *testing.B) {
			wrap := func(o otelmetric.Option) sluice.Limiter {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				m, err := otelmetric.New(mp, o)
				if err != nil {
					b.Fatal(err)
				}
				return m.Wrap(inner.l)
			}
			names := []string{"bare", "metrics", "untimed", "control"}
			sides := []sluice.Limiter{inner.l, wrap(otelmetric.WithDurationSampling(otelmetric.DefaultDurationSampling)), wrap(otelmetric.WithoutDurations()), inner.l}
			const chunk = 1000
			ctx, keys := context.Background(), sluice.NewKeys("caller", "alice")
			var deltas [4][]float64
			var bare []float64
			b.ReportAllocs()
			b.ResetTimer()
			for round := 0; round*chunk*len(sides) < b.N || round == 0; round++ {
				var per [4]float64
				for k := range sides {
					s := (round + k) % len(sides)
					l := sides[s]
					start := time.Now()
					for range chunk {
						_, _ = l.Allow(ctx, keys)
					}
					per[s] = float64(time.Since(start).Nanoseconds()) / chunk
				}
				for s := range sides {
					deltas[s] = append(deltas[s], per[s]-per[0])
				}
				bare = append(bare, per[0])
			}
			slices.Sort(bare)
			b.ReportMetric(bare[len(bare)/2], "ns/op-bare")
			for s := 1; s < len(sides); s++ {
				slices.Sort(deltas[s])
				b.ReportMetric(deltas[s][len(deltas[s])/2], "Δns/op-"+names[s])
			}
		})
	}
}

package otelmetric_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/otelmetric"
)

// Two limiters wrapped by one Metrics, called in turn for each request (a
// local check, then a slower one), deciding under the same limit id: the
// durations sampled must come from both, about one call in n of each, or
// the histogram shows only one of them.
func TestDurationSamplingCoversEveryWrapper(t *testing.T) {
	// Each pattern is one request's calls: f for the fast limiter, s for
	// the slow one.
	for _, pattern := range []string{"fs", "ffs", "fsss", "ffffffffs"} {
		var clock atomic.Int64 // ns
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		now := func() time.Time { return t0.Add(time.Duration(clock.Load())) }
		reader := sdkmetric.NewManualReader()
		m, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
			otelmetric.WithClock(sluice.ClockFunc(now)), otelmetric.WithDurationSampling(16))
		if err != nil {
			t.Fatal(err)
		}
		d := sluice.Decision{Allowed: true, LimitID: "per-caller", Metric: sluice.MetricRequests}
		limiter := func(took time.Duration) sluice.Limiter {
			return sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) {
				clock.Add(int64(took))
				return d, nil
			})
		}
		fast := m.Wrap(limiter(2 * time.Microsecond))
		slow := m.Wrap(limiter(20 * time.Millisecond))
		ctx := context.Background()
		var calls [2]int // fast, slow
		for range 200_000 / len(pattern) {
			for _, c := range pattern {
				if c == 'f' {
					_, _ = fast.Allow(ctx, sluice.Keys{})
					calls[0]++
				} else {
					_, _ = slow.Allow(ctx, sluice.Keys{})
					calls[1]++
				}
			}
		}
		h := collect(t, reader)[otelmetric.DecisionDuration].Data.(metricdata.Histogram[float64])
		var timed [2]uint64
		for _, dp := range h.DataPoints {
			for i, c := range dp.BucketCounts {
				if i < len(dp.Bounds) && dp.Bounds[i] <= 1e-3 {
					timed[0] += c
				} else {
					timed[1] += c
				}
			}
		}
		for i, name := range []string{"fast", "slow"} {
			// About 1 in 16 of each limiter's calls; allow ±25 %.
			want := float64(calls[i]) / 16
			if got := float64(timed[i]); got < 0.75*want || got > 1.25*want {
				t.Errorf("pattern %s: %v of %d %s decisions timed, want about %.0f", pattern, got, calls[i], name, want)
			}
		}
	}
}

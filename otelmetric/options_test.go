package otelmetric_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/otelmetric"
)

// TestOptionsNotGiven walks every option with the values the option rule
// calls "not given" (zero, negative, nil) and an out-of-range one: none
// panics, New succeeds, and decisions are timed on the default clock
// (sluice's, the monotonic reading) one in DefaultDurationSampling.
func TestOptionsNotGiven(t *testing.T) {
	cases := map[string][]otelmetric.Option{
		"no option":                        nil,
		"nil Option":                       {nil},
		"WithClock(nil)":                   {otelmetric.WithClock(nil)},
		"WithDurationSampling(0)":          {otelmetric.WithDurationSampling(0)},
		"WithDurationSampling(-1)":         {otelmetric.WithDurationSampling(-1)},
		"WithDurationSampling(64), then 0": {otelmetric.WithDurationSampling(otelmetric.DefaultDurationSampling), otelmetric.WithDurationSampling(0)},
		"WithoutDurations, then 64":        {otelmetric.WithoutDurations(), otelmetric.WithDurationSampling(otelmetric.DefaultDurationSampling)},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			m, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), opts...)
			if err != nil {
				t.Fatal(err)
			}
			l := m.Wrap(sluice.Unlimited)
			const n = 64 * 1000
			for range n {
				_, _ = l.Allow(context.Background(), sluice.Keys{})
			}
			h := collect(t, reader)[otelmetric.DecisionDuration].Data.(metricdata.Histogram[float64])
			// 1000 expected at the default 1 in 64; 5 standard deviations
			// is ±160.
			dp := h.DataPoints[0]
			if dp.Count < 840 || dp.Count > 1160 {
				t.Errorf("%d of %d decisions timed, want about 1 in %d", dp.Count, n, otelmetric.DefaultDurationSampling)
			}
			// Timed on the default clock: durations are real, not negative.
			if dp.Sum < 0 {
				t.Errorf("durations sum to %v s", dp.Sum)
			}
		})
	}
}

// TestOptionsOutOfRange: a sampling above 2^30 is bounded, not overflowed,
// and WithoutDurations times nothing; New has no error to return.
func TestOptionsOutOfRange(t *testing.T) {
	for name, o := range map[string]otelmetric.Option{
		"WithDurationSampling(1<<40)": otelmetric.WithDurationSampling(1 << 40),
		"WithoutDurations()":          otelmetric.WithoutDurations(),
	} {
		reader := sdkmetric.NewManualReader()
		m, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), o)
		if err != nil {
			t.Fatal(err)
		}
		l := m.Wrap(sluice.Unlimited)
		for range 1000 {
			_, _ = l.Allow(context.Background(), sluice.Keys{})
		}
		if h, ok := collect(t, reader)[otelmetric.DecisionDuration]; ok {
			if c := h.Data.(metricdata.Histogram[float64]).DataPoints[0].Count; c > 1 {
				t.Errorf("%s: %d decisions timed of 1000", name, c)
			}
		}
	}
}

// A nil Limiter is a programming error, caught at Wrap by a panic that
// names it (not at the first decision).
func TestWrapPanicsOnNil(t *testing.T) {
	m, err := otelmetric.New(sdkmetric.NewMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if p, _ := recover().(string); p != "otelmetric: Wrap: the Limiter l is nil" {
			t.Errorf("panic %q, want one naming the Limiter l", p)
		}
	}()
	m.Wrap(nil)
}

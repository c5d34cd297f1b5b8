package otelmetric_test

import (
	"context"
	"fmt"
	"log"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/otelmetric"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// Wrap the limiter to count its decisions, and give the stack the metrics'
// error handler to count backend errors and follow the fallback state.
func Example() {
	reader := sdkmetric.NewManualReader() // in production: a Prometheus or OTLP reader
	m, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		log.Fatal(err)
	}
	st, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "per-caller", "dimensionKeys": ["caller"],
	  "entries": [{"dimensions": {"caller": "*"}, "requests": [{"rate": 2, "period": "minute"}]}]}]}`),
		stack.WithClock(limitertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))),
		stack.WithErrorHandler(m.ErrorHandler(func(err error) { log.Print(err) })))
	if err != nil {
		log.Fatal(err)
	}
	limiter := m.Wrap(st)
	for range 3 {
		_, _ = limiter.Allow(context.Background(), sluice.NewKeys("caller", "alice"))
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != otelmetric.Decisions {
				continue
			}
			for _, p := range mt.Data.(metricdata.Sum[int64]).DataPoints {
				decision, _ := p.Attributes.Value("sluice.ratelimit.decision")
				limit, _ := p.Attributes.Value("sluice.ratelimit.limit_key")
				fmt.Printf("%s %s %s: %d\n", mt.Name, decision.String(), limit.String(), p.Value)
			}
		}
	}
	// Unordered output:
	// sluice.decisions allowed per-caller: 2
	// sluice.decisions throttled per-caller: 1
}

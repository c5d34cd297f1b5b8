package envoyrls_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/otelmetric"
)

// Decisions are counted per rule through otelmetric: allowed and throttled
// per rule ID, shadow would-denials per shadow rule.
func TestMetricsPerRule(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := envoyrls.Load("testdata/edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, c, _ := newServer(t, cfg, envoyrls.WithMetrics(m))
	countOK(t, c, 8, "edge", desc("path", "/api/m")) // 7 allowed, 1 throttled
	countOK(t, c, 3, "edge", desc("beta", "b"))      // 1 allowed, 2 shadow would-denials (allowed)
	countOK(t, c, 2, "edge", desc("nolimit", "x"))   // no rule: not counted

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			sum, ok := mt.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, p := range sum.DataPoints {
				decision, _ := p.Attributes.Value("sluice.ratelimit.decision")
				limit, _ := p.Attributes.Value("sluice.ratelimit.limit_key")
				got[mt.Name+" "+decision.AsString()+" "+limit.AsString()] += p.Value
			}
		}
	}
	want := map[string]int64{
		"sluice.decisions allowed edge.path_/api/*":   7,
		"sluice.decisions throttled edge.path_/api/*": 1,
		"sluice.decisions allowed edge.beta":          3,
		"sluice.shadow.denials  edge.beta":            2,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
}

package envoyrls_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/otelmetric"
	"github.com/sluicehq/sluice/redis/redistest"
	"github.com/sluicehq/sluice/stack/limitertest"
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

const ruleStatsYAML = `
domain: stats
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: s
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: other
    rate_limit: {name: wide, unit: hour, requests_per_unit: 100}
`

// The per-rule statistics count hits (the request's hits_addend) as
// envoyproxy/ratelimit does, on a limit of 10 whose near-limit threshold
// is 8 (ratio 0.8) or 5 (ratio 0.5), in memory and on Redis:
//
//	hits  used before → after  decision
//	7     0 → 7                within 7
//	2     7 → 9                within 2, near 1 (the 9th)
//	3     9 → 12               over 2 (11th, 12th), near 1 (the 10th)
//	1     9 → 10               within 1, near 1 (nothing was taken by the denial)
//	1     10 → 11              over 1
//
// The shadow rule counts the same and its over hits again as shadow_mode;
// "wide" (limit 100, named) sees every hit within its limit, the denied
// requests' too.
func TestRuleStatistics(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		for _, tc := range []struct {
			ratio    float64
			wantNear int64
		}{{0, 3}, {math.NaN(), 3}, {0.8, 3}, {0.5, 6}} {
			t.Run(fmt.Sprintf("%s/ratio=%v", backend, tc.ratio), func(t *testing.T) {
				stats := &ruleStats{}
				clock := limitertest.NewClock(limitertest.Start)
				opts := []envoyrls.Option{envoyrls.WithClock(clock), envoyrls.WithRuleStats(stats.record), envoyrls.WithNearLimitRatio(tc.ratio)}
				if backend == "redis" {
					srv := redistest.Start(t)
					opts = append(opts, envoyrls.WithBackend(redisBackend(t, srv.Addr, clock, "stats")))
				}
				c := serve(t, envoyrls.New(load(t, "stats.yaml", ruleStatsYAML), opts...))
				for i, h := range []uint32{7, 2, 3, 1, 1} {
					wantOK := i != 2 && i != 4
					for _, key := range []string{"k", "s"} {
						resp := askReq(t, c, &rlsv3.RateLimitRequest{Domain: "stats", HitsAddend: h,
							Descriptors: []*ratelimitv3.RateLimitDescriptor{desc(key, "v"), desc("other", "o")}})
						if got := resp.OverallCode == ok; got != (wantOK || key == "s") {
							t.Fatalf("request %d (%d hits) on %s: OK %v", i, h, key, got)
						}
					}
				}
				want := map[string]map[string]int64{
					"total_hits":   {"stats.k": 14, "stats.s": 14, "wide": 28},
					"within_limit": {"stats.k": 10, "stats.s": 10, "wide": 28},
					"over_limit":   {"stats.k": 3, "stats.s": 3, "wide": 0},
					"near_limit":   {"stats.k": tc.wantNear, "stats.s": tc.wantNear, "wide": 0},
					"shadow_mode":  {"stats.k": 0, "stats.s": 3, "wide": 0},
				}
				got := stats.sums()
				for name, w := range want {
					for rule, v := range w {
						if got[name][rule] != v {
							t.Errorf("%s{%s} = %d, want %d", name, rule, got[name][rule], v)
						}
					}
					if len(got[name]) != len(w) {
						t.Errorf("%s: series %v, want %v", name, got[name], w)
					}
				}
			})
		}
	}
}

// ruleStats sums what WithRuleStats hands out, by counter and rule id.
type ruleStats struct {
	mu sync.Mutex
	n  map[string]map[string]int64
}

func (r *ruleStats) record(h envoyrls.RuleHits) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]map[string]int64{}
	}
	for name, v := range map[string]int64{"total_hits": h.Total, "over_limit": h.Over, "near_limit": h.Near, "within_limit": h.Within, "shadow_mode": h.Shadow} {
		if r.n[name] == nil {
			r.n[name] = map[string]int64{}
		}
		r.n[name][h.ID] += v
	}
}

func (r *ruleStats) sums() map[string]map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

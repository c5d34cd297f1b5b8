package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	gostats "github.com/lyft/gostats"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice/envoyrls"
)

// The per-rule counters, named as envoyproxy/ratelimit names them: in
// statsd ratelimit.service.rate_limit.<path>.<stat>, and, through its
// default statsd-to-Prometheus mapping, ratelimit_service_rate_limit_<stat>
// with the labels domain, key1 and key2.
var ruleStatNames = [5]string{"total_hits", "over_limit", "near_limit", "within_limit", "shadow_mode"}

const (
	statsdPrefix = "ratelimit.service.rate_limit."
	promPrefix   = "ratelimit_service_rate_limit_"
)

var ruleStatDescriptions = [5]string{
	"Hits (descriptor costs) a rate limit rule saw.",
	"Hits over a rate limit rule's limit.",
	"Hits past a rate limit rule's near-limit threshold (NEAR_LIMIT_RATIO), up to its limit.",
	"Hits of requests a rate limit rule allowed.",
	"Hits over the limit of a shadow-mode rule, let through.",
}

func values(h envoyrls.RuleHits) [5]int64 {
	return [5]int64{h.Total, h.Over, h.Near, h.Within, h.Shadow}
}

// ruleSinks fans one decision's rule statistics out to every exporter.
type ruleSinks []func(envoyrls.RuleHits)

func (s ruleSinks) record(h envoyrls.RuleHits) {
	for _, f := range s {
		f(h)
	}
}

// promRules counts the rule statistics as OpenTelemetry counters named
// for the Prometheus exporter, with envoyproxy/ratelimit's mapped labels.
// There is one attribute set per rule path of the configuration, so the
// series are bounded by it, as theirs are.
type promRules struct {
	counters [5]metric.Int64Counter
	attrs    sync.Map // path → metric.AddOption
}

func newPromRules(mp metric.MeterProvider) (*promRules, error) {
	meter := mp.Meter("github.com/sluicehq/sluice/envoyrls/cmd/sluice-rls")
	p := &promRules{}
	var err error
	for i, n := range ruleStatNames {
		var e error
		p.counters[i], e = meter.Int64Counter(promPrefix+n, metric.WithDescription(ruleStatDescriptions[i]))
		err = errors.Join(err, e)
	}
	return p, err
}

// pathLabels splits a stats path as their mapping's patterns do: the
// domain, then the first and second "."-separated parts after it (key2
// empty when there is none; deeper parts are dropped).
func pathLabels(path string) (domain, key1, key2 string) {
	parts := strings.SplitN(path, ".", 4)
	domain = parts[0]
	if len(parts) > 1 {
		key1 = parts[1]
	}
	if len(parts) > 2 {
		key2 = parts[2]
	}
	return domain, key1, key2
}

func (p *promRules) record(h envoyrls.RuleHits) {
	opt, ok := p.attrs.Load(h.Path)
	if !ok {
		d, k1, k2 := pathLabels(h.Path)
		opt, _ = p.attrs.LoadOrStore(h.Path, metric.WithAttributeSet(attribute.NewSet(
			attribute.String("domain", d), attribute.String("key1", k1), attribute.String("key2", k2))))
	}
	ctx := context.Background()
	for i, v := range values(h) {
		// Add(0) too: once a rule is seen, its five series exist.
		p.counters[i].Add(ctx, v, opt.(metric.AddOption))
	}
}

// statsdRules counts the rule statistics in a gostats store, flushed to
// statsd under their names.
type statsdRules struct {
	store    gostats.Store
	tags     map[string]string // EXTRA_TAGS
	counters sync.Map          // path → *[5]gostats.Counter
}

func newStatsdRules(store gostats.Store, tags map[string]string) *statsdRules {
	return &statsdRules{store: store, tags: tags}
}

func (s *statsdRules) record(h envoyrls.RuleHits) {
	c, ok := s.counters.Load(h.Path)
	if !ok {
		var cs [5]gostats.Counter
		for i, n := range ruleStatNames {
			cs[i] = s.store.NewCounterWithTags(statsdPrefix+h.Path+"."+n, s.tags)
		}
		c, _ = s.counters.LoadOrStore(h.Path, &cs)
	}
	for i, v := range values(h) {
		if v > 0 {
			c.(*[5]gostats.Counter)[i].Add(uint64(v))
		}
	}
}

// serverStats are the service's own counters under envoyproxy/ratelimit's
// names: requests and their response time per gRPC method
// (ratelimit_server.<method>.total_requests and .response_time in statsd;
// ratelimit_service_total_requests and
// ratelimit_service_response_time_seconds{grpc_method} in Prometheus), and
// configuration loads (ratelimit.service.config_load_success and _error).
type serverStats struct {
	requests          metric.Int64Counter
	respTime          metric.Float64Histogram
	loadOK, loadError metric.Int64Counter
	method            metric.MeasurementOption

	statsd                gostats.Store
	sdRequests            gostats.Counter
	sdRespTime            gostats.Timer
	sdLoadOK, sdLoadError gostats.Counter
}

const grpcMethod = "ShouldRateLimit"

func newServerStats(mp metric.MeterProvider, store gostats.Store, tags map[string]string) (*serverStats, error) {
	s := &serverStats{method: metric.WithAttributeSet(attribute.NewSet(attribute.String("grpc_method", grpcMethod)))}
	var err error
	if mp != nil {
		meter := mp.Meter("github.com/sluicehq/sluice/envoyrls/cmd/sluice-rls")
		var e error
		s.requests, e = meter.Int64Counter("ratelimit_service_total_requests", metric.WithDescription("Rate limit requests answered, by gRPC method (/json counts as ShouldRateLimit)."))
		err = errors.Join(err, e)
		s.respTime, e = meter.Float64Histogram("ratelimit_service_response_time_seconds", metric.WithDescription("Time to answer a rate limit request, in seconds."),
			metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1))
		err = errors.Join(err, e)
		s.loadOK, e = meter.Int64Counter("ratelimit_service_config_load_success", metric.WithDescription("Configurations loaded."))
		err = errors.Join(err, e)
		s.loadError, e = meter.Int64Counter("ratelimit_service_config_load_error", metric.WithDescription("Configurations refused; the last good one stays."))
		err = errors.Join(err, e)
	}
	if store != nil {
		s.statsd = store
		s.sdRequests = store.NewCounterWithTags("ratelimit_server."+grpcMethod+".total_requests", tags)
		s.sdRespTime = store.NewTimerWithTags("ratelimit_server."+grpcMethod+".response_time", tags)
		s.sdLoadOK = store.NewCounterWithTags("ratelimit.service.config_load_success", tags)
		s.sdLoadError = store.NewCounterWithTags("ratelimit.service.config_load_error", tags)
	}
	return s, err
}

// request counts one answered request that took d.
func (s *serverStats) request(d time.Duration) {
	if s == nil {
		return
	}
	if s.requests != nil {
		ctx := context.Background()
		s.requests.Add(ctx, 1, s.method.(metric.AddOption))
		s.respTime.Record(ctx, d.Seconds(), s.method.(metric.RecordOption))
	}
	if s.statsd != nil {
		s.sdRequests.Inc()
		s.sdRespTime.AddDuration(d)
	}
}

// load counts a configuration load, applied or refused.
func (s *serverStats) load(ok bool) {
	if s == nil {
		return
	}
	if s.loadOK != nil {
		c := s.loadOK
		if !ok {
			c = s.loadError
		}
		c.Add(context.Background(), 1)
	}
	if s.statsd != nil {
		if ok {
			s.sdLoadOK.Inc()
		} else {
			s.sdLoadError.Inc()
		}
	}
}

// denialCacheGauges reports the near-cache of denials to statsd at each
// flush under the names envoyproxy/ratelimit gives its local cache's
// counts (ratelimit.localcache.hitCount and evacuateCount: gauges holding
// totals since the start), so that dashboards built on theirs keep working.
type denialCacheGauges struct {
	hits, evictions gostats.Gauge
	read            func() (hits, evictions int64)
}

func newDenialCacheGauges(store gostats.Store, tags map[string]string, read func() (int64, int64)) denialCacheGauges {
	return denialCacheGauges{
		hits:      store.NewGaugeWithTags("ratelimit.localcache.hitCount", tags),
		evictions: store.NewGaugeWithTags("ratelimit.localcache.evacuateCount", tags),
		read:      read,
	}
}

// GenerateStats implements gostats.StatGenerator.
func (g denialCacheGauges) GenerateStats() {
	h, e := g.read()
	g.hits.Set(uint64(h))
	g.evictions.Set(uint64(e))
}

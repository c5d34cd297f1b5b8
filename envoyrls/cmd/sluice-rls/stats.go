package main

import (
	"context"
	"errors"
	"strings"
	"sync"

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

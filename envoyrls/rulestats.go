package envoyrls

// RuleHits is what one decision adds to a rule's statistics, in hits (the
// descriptor's cost, its hits_addend), with envoyproxy/ratelimit's meanings:
// Total every hit the rule saw; Within the hits of a decision the rule
// allowed; Over the hits beyond its limit (a request that crosses the limit
// counts only the part beyond it); Near the hits past the near-limit
// threshold (WithNearLimitRatio) and up to the limit, in allowed and denied
// decisions alike; Shadow, for a shadow-mode rule, the hits Over counts,
// which it let through.
type RuleHits struct {
	// ID is the rule's ID (Rule.ID): its name, else its path.
	ID string
	// Path is the stats key envoyproxy/ratelimit names the rule's counters
	// by (Rule.Path: the domain and the key or key_value of each level,
	// joined by "."; for a descriptor's limit override, the domain and its
	// keys). Its counters are ratelimit.service.rate_limit.<Path>.total_hits
	// and so on. There is one Path per rule of the configuration, never one
	// per descriptor value, so series keyed by it stay bounded.
	Path string
	// The counts, never negative.
	Total, Over, Near, Within, Shadow int64
}

// WithRuleStats calls f, on the deciding goroutine, with what every
// descriptor's decision adds to its rule's statistics (descriptors with
// is_negative_hits add nothing). f must be safe for concurrent use and
// quick: it runs on every decision. nil means the default: no statistics.
// The sluice-rls command exports them under envoyproxy/ratelimit's names,
// to Prometheus and statsd.
func WithRuleStats(f func(RuleHits)) Option {
	return optionFunc(func(o *options) { o.ruleStats = f })
}

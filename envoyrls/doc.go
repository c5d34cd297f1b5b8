// Package envoyrls is Envoy's rate limit service, decided by sluice.
//
// It serves envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, the
// protocol envoy.filters.http.ratelimit, Istio and Envoy Gateway speak,
// deciding with sluice's exact token buckets over any stack.Backend: in
// memory by default, the Redis backend (or Redis Cluster) for a fleet.
//
// A Server is a value the caller registers on its own grpc.Server:
//
//	rls := envoyrls.New(cfg)
//	rlsv3.RegisterRateLimitServiceServer(grpcServer, rls)
//
// # Configuration
//
// Load reads envoyproxy/ratelimit's YAML, unchanged: a file or a directory
// of them, one domain per file, descriptors nested as a tree of key and
// value, with every key its loader accepts (its own example and
// integration files load unchanged: testdata/envoyproxy-ratelimit). At
// each level of a request's descriptor the walk takes the exact key and
// value, else a value with "*" wildcards, trailing or anywhere
// ("/api/*", "/api/*/items/*", in file order), else the key alone (a
// default); the rule of the node it ends on applies only when it used every
// entry of the descriptor; a node without rate_limit sets no limit;
// unlimited never limits; a named rule that another matched rule replaces
// is dropped. requests_per_unit is both the burst and the refill per unit
// (times unit_multiplier). Every problem of every file is reported at once,
// each with its file, line and path ("edge.yaml:7:
// descriptors[0].rate_limit.unit: invalid unit ..."). A file ending in
// .json is sluice's gateway JSON (stack.Parse): its limits apply in every
// domain to descriptors whose keys are the limit's dimension keys, in order.
//
// Descriptor keys beyond the rule: share_threshold on a wildcard makes
// every value it matches share one bucket (otherwise each value has its
// own); quota_mode makes the rule a quota (see Decisions; the global mode
// is Server.SetQuotaMode); metadata is given back in the response's
// dynamic metadata ("metadata") for the rules whose descriptors are not
// over; detailed_metric and value_to_metric are accepted (and must be
// booleans) but have no effect: metrics stay per rule (see Metrics). A key this package
// does not know, or a known key of the wrong type, is refused with its
// file, line and path.
//
// # Decisions
//
// All descriptors of a request are decided in one Backend.Take, ANDed and
// all or nothing: a request one descriptor denies consumes nothing in the
// others, and with Redis it is one round trip whatever the number of
// descriptors. A descriptor's bucket is keyed by its rule's place in the
// domain's tree and the descriptor's keys and values, so each distinct value
// under a default has its own bucket, and a reload keeps the state of every
// rule that keeps its place, whatever its rate becomes.
//
//   - Cost: the request's hits_addend (0 means 1), overridden by the
//     descriptor's own hits_addend. An explicit 0 is a check: it consumes
//     nothing and is OVER_LIMIT when the bucket has no whole unit left
//     (empty, in debt, or rate 0), with duration_until_reset the wait for
//     one; the rule of package bucket and of stack for a cost of 0. A
//     cost above requests_per_unit is over, whatever the wait.
//   - Debits: a descriptor's own hits_addend above 0 is what Envoy's
//     token-quota pattern sends after the call (the tokens used, checked
//     before with 0). When the request is denied, those descriptors are
//     charged anyway, in full, into debt if need be (Backend.Adjust, a
//     second call only then), so that the next check is over until the
//     bucket has refilled; envoyproxy/ratelimit counts every hit too. The
//     request's hits_addend (and the default 1) stays all or nothing.
//   - is_negative_hits gives the cost back (Backend.Adjust with a negative
//     cost, never above the burst, bounded as if the units were taken at
//     the request's instant: the protocol does not say when), before the
//     rest of the request is taken, in memory and on Redis alike. Like
//     any give-back without its take, it trusts the client that the hits were
//     counted: a give-back of hits never taken raises a bucket, up to
//     full.
//   - A descriptor's limit override (requests_per_unit, unit,
//     unit_multiplier) replaces the configured rule, as in
//     envoyproxy/ratelimit, in a domain the configuration knows; it is never
//     in shadow mode. Each distinct override of a descriptor has its own
//     bucket, so two routes asking different limits do not share one.
//   - Statuses: OVER_LIMIT for every descriptor whose bucket could not give
//     its cost; current_limit names the rule (its name, else its path such
//     as "edge.client_partner"); limit_remaining is what the bucket holds
//     after the request (before it, when the request was denied: the
//     backend reports it in the decision's one call, no second call);
//     duration_until_reset is, when over, the wait after which the request
//     would pass, and otherwise the time until the bucket is full again,
//     both rounded up to the microsecond, never early.
//   - response_headers_to_add carries the IETF RateLimit-Policy and
//     RateLimit fields with one item per descriptor that limits.
//   - dynamic_metadata (in the namespace Envoy gives it,
//     envoy.filters.http.ratelimit by default) has these keys:
//     "denied_by", the ID (name, or path) of the rule that denied;
//     "descriptor_index", the index of its descriptor; "retry_after_ms",
//     the wait in milliseconds, rounded up, after which the same request
//     would pass, or instead "permanent": true when no wait helps (the rule
//     has requests_per_unit 0, or the request more hits than its limit);
//     "shadow_denied", the IDs of shadow-mode rules that would have denied;
//     "shadow_mode": true when the global shadow mode turned a denial into
//     OK; "backend_error", the error a fail-open or fail-closed answer
//     followed; "metadata", the merged metadata of the rules whose
//     descriptors are not over.
//   - quota_mode rules: a quota over its limit takes nothing and reports
//     OVER_LIMIT in its descriptor's status, but the request is denied by
//     quotas only when every quota descriptor of it is over (as in
//     envoyproxy/ratelimit's service); then what the others took is given
//     back (a second backend call, only then), so that the denied request
//     consumes nothing.
//   - shadow_mode rules never deny; WithShadowMode or SetShadowMode make
//     the overall answer OK whatever the rules decide.
//   - When the backend fails: OK by default (fail-open), OVER_LIMIT on every
//     limited descriptor with WithFailClosed; the error goes to the error
//     handler and into the metadata ("backend_error").
//   - Bad requests get InvalidArgument saying what and where, and consume
//     nothing: an empty domain, no descriptors, a descriptor without
//     entries, an empty key, more than 64 descriptors or 16 entries in
//     one, a key, value or domain over 1024 bytes, a hits_addend above
//     2^40, an override without a known unit, a unit_multiplier of 0, an
//     override period (unit × unit_multiplier) above 400 days. An unknown
//     domain is OK with no limit, as in envoyproxy/ratelimit.
//   - A configuration is bounded too, so that files cannot make the server
//     use unbounded memory: at most 1000 files in a directory, 8 MiB a
//     file, descriptors nested 16 levels deep, a rule's period 400 days;
//     Parse and Load report what is beyond them with its file and line.
//
// # Differences from envoyproxy/ratelimit
//
// Its files load unchanged and answer as its integration tests expect,
// except where token buckets and all-or-nothing decisions mean otherwise,
// on purpose:
//
//   - requests_per_unit is a burst refilled smoothly, not a fixed window:
//     no window edge lets twice the limit through, and duration_until_reset
//     is the time until the bucket is full again (while allowed) or until
//     the request would pass (when over), never the end of a window.
//   - A denied request consumes nothing in any descriptor (it counts every
//     hit), so a client that keeps retrying is not kept out longer; the
//     exception is a debit (a descriptor's own hits_addend), charged as its
//     tokens were used.
//   - hits_addend 0 is over as soon as no whole unit is left (an empty
//     bucket), not only once the count has passed the limit.
//   - Metrics are per rule (its name or path), never per descriptor value,
//     whatever detailed_metric and value_to_metric say, so that a client
//     cannot grow their series.
//   - Duplicate domains across files are refused (its MERGE_DOMAIN_CONFIG
//     is not offered).
//
// # Metrics
//
// WithMetrics records, through package otelmetric, every descriptor's
// decision per rule (sluice.decisions, sluice.shadow.denials).
// WithRuleStats hands out the per-rule statistics envoyproxy/ratelimit
// exports, with the same meanings and counted in hits (the descriptor's
// cost, its hits_addend): total_hits, over_limit, near_limit, within_limit
// and shadow_mode (RuleHits), each with the rule's ID and envoyproxy's stats
// key, its path ("edge.client_partner"); the sluice-rls command
// (envoyrls/cmd/sluice-rls) exports them under envoyproxy/ratelimit's names.
// A request crossing the limit counts the part
// beyond it as over and the part between the near-limit threshold
// (WithNearLimitRatio, 0.8 of the limit by default) and the limit as near;
// a shadow-mode rule counts its over hits again as shadow_mode. Counts are
// in units used (the burst minus what the bucket holds), so a bucket that
// refilled counts as less used. A request that another descriptor denies
// consumes nothing here, but its hits are counted as within the limit of
// the rules that would have allowed it, as envoyproxy/ratelimit counts every
// hit. A give-back (is_negative_hits) and a check (hits_addend 0) add
// nothing. There is one path per rule, never one per value, so series keyed
// by it are bounded by the configuration.
//
// # Memory
//
// In memory, the buckets live in package bucket's keyed tables (each take
// locks one shard of its table), one per distinct rate, under one bucket.Budget (WithMaxBuckets): a bucket costs
// the same whatever the length of the values that select it, refilled
// buckets are reclaimed, and when the bound is reached a request that needs
// a new bucket is denied, never admitted beyond a limit.
package envoyrls

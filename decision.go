package sluice

import (
	"log/slog"
	"time"

	slerrors "github.com/sluicehq/sluice/errors"
)

// Metrics a limit can count. They are the gateway's metric names.
const (
	// MetricRequests counts requests: one unit per request.
	MetricRequests = "requests"
	// MetricTokens counts LLM tokens (input + output): a request costs many units.
	MetricTokens = "tokens"
	// MetricConnections counts concurrent in-flight requests.
	MetricConnections = "connections"
)

// Decision is the outcome of one Allow call.
//
// A denial is a normal outcome, not an error: Allowed is false and the fields
// below say which limit denied and when to retry. Err turns a denial into the
// typed *errors.ThrottledError.
type Decision struct {
	// Allowed reports whether the request may proceed.
	Allowed bool
	// RetryAfter is, on a denial, how long to wait before a retry of the same
	// request can succeed (if nothing else consumes in between). It is zero
	// when Allowed, and zero with Permanent set when no wait helps.
	RetryAfter time.Duration
	// Permanent is set on a denial that no wait can cure: the request's cost
	// exceeds the limit's burst, or the limit's rate is zero.
	Permanent bool
	// OverBurst is set, with Permanent, when the denial is because the
	// request's cost is larger than the limit's burst capacity.
	OverBurst bool
	// Capacity is set on a denial because the limiter holds as many
	// buckets as it is allowed (stack.WithMaxBuckets) and none could be
	// freed for the request's new one; no limit was exceeded. RetryAfter
	// says when buckets will have refilled and can be reclaimed.
	Capacity bool

	// LimitID is the id of the limit that denied. When Allowed, it is the id
	// of the limit whose bucket Limit and Remaining describe (the most
	// constraining one; the RateLimit-Policy name), "" when none applied.
	LimitID string
	// LimitKey is the denying limit and the values that selected its bucket:
	// "<rateLimitId>/<key>=<value>", several dimensions joined by ",", with
	// the separators inside names and values percent-encoded (the format
	// is stack's, see its package documentation, "Names of limits and
	// buckets").
	LimitKey string
	// Metric is the denying limit's metric (MetricRequests, …).
	Metric string
	// MatchedEntry holds the configured values of the entry that matched
	// (including "*"), in the limit's dimension-key order. Callers must not
	// modify it: it may be shared with the configuration.
	MatchedEntry []string
	// ResolvedValues holds the request's values for the denying limit's
	// dimension keys, in dimension-key order.
	ResolvedValues []string

	// Limit is the burst (quota) of the most constraining bucket that was
	// evaluated, and Remaining the whole units left in it after this decision;
	// Window is the time that bucket needs to refill from empty. They feed the
	// RateLimit and RateLimit-Policy response headers. All three are zero when
	// no limit applied.
	Limit     int64
	Remaining int64
	Window    time.Duration

	// Shadowed lists the limit keys (the form of LimitKey) of shadow-mode
	// limits that would have denied this request had they been enforced.
	// It is nil when none would.
	Shadowed []string

	// Evaluated lists every bucket checked for this request as
	// "<rateLimitId>:<metric>:<value>[,<value>…]" ("per-caller:requests:alice",
	// the gateway's form), each part escaped as in LimitKey (see package
	// stack, "Names of limits and buckets"), in the order they were
	// evaluated (stricter first), once each.
	//
	// It is nil unless the context given to Allow or Reserve came from
	// WithEvaluated: building it allocates, so engines skip it otherwise.
	// otelattr.Wrap asks for it when the request's span is recording; code
	// that calls an otelattr Schema's Record itself must pass such a context.
	Evaluated []string
}

// Err returns nil when the decision allowed the request, and otherwise a
// *errors.ThrottledError describing the denial. The error matches
// errors.ErrThrottled with errors.Is; a permanent denial caused by a cost above
// the burst also matches errors.ErrCostExceedsBurst.
func (d Decision) Err() error {
	if d.Allowed {
		return nil
	}
	te := &slerrors.ThrottledError{
		LimitID:        d.LimitID,
		LimitKey:       d.LimitKey,
		Metric:         d.Metric,
		RetryAfter:     d.RetryAfter,
		MatchedEntry:   d.MatchedEntry,
		ResolvedValues: d.ResolvedValues,
		Permanent:      d.Permanent,
		Limit:          d.Limit,
		Remaining:      d.Remaining,
		Window:         d.Window,
	}
	if d.OverBurst {
		te.Cause = slerrors.ErrCostExceedsBurst
	}
	return te
}

// LogValue implements slog.LogValuer, so that a Decision logs as a compact
// group: "allowed" always; then, each only when set, "limit" (LimitKey, or
// LimitID when there is no key), "metric", "retry_after", "permanent" and
// "shadowed" (the shadow limits that would have denied). MatchedEntry,
// ResolvedValues and the bucket figures are left out: they repeat the limit
// key or belong in headers, not logs.
func (d Decision) LogValue() slog.Value {
	attrs := make([]slog.Attr, 1, 6)
	attrs[0] = slog.Bool("allowed", d.Allowed)
	if d.LimitKey != "" {
		attrs = append(attrs, slog.String("limit", d.LimitKey))
	} else if d.LimitID != "" {
		attrs = append(attrs, slog.String("limit", d.LimitID))
	}
	if d.Metric != "" {
		attrs = append(attrs, slog.String("metric", d.Metric))
	}
	if d.RetryAfter > 0 {
		attrs = append(attrs, slog.Duration("retry_after", d.RetryAfter))
	}
	if d.Permanent {
		attrs = append(attrs, slog.Bool("permanent", true))
	}
	if len(d.Shadowed) > 0 {
		attrs = append(attrs, slog.Any("shadowed", d.Shadowed))
	}
	return slog.GroupValue(attrs...)
}

// Package errors holds the error a throttled request produces, and the
// sentinels callers match with the standard library's errors.Is and errors.As.
//
// The package shadows the standard library's errors; import it under another
// name where both are needed:
//
//	import slerrors "github.com/sluicehq/sluice/errors"
//
// A *ThrottledError carries everything a protocol response needs: the limit
// key, the metric and the RetryAfter delay (or that no wait helps:
// Permanent). Response renders it, for HTTP, JSON-RPC/MCP, OpenAI,
// Anthropic and AWS clients, to an http.ResponseWriter or to bytes; a
// denied sluice.Decision in one call:
//
//	_ = slerrors.Response{Format: slerrors.Anthropic}.Write(w, d.Err())
package errors

import (
	"errors"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/ratefield"
)

// ErrThrottled matches, with errors.Is, every *ThrottledError: a request that
// was denied by a rate limit and may succeed after its RetryAfter.
var ErrThrottled = errors.New("sluice: rate limit exceeded")

// ErrCostExceedsBurst matches a request whose cost is larger than a limit's
// burst capacity. Such a request can never be admitted, so no RetryAfter is
// given; retrying it is pointless.
var ErrCostExceedsBurst = errors.New("sluice: cost exceeds the burst capacity of the limit")

// ThrottledError describes a denied request. It is what
// sluice.Decision.Err returns on a denial.
//
// Every ThrottledError says when a retry can succeed (RetryAfter; zero
// means at once, which the renderings round up to one second) or that no
// wait helps (Permanent: retrying cannot succeed, and the renderings say
// so instead of giving a delay).
type ThrottledError struct {
	// LimitID is the id of the rate limit that denied (e.g. "per-target-rps").
	LimitID string
	// LimitKey names the limit and the values that selected its bucket, in
	// the gateway's form "<rateLimitId>/<key>=<value>" (several dimensions are
	// joined with "," : "rl/targetName=a,toolName=b"; separators inside
	// names and values are percent-encoded, see Decision.LimitKey).
	LimitKey string
	// Metric is the exhausted metric: "requests", "tokens" or "connections".
	Metric string
	// RetryAfter is how long the caller should wait before retrying. A retry
	// after this delay succeeds if nothing else consumed in between.
	RetryAfter time.Duration
	// MatchedEntry holds the configured dimension values of the entry that
	// matched, "*" included, in dimension-key order.
	MatchedEntry []string
	// ResolvedValues holds the request's values for the limit's dimension
	// keys, in dimension-key order.
	ResolvedValues []string
	// Permanent is set when the request can never be admitted by this limit
	// (its cost exceeds the burst, or the limit's rate is zero).
	// Such an error also matches ErrCostExceedsBurst when the cost is the cause.
	Permanent bool
	// Cause is an optional underlying reason (ErrCostExceedsBurst), returned
	// by Unwrap.
	Cause error

	// Limit is the quota (burst) of the denying bucket, Remaining the whole
	// units left in it, and Window the time it needs to refill from empty.
	// They feed the RateLimit and RateLimit-Policy response headers; a zero
	// Limit means "unknown" and those headers are left out.
	Limit     int64
	Remaining int64
	Window    time.Duration
}

// Error reports the limit key, metric and retry delay.
func (e *ThrottledError) Error() string {
	var b strings.Builder
	b.WriteString("sluice: rate limit exceeded")
	if e.LimitKey != "" {
		b.WriteString(" for ")
		b.WriteString(e.LimitKey)
	} else if e.LimitID != "" {
		b.WriteString(" for ")
		b.WriteString(e.LimitID)
	}
	if e.Metric != "" {
		b.WriteString(" (")
		b.WriteString(e.Metric)
		b.WriteString(")")
	}
	if e.Permanent {
		if e.Cause != nil {
			b.WriteString(": ")
			b.WriteString(e.Cause.Error())
		} else {
			b.WriteString(": can never be admitted")
		}
	} else {
		b.WriteString(", retry after ")
		b.WriteString(e.RetryAfter.String())
	}
	return b.String()
}

// Is reports whether target is ErrThrottled.
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// Unwrap returns the underlying cause, if any.
func (e *ThrottledError) Unwrap() error { return e.Cause }

// RetryAfterSeconds returns RetryAfter as whole seconds rounded up, at least
// 1: the value protocol bodies and the Retry-After header carry. A client that
// waits that many seconds waits at least RetryAfter, so it is never early.
func (e *ThrottledError) RetryAfterSeconds() int64 {
	return ratefield.CeilSeconds(e.RetryAfter)
}

// AsThrottled returns the *ThrottledError in err's chain, if there is one.
func AsThrottled(err error) (*ThrottledError, bool) {
	var te *ThrottledError
	if errors.As(err, &te) {
		return te, true
	}
	return nil, false
}

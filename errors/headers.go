package errors

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/ratefield"
)

// Quota describes one rate-limit policy for the IETF RateLimit and
// RateLimit-Policy response fields (draft-ietf-httpapi-ratelimit-headers-11):
//
//	RateLimit-Policy: "per-caller";q=100;w=60
//	RateLimit: "per-caller";r=0;t=20
type Quota struct {
	// Policy names the policy; "" is written as "default". Characters that
	// a Structured Field string cannot hold are replaced by '_'.
	Policy string
	// Limit is the quota q: the units the policy allows per window (the
	// bucket's burst). A Limit ≤ 0 means unknown: no fields are written.
	Limit int64
	// Remaining is r, the units left now (negative is written as 0).
	Remaining int64
	// Window is w, the window the quota refers to: the time an empty bucket
	// needs to refill. Written in whole seconds rounded up, at least 1.
	Window time.Duration
	// Reset is t, the time until more quota is available: the retry delay on
	// a denial, the time to refill to Limit otherwise. Written in whole
	// seconds rounded up.
	Reset time.Duration
}

// NewQuota returns the Quota of a token bucket of burst limit that holds
// remaining units and refills from empty in window: its Reset is the time
// to refill to limit, window·(limit−remaining)/limit.
func NewQuota(policy string, limit, remaining int64, window time.Duration) Quota {
	return Quota(ratefield.NewQuota(policy, limit, remaining, window))
}

// quota returns the RateLimit quota of the denying bucket: Limit, Remaining
// and Window from e, Reset the retry delay (at least one second, as in
// Retry-After).
func (e *ThrottledError) quota() Quota {
	e = orZero(e)
	reset := e.RetryAfter
	if reset <= 0 {
		reset = time.Second
	}
	return Quota{Policy: e.LimitID, Limit: e.Limit, Remaining: e.Remaining, Window: e.Window, Reset: reset}
}

// AppendPolicy appends the RateLimit-Policy item of q: "name";q=100;w=60.
func (q Quota) AppendPolicy(dst []byte) []byte { return ratefield.Quota(q).AppendPolicy(dst) }

// AppendRateLimit appends the RateLimit item of q: "name";r=0;t=20.
func (q Quota) AppendRateLimit(dst []byte) []byte { return ratefield.Quota(q).AppendRateLimit(dst) }

// SetRateLimitHeaders sets the RateLimit-Policy and RateLimit fields of q on
// h, as h.Set would. It does nothing when q.Limit ≤ 0 (no limit applied).
// It allocates once for the usual policy names: the two field values and
// their one-element value slices share one allocation (each slice capped
// at its element, so a later Add to one field never writes into the
// other).
func SetRateLimitHeaders(h http.Header, q Quota) { ratefield.Set(h, ratefield.Quota(q)) }

// SetHeaders sets on h the headers a throttled response carries, the ones
// HTTP clients and the OpenAI, Anthropic and AWS SDKs read to back off:
//
//   - Retry-After: whole seconds, rounded up, at least 1 (RFC 9110);
//   - retry-after-ms: milliseconds, rounded up, at least 1 (read first by the
//     OpenAI and Anthropic SDKs);
//   - RateLimit-Policy and RateLimit (draft-11), when e.Limit is known.
//
// A permanent denial (no wait helps) gets x-should-retry: false instead of
// the two retry delays, which tells the OpenAI and Anthropic SDKs not to
// retry, and only RateLimit-Policy: a RateLimit field would announce a reset
// time after which the request still fails.
func SetHeaders(h http.Header, e *ThrottledError) {
	e = orZero(e)
	if e.Permanent {
		h.Del("Retry-After")
		h.Del("retry-after-ms")
		h.Set("x-should-retry", "false")
		if q := e.quota(); q.Limit > 0 {
			var buf [96]byte
			h.Set("RateLimit-Policy", string(q.AppendPolicy(buf[:0])))
		}
		h.Del("RateLimit")
		return
	}
	var buf [24]byte
	h.Set("Retry-After", string(strconv.AppendInt(buf[:0], e.RetryAfterSeconds(), 10)))
	h.Set("retry-after-ms", string(strconv.AppendInt(buf[:0], ceilMillis(e.RetryAfter), 10)))
	SetRateLimitHeaders(h, e.quota())
}

// ceilMillis rounds d up to whole milliseconds, at least 1, at most 2^53-1.
func ceilMillis(d time.Duration) int64 {
	if d <= 0 {
		return 1
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return min(ms, 1<<53-1)
}

// Package ratefield renders the IETF RateLimit and RateLimit-Policy
// response fields (draft-ietf-httpapi-ratelimit-headers-11) for package
// errors, which documents them (errors.Quota, errors.SetRateLimitHeaders).
// httplimit keeps its own cache of rendered values (its fieldCache).
package ratefield

import (
	"net/http"
	"strconv"
	"time"
	"unsafe"
)

// CeilSeconds rounds d up to whole seconds, with a minimum of 1 and a maximum
// that fits any JSON number a client may parse (2^53 - 1). It never panics.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 1
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	const maxSafe = 1<<53 - 1
	if s > maxSafe {
		s = maxSafe
	}
	return s
}

// Quota is errors.Quota (the two convert into each other: their fields are
// the same), which documents it: one rate-limit policy for the IETF
// RateLimit and RateLimit-Policy response fields
// (draft-ietf-httpapi-ratelimit-headers-11):
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

// NewQuota is errors.NewQuota: the Quota of a token bucket of burst limit that holds
// remaining units and refills from empty in window: its Reset is the time
// to refill to limit, window·(limit−remaining)/limit.
func NewQuota(policy string, limit, remaining int64, window time.Duration) Quota {
	q := Quota{Policy: policy, Limit: limit, Remaining: remaining, Window: window}
	if limit > 0 && window > 0 && remaining < limit {
		missing := limit - max(remaining, 0)
		q.Reset = time.Duration(float64(window) * (float64(missing) / float64(limit)))
		if q.Reset < 0 { // float overflow on absurd windows
			q.Reset = window
		}
	}
	return q
}

// sfMaxInt is the largest Structured Field integer (15 decimal digits).
const sfMaxInt = 999_999_999_999_999

func clampSF(n int64) int64 { return min(max(n, 0), sfMaxInt) }

// ceilSecs rounds d up to whole seconds, 0 for d ≤ 0.
func ceilSecs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return CeilSeconds(d)
}

func appendPolicyName(dst []byte, name string) []byte {
	if name == "" {
		name = "default"
	}
	dst = append(dst, '"')
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20 || c > 0x7e:
			dst = append(dst, '_')
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// AppendPolicy appends the RateLimit-Policy item of q: "name";q=100;w=60.
func (q Quota) AppendPolicy(dst []byte) []byte {
	dst = appendPolicyName(dst, q.Policy)
	dst = append(dst, ";q="...)
	dst = strconv.AppendInt(dst, clampSF(q.Limit), 10)
	dst = append(dst, ";w="...)
	return strconv.AppendInt(dst, clampSF(CeilSeconds(q.Window)), 10)
}

// AppendRateLimit appends the RateLimit item of q: "name";r=0;t=20.
func (q Quota) AppendRateLimit(dst []byte) []byte {
	dst = appendPolicyName(dst, q.Policy)
	dst = append(dst, ";r="...)
	dst = strconv.AppendInt(dst, clampSF(q.Remaining), 10)
	dst = append(dst, ";t="...)
	return strconv.AppendInt(dst, clampSF(ceilSecs(q.Reset)), 10)
}

// The canonical forms (textproto.CanonicalMIMEHeaderKey) of the RateLimit
// fields: setting them directly spares Header.Set a canonicalization that
// allocates on every call, since "RateLimit" is not canonical.
const (
	fieldPolicy    = "Ratelimit-Policy"
	fieldRateLimit = "Ratelimit"
)

// Set sets the RateLimit-Policy and RateLimit fields of q on h, as h.Set
// would (errors.SetRateLimitHeaders). It does nothing when q.Limit ≤ 0 (no limit applied).
//
// It allocates once for the usual policy names (the two values rendered in
// up to 112 bytes; more for longer ones): the two field values and their
// one-element value slices share one allocation (each slice capped at its
// element, so a later Add to one field never writes into the other).
func Set(h http.Header, q Quota) {
	if q.Limit <= 0 {
		return
	}
	var buf [128]byte
	b := q.AppendPolicy(buf[:0])
	n := len(b)
	setRateLimitFields(h, q.AppendRateLimit(b), n)
}

// fieldValues32, fieldValues48 and fieldValues112 hold the values of one
// response's RateLimit fields in one allocation: the two value strings,
// which the two header slices point into, and the bytes of the strings.
// The bytes are written once, before the strings are made, and never again.
// Each is a malloc size class (64, 80 and 144 bytes): the smallest that fits
// is taken, since a response's garbage is what brings the next collection.
type fieldValues32 struct {
	vals [2]string
	buf  [32]byte
}

type fieldValues48 struct {
	vals [2]string
	buf  [48]byte
}

type fieldValues112 struct {
	vals [2]string
	buf  [112]byte
}

// newFieldValues returns the value strings of a response's RateLimit fields
// and n bytes for their text: one allocation up to 112 bytes, two beyond.
func newFieldValues(n int) (*[2]string, []byte) {
	switch {
	case n <= len(fieldValues32{}.buf):
		v := new(fieldValues32)
		return &v.vals, v.buf[:n]
	case n <= len(fieldValues48{}.buf):
		v := new(fieldValues48)
		return &v.vals, v.buf[:n]
	case n <= len(fieldValues112{}.buf):
		v := new(fieldValues112)
		return &v.vals, v.buf[:n]
	default: // a long policy name
		return new([2]string), make([]byte, n)
	}
}

// setFields sets both fields to vals, each field its own one-element slice
// capped at its element.
func setFields(h http.Header, vals *[2]string) {
	h[fieldPolicy] = vals[0:1:1]
	h[fieldRateLimit] = vals[1:2:2]
}

// setRateLimitFields sets both fields: the RateLimit-Policy value is
// b[:split], and the RateLimit value is b[split:].
func setRateLimitFields(h http.Header, b []byte, split int) {
	vals, dst := newFieldValues(len(b))
	copy(dst, b)
	s := unsafe.String(unsafe.SliceData(dst), len(dst)) // dst is not written again
	vals[0], vals[1] = s[:split], s[split:]
	setFields(h, vals)
}

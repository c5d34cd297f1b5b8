package pace

import (
	"net/http"
	"sync/atomic"
	"time"
)

// Bounds past which a header value is treated as absurd and ignored.
const (
	// maxQuota is the largest quota or remaining count believed.
	maxQuota = 1_000_000_000
	// maxHint is the longest Retry-After, reset or window believed: a
	// value beyond it is more likely a bug or an attack than a plan.
	maxHint = 24 * time.Hour
)

// Assumed windows of the vendor formats that state a limit without its
// window.
const (
	vendorWindow = time.Minute // OpenAI and Anthropic quote per-minute limits
	githubWindow = time.Hour   // GitHub's primary limits are per hour
)

// observation is what one response says about its upstream's limits. The
// zero observation says nothing. Fields that a response did not carry, or
// carried in a form that could not be trusted (unparseable, negative,
// absurdly large, contradictory), are left zero.
type observation struct {
	// Limit is the request quota: Limit requests per Window. Zero when the
	// response states none.
	Limit int64
	// Window is the period of Limit. For formats that do not state it,
	// the vendor's documented window: one minute for OpenAI and Anthropic,
	// one hour for GitHub (one minute for its search resources).
	Window time.Duration
	// Remaining is the number of requests left, when HasRemaining.
	Remaining    int64
	HasRemaining bool
	// Reset is the time until the request quota is whole again (or, with
	// FixedWindow, until the window starts over). Zero when not stated.
	Reset time.Duration
	// FixedWindow is set when the upstream starts its quota over at Reset
	// in one step (GitHub) rather than refilling it continuously.
	FixedWindow bool

	// TokensRemaining is the most constraining number of LLM tokens left
	// (OpenAI tokens; Anthropic tokens, input tokens, output tokens), when
	// HasTokensRemaining; TokensReset is when that quota is whole again.
	TokensRemaining    int64
	HasTokensRemaining bool
	TokensReset        time.Duration

	// RetryAfter is the delay the upstream asked for, from retry-after-ms
	// or Retry-After (seconds or an HTTP date; a date in the past is a
	// delay of 0), when HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// Canonical header names, indexed directly to spare Header.Get its
// canonicalization.
const (
	hRetryAfter   = "Retry-After"
	hRetryAfterMs = "Retry-After-Ms"
	hPolicy       = "Ratelimit-Policy"
	hRateLimit    = "Ratelimit"

	hOAILimitReq  = "X-Ratelimit-Limit-Requests"
	hOAIRemReq    = "X-Ratelimit-Remaining-Requests"
	hOAIResetReq  = "X-Ratelimit-Reset-Requests"
	hOAIRemTok    = "X-Ratelimit-Remaining-Tokens"
	hOAIResetTok  = "X-Ratelimit-Reset-Tokens"
	hAntLimitReq  = "Anthropic-Ratelimit-Requests-Limit"
	hAntRemReq    = "Anthropic-Ratelimit-Requests-Remaining"
	hAntResetReq  = "Anthropic-Ratelimit-Requests-Reset"
	hGHLimit      = "X-Ratelimit-Limit"
	hGHRemaining  = "X-Ratelimit-Remaining"
	hGHReset      = "X-Ratelimit-Reset"
	hGHResource   = "X-Ratelimit-Resource"
	hAmznErrType  = "X-Amzn-Errortype"
	hGRPCPushback = "Grpc-Retry-Pushback-Ms"
)

// anthropicTokens lists the Anthropic token quotas, each as its
// remaining and reset header.
var anthropicTokens = [...][2]string{
	{"Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset"},
	{"Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset"},
	{"Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset"},
}

func first(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// policyCache keeps the last RateLimit-Policy value an upstream sent, parsed:
// it rarely changes, and parsing it on every response is most of the cost
// of reading the fields.
type policyCache struct {
	raw string
	np  int
	pol [maxItems]sfItem
}

// observe reads the rate-limit fields of a response header h received at
// now: the IETF RateLimit and RateLimit-Policy fields (draft 11),
// Retry-After and retry-after-ms, OpenAI's x-ratelimit-*-requests and
// -tokens, Anthropic's anthropic-ratelimit-*, and GitHub's x-ratelimit-*.
// When several formats state a request quota, the first in that order
// wins; token quotas are not read from a response with IETF fields. It
// never fails: what it cannot trust, it leaves out. pc, if not nil, caches
// the upstream's parsed RateLimit-Policy.
func observe(h http.Header, now time.Time, pc *atomic.Pointer[policyCache]) observation {
	var o observation
	o.RetryAfter, o.HasRetryAfter = parseRetryAfterMs(first(h, hRetryAfterMs))
	if !o.HasRetryAfter {
		o.RetryAfter, o.HasRetryAfter = parseRetryAfter(now, first(h, hRetryAfter))
	}
	switch {
	case observeIETF(&o, h, pc):
		// An upstream speaking the standard fields is not a vendor
		// with token headers: spare the lookups.
	case observeOpenAI(&o, h):
		observeTokens(&o, h, now)
	case observeAnthropic(&o, h, now):
		observeTokens(&o, h, now)
	default:
		if !observeGitHub(&o, h, now) {
			observeTokens(&o, h, now)
		}
	}
	if o.HasRemaining && o.Limit > 0 && o.Remaining > o.Limit {
		o.Remaining, o.HasRemaining = 0, false // contradictory
	}
	return o
}

// parseRetryAfter parses a Retry-After value v received at now: delay
// seconds or an HTTP date. A date in the past gives 0. It reports false
// for a value that is empty, unparseable, negative or longer than a day.
func parseRetryAfter(now time.Time, v string) (time.Duration, bool) {
	v = trimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, ok := parseUint(v); ok {
		if n > int64(maxHint/time.Second) {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	if v[0] < 'A' || v[0] > 'Z' { // HTTP dates start with a day name
		return 0, false
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return untilBounded(t, now)
}

// untilBounded is t−now, 0 when t has passed, false beyond a day.
func untilBounded(t, now time.Time) (time.Duration, bool) {
	d := t.Sub(now)
	if d <= 0 {
		return 0, true
	}
	if d > maxHint {
		return 0, false
	}
	return d, true
}

func parseRetryAfterMs(v string) (time.Duration, bool) {
	v = trimSpace(v)
	if v == "" {
		return 0, false
	}
	d, ok := parseDecimal(v, time.Millisecond)
	if !ok || d > maxHint {
		return 0, false
	}
	return d, true
}

// sfItem is one Structured Field list member of RateLimit-Policy or
// RateLimit: its name and the integer parameters pacing uses.
type sfItem struct {
	name       string
	q, w, r, t int64 // -1: absent
	requests   bool  // qu absent or "requests"
}

const maxItems = 8

// parseSFList parses the items of a RateLimit or RateLimit-Policy field
// into dst, up to maxItems, and returns how many it kept. An item it
// cannot parse is dropped; the rest of the field is still read.
func parseSFList(vals []string, dst *[maxItems]sfItem) int {
	n := 0
	for _, v := range vals {
		for len(v) > 0 && n < maxItems {
			var member string
			member, v = cutMember(v)
			if it, ok := parseSFItem(trimSpace(member)); ok {
				dst[n] = it
				n++
			}
		}
	}
	return n
}

// cutMember splits off the first list member at a comma outside a string.
func cutMember(v string) (member, rest string) {
	inStr := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case !inStr && c == ',':
			return v[:i], v[i+1:]
		}
	}
	return v, ""
}

func parseSFItem(s string) (sfItem, bool) {
	it := sfItem{q: -1, w: -1, r: -1, t: -1, requests: true}
	if s == "" {
		return it, false
	}
	// The item's bare value: a string (the policy name) or a token.
	if s[0] == '"' {
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' {
				i++
			}
		}
		if i >= len(s) {
			return it, false
		}
		it.name, s = s[1:i], s[i+1:]
	} else {
		i := 0
		for i < len(s) && s[i] != ';' {
			i++
		}
		it.name, s = trimSpace(s[:i]), s[i:]
	}
	for len(s) > 0 {
		if s[0] != ';' {
			return it, false
		}
		s = s[1:]
		i := 0
		for i < len(s) && s[i] != ';' {
			i++
		}
		param := trimSpace(s[:i])
		s = s[i:]
		k, val, ok := cutByte(param, '=')
		if !ok {
			continue // a bare boolean parameter: nothing pacing uses
		}
		switch k {
		case "q", "w", "r", "t":
			n, ok := parseUint(val)
			if !ok {
				return it, false
			}
			switch k {
			case "q":
				it.q = n
			case "w":
				it.w = n
			case "r":
				it.r = n
			case "t":
				it.t = n
			}
		case "qu":
			it.requests = val == `"requests"`
		}
	}
	return it, true
}

// observeIETF reads RateLimit-Policy and RateLimit. With several request
// policies, the one with the lowest rate q/w gives the quota; the lowest
// remaining of any policy and the latest reset among those at zero are
// kept. It reports whether a quota was found.
func observeIETF(o *observation, h http.Header, pc *atomic.Pointer[policyCache]) bool {
	pv, rv := h[hPolicy], h[hRateLimit]
	if len(pv) == 0 && len(rv) == 0 {
		return false
	}
	var (
		pol, cur [maxItems]sfItem
		np       int
	)
	if c := loadPolicy(pc, pv); c != nil {
		pol, np = c.pol, c.np
	} else {
		np = parseSFList(pv, &pol)
		if pc != nil && len(pv) == 1 {
			pc.Store(&policyCache{raw: pv[0], np: np, pol: pol})
		}
	}
	nc := parseSFList(rv, &cur)
	found := false
	for _, p := range pol[:np] {
		if !p.requests || p.q <= 0 || p.q > maxQuota || p.w <= 0 || p.w > int64(maxHint/time.Second) {
			continue
		}
		w := time.Duration(p.w) * time.Second
		// Lower rate: p.q/w < o.Limit/o.Window, compared without division.
		if !found || float64(p.q)*float64(o.Window) < float64(o.Limit)*float64(w) {
			o.Limit, o.Window, found = p.q, w, true
		}
	}
	for _, c := range cur[:nc] {
		if c.r < 0 || c.r > maxQuota {
			continue
		}
		if !policyCountsRequests(c.name, pol[:np]) {
			continue
		}
		var reset time.Duration
		if c.t >= 0 && c.t <= int64(maxHint/time.Second) {
			reset = time.Duration(c.t) * time.Second
		}
		if !o.HasRemaining || c.r < o.Remaining || (c.r == o.Remaining && reset > o.Reset) {
			o.Remaining, o.HasRemaining, o.Reset = c.r, true, reset
		}
	}
	return found || o.HasRemaining
}

func loadPolicy(pc *atomic.Pointer[policyCache], pv []string) *policyCache {
	if pc == nil || len(pv) != 1 {
		return nil
	}
	if c := pc.Load(); c != nil && c.raw == pv[0] {
		return c
	}
	return nil
}

// policyCountsRequests reports whether the policy called name counts
// requests; a RateLimit item without a matching policy is assumed to.
func policyCountsRequests(name string, pol []sfItem) bool {
	for _, p := range pol {
		if p.name == name {
			return p.requests
		}
	}
	return true
}

func observeOpenAI(o *observation, h http.Header) bool {
	lim, okL := parseCount(first(h, hOAILimitReq))
	rem, okR := parseCount(first(h, hOAIRemReq))
	if !okL && !okR {
		return false
	}
	if okL && lim > 0 {
		o.Limit, o.Window = lim, vendorWindow
	}
	if okR {
		o.Remaining, o.HasRemaining = rem, true
	}
	if d, ok := parseDuration(first(h, hOAIResetReq)); ok {
		o.Reset = d
	}
	return true
}

func observeAnthropic(o *observation, h http.Header, now time.Time) bool {
	lim, okL := parseCount(first(h, hAntLimitReq))
	rem, okR := parseCount(first(h, hAntRemReq))
	if !okL && !okR {
		return false
	}
	if okL && lim > 0 {
		o.Limit, o.Window = lim, vendorWindow
	}
	if okR {
		o.Remaining, o.HasRemaining = rem, true
	}
	if d, ok := parseRFC3339Until(first(h, hAntResetReq), now); ok {
		o.Reset = d
	}
	return true
}

func observeGitHub(o *observation, h http.Header, now time.Time) bool {
	lim, okL := parseCount(first(h, hGHLimit))
	rem, okR := parseCount(first(h, hGHRemaining))
	if !okL && !okR {
		return false
	}
	window := githubWindow
	switch first(h, hGHResource) {
	case "search", "code_search":
		window = time.Minute
	}
	if okL && lim > 0 {
		o.Limit, o.Window = lim, window
	}
	if okR {
		o.Remaining, o.HasRemaining = rem, true
	}
	if n, ok := parseUint(trimSpace(first(h, hGHReset))); ok && n < 1<<40 {
		if d, ok := untilBounded(time.Unix(n, 0), now); ok && d <= window {
			o.Reset = d
		}
	}
	o.FixedWindow = true
	return true
}

// observeTokens reads the token quotas of OpenAI and Anthropic, keeping
// the one with the fewest tokens left.
func observeTokens(o *observation, h http.Header, now time.Time) {
	keep := func(rem int64, reset time.Duration) {
		if !o.HasTokensRemaining || rem < o.TokensRemaining || (rem == o.TokensRemaining && reset > o.TokensReset) {
			o.TokensRemaining, o.HasTokensRemaining, o.TokensReset = rem, true, reset
		}
	}
	if rem, ok := parseCount(first(h, hOAIRemTok)); ok {
		d, _ := parseDuration(first(h, hOAIResetTok))
		keep(rem, d)
	}
	for _, names := range anthropicTokens {
		if rem, ok := parseCount(first(h, names[0])); ok {
			d, _ := parseRFC3339Until(first(h, names[1]), now)
			keep(rem, d)
		}
	}
}

func parseRFC3339Until(v string, now time.Time) (time.Duration, bool) {
	v = trimSpace(v)
	if len(v) < 20 || len(v) > 40 {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, false
	}
	return untilBounded(t, now)
}

// parseCount parses a non-negative count no larger than maxQuota.
func parseCount(v string) (int64, bool) {
	n, ok := parseUint(trimSpace(v))
	if !ok || n > maxQuota {
		return 0, false
	}
	return n, true
}

// parseUint parses decimal digits into a non-negative int64; it fails on
// anything else, and on values of 16 digits or more (beyond any count or
// delay pacing believes), so it never overflows.
func parseUint(s string) (int64, bool) {
	if s == "" || len(s) > 15 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// parseDecimal parses "123" or "123.456" as that many units, rounding the
// fraction up to the nanosecond. Values beyond maxHint fail.
func parseDecimal(s string, unit time.Duration) (time.Duration, bool) {
	ip, fp, _ := cutByte(s, '.')
	n, ok := parseUint(ip)
	if !ok || n > int64(maxHint/unit) {
		return 0, false
	}
	d := time.Duration(n) * unit
	if fp != "" {
		if len(fp) > 9 {
			fp = fp[:9]
		}
		f, ok := parseUint(fp)
		if !ok {
			return 0, false
		}
		scale := time.Duration(1)
		for range len(fp) {
			scale *= 10
		}
		d += (time.Duration(f)*unit + scale - 1) / scale
	}
	return d, true
}

// parseDuration parses OpenAI's reset durations: a sequence of decimal
// numbers each with a unit (h, m, s, ms, us, µs, ns), as in "6m0s",
// "1.5s" or "20ms". It fails on anything else and on totals beyond a day.
func parseDuration(s string) (time.Duration, bool) {
	s = trimSpace(s)
	if s == "" {
		return 0, false
	}
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		num := s[:i]
		s = s[i:]
		j := 0
		for j < len(s) && !(s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
			j++
		}
		var unit time.Duration
		switch s[:j] {
		case "h":
			unit = time.Hour
		case "m":
			unit = time.Minute
		case "s":
			unit = time.Second
		case "ms":
			unit = time.Millisecond
		case "us", "µs":
			unit = time.Microsecond
		case "ns":
			unit = time.Nanosecond
		default:
			return 0, false
		}
		s = s[j:]
		if num == "" {
			return 0, false
		}
		d, ok := parseDecimal(num, unit)
		if !ok {
			return 0, false
		}
		total += d
		if total > maxHint {
			return 0, false
		}
	}
	return total, true
}

func cutByte(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

package pace_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/pace"
)

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestObserve(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
		want pace.Observation
	}{
		{"none", header(), pace.Observation{}},
		{"ietf", header("RateLimit-Policy", `"burst";q=100;w=60`, "RateLimit", `"burst";r=7;t=20`),
			pace.Observation{Limit: 100, Window: time.Minute, Remaining: 7, HasRemaining: true, Reset: 20 * time.Second}},
		{"ietf two policies: lower rate wins, lowest remaining", header(
			"RateLimit-Policy", `"day";q=1000;w=86400, "sec";q=10;w=1`,
			"RateLimit", `"day";r=3;t=500, "sec";r=9;t=1`),
			pace.Observation{Limit: 1000, Window: 24 * time.Hour, Remaining: 3, HasRemaining: true, Reset: 500 * time.Second}},
		{"ietf fields on two lines", header("RateLimit-Policy", `"a";q=5;w=1`, "RateLimit-Policy", `"b";q=50;w=1`),
			pace.Observation{Limit: 5, Window: time.Second}},
		{"ietf quota unit not requests is skipped", header("RateLimit-Policy", `"bytes";q=10;w=1;qu="content-bytes", "req";q=100;w=1`,
			"RateLimit", `"bytes";r=0;t=1, "req";r=50;t=1`),
			pace.Observation{Limit: 100, Window: time.Second, Remaining: 50, HasRemaining: true, Reset: time.Second}},
		{"ietf sluice's own rendering", ietfFromSluice(),
			pace.Observation{Limit: 20, Window: 2 * time.Second, Remaining: 4, HasRemaining: true, Reset: 2 * time.Second}},
		{"retry-after seconds", header("Retry-After", "120"), pace.Observation{RetryAfter: 2 * time.Minute, HasRetryAfter: true}},
		{"retry-after-ms wins", header("Retry-After", "2", "retry-after-ms", "1500.5"),
			pace.Observation{RetryAfter: 1500*time.Millisecond + 500*time.Microsecond, HasRetryAfter: true}},
		{"retry-after date", header("Retry-After", t0.Add(90*time.Second).Format(http.TimeFormat)),
			pace.Observation{RetryAfter: 90 * time.Second, HasRetryAfter: true}},
		{"retry-after date past", header("Retry-After", t0.Add(-90*time.Second).Format(http.TimeFormat)),
			pace.Observation{HasRetryAfter: true}},
		{"openai", header("x-ratelimit-limit-requests", "500", "x-ratelimit-remaining-requests", "499", "x-ratelimit-reset-requests", "6m0s",
			"x-ratelimit-limit-tokens", "30000", "x-ratelimit-remaining-tokens", "29000", "x-ratelimit-reset-tokens", "20ms"),
			pace.Observation{Limit: 500, Window: time.Minute, Remaining: 499, HasRemaining: true, Reset: 6 * time.Minute,
				TokensRemaining: 29000, HasTokensRemaining: true, TokensReset: 20 * time.Millisecond}},
		{"anthropic", header(
			"anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49",
			"anthropic-ratelimit-requests-reset", t0.Add(time.Second).Format(time.RFC3339),
			"anthropic-ratelimit-input-tokens-remaining", "100", "anthropic-ratelimit-input-tokens-reset", t0.Add(3*time.Second).Format(time.RFC3339),
			"anthropic-ratelimit-output-tokens-remaining", "900", "anthropic-ratelimit-output-tokens-reset", t0.Add(time.Second).Format(time.RFC3339)),
			pace.Observation{Limit: 50, Window: time.Minute, Remaining: 49, HasRemaining: true, Reset: time.Second,
				TokensRemaining: 100, HasTokensRemaining: true, TokensReset: 3 * time.Second}},
		{"github", header("x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4999", "x-ratelimit-used", "1",
			"x-ratelimit-reset", strconv.FormatInt(t0.Add(59*time.Minute).Unix(), 10), "x-ratelimit-resource", "core"),
			pace.Observation{Limit: 5000, Window: time.Hour, Remaining: 4999, HasRemaining: true, Reset: 59 * time.Minute, FixedWindow: true}},
		{"github search", header("x-ratelimit-limit", "30", "x-ratelimit-remaining", "0", "x-ratelimit-resource", "search"),
			pace.Observation{Limit: 30, Window: time.Minute, HasRemaining: true, FixedWindow: true}},
		{"absurd and negative ignored", header("RateLimit-Policy", `"p";q=1000000000000;w=1, "n";q=-1;w=1`,
			"RateLimit", `"p";r=1000000000000;t=1`, "Retry-After", "1000000000000"), pace.Observation{}},
		{"contradictory remaining > limit", header("x-ratelimit-limit-requests", "10", "x-ratelimit-remaining-requests", "11"),
			pace.Observation{Limit: 10, Window: time.Minute}},
		{"unparseable", header("RateLimit-Policy", `"p;q=10`, "x-ratelimit-reset-requests", "6 minutes",
			"Retry-After", "Wed, 99 Foo 2030", "anthropic-ratelimit-requests-reset", "tomorrow"), pace.Observation{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pace.Observe(t0, tc.h); got != tc.want {
				t.Fatalf("\ngot  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// The pacer reads what sluice's own middleware writes.
func ietfFromSluice() http.Header {
	h := http.Header{}
	slerrors.SetRateLimitHeaders(h, slerrors.NewQuota("per-ip", 20, 4, 2*time.Second))
	return h
}

func TestParseRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true}, {" 5 ", 5 * time.Second, true}, {"86400", 24 * time.Hour, true},
		{"86401", 0, false}, {"-1", 0, false}, {"1.5", 0, false}, {"", 0, false},
		{"999999999999999999999", 0, false},
		{t0.Add(time.Hour).Format(http.TimeFormat), time.Hour, true},
		{t0.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{t0.Add(48 * time.Hour).Format(http.TimeFormat), 0, false},
	} {
		got, ok := pace.ParseRetryAfter(t0, tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// checkObservation holds whatever the headers said.
func checkObservation(t *testing.T, o pace.Observation) {
	t.Helper()
	for _, d := range []time.Duration{o.Window, o.Reset, o.TokensReset, o.RetryAfter} {
		if d < 0 || d > 24*time.Hour {
			t.Fatalf("duration %v out of bounds in %+v", d, o)
		}
	}
	for _, n := range []int64{o.Limit, o.Remaining, o.TokensRemaining} {
		if n < 0 || n > 1_000_000_000 {
			t.Fatalf("count %d out of bounds in %+v", n, o)
		}
	}
	if (o.Limit > 0) != (o.Window > 0) {
		t.Fatalf("limit without window in %+v", o)
	}
	if o.HasRemaining && o.Limit > 0 && o.Remaining > o.Limit {
		t.Fatalf("contradiction kept in %+v", o)
	}
}

func FuzzObserveIETF(f *testing.F) {
	f.Add(`"burst";q=100;w=60`, `"burst";r=0;t=20`, "3")
	f.Add(`"a";q=1;w=1, "b";q=2;w=1;qu="requests"`, `"a";r=1;t=1, "b";r=2;t=1`, "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add(`"x\";q=9";q=1000000000000;w=1`, `"x";r=-3`, "-1")
	f.Fuzz(func(t *testing.T, policy, current, retry string) {
		o := pace.Observe(t0, header("RateLimit-Policy", policy, "RateLimit", current, "Retry-After", retry))
		checkObservation(t, o)
	})
}

func FuzzObserveVendors(f *testing.F) {
	f.Add("500", "499", "6m0s", "5000", "4999", "1700000000", "2030-01-01T12:00:01Z", "1.5")
	f.Add("x", "-1", "1h2m3.5s4ms5us6ns", "", "1e9", "99999999999999999", "2030-01-01T12:00:01+02:00", "99999999999")
	f.Fuzz(func(t *testing.T, limit, remaining, reset, ghLimit, ghRemaining, ghReset, rfc, ms string) {
		for _, h := range []http.Header{
			header("x-ratelimit-limit-requests", limit, "x-ratelimit-remaining-requests", remaining, "x-ratelimit-reset-requests", reset,
				"x-ratelimit-remaining-tokens", remaining, "x-ratelimit-reset-tokens", reset, "retry-after-ms", ms),
			header("anthropic-ratelimit-requests-limit", limit, "anthropic-ratelimit-requests-remaining", remaining,
				"anthropic-ratelimit-requests-reset", rfc, "anthropic-ratelimit-tokens-remaining", remaining, "anthropic-ratelimit-tokens-reset", rfc),
			header("x-ratelimit-limit", ghLimit, "x-ratelimit-remaining", ghRemaining, "x-ratelimit-reset", ghReset),
		} {
			checkObservation(t, pace.Observe(t0, h))
		}
	})
}

func FuzzParseRetryAfter(f *testing.F) {
	f.Add("120")
	f.Add("Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add("Sunday, 06-Nov-94 08:49:37 GMT")
	f.Add("1000000000000")
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := pace.ParseRetryAfter(t0, v)
		if d < 0 || d > 24*time.Hour || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", v, d, ok)
		}
	})
}

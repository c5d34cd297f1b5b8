package errors_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	slerrors "github.com/sluicehq/sluice/errors"
)

// SetRateLimitHeaders sets what Header.Set of the rendered values sets,
// byte for byte (internal/ratefield tests the rendering at length).
func TestSetRateLimitHeadersMatchesHeaderSet(t *testing.T) {
	for _, q := range []slerrors.Quota{
		slerrors.NewQuota("", 10, 10, 10*time.Second),
		slerrors.NewQuota("burst", 100, 40, 60*time.Second),
		slerrors.NewQuota(`a"b\c`+"\n\u00e9", 5, -3, 500*time.Millisecond),
		{Policy: "huge", Limit: 1 << 62, Remaining: 1 << 62, Window: 1 << 62, Reset: 1 << 62},
		slerrors.NewQuota(strings.Repeat("long-policy-name", 8), 1000, 999, time.Hour),
	} {
		want := http.Header{"Content-Type": {"text/plain"}}
		want.Set("RateLimit-Policy", string(q.AppendPolicy(nil)))
		want.Set("RateLimit", string(q.AppendRateLimit(nil)))
		h := http.Header{"Ratelimit": {"stale", "values"}, "Content-Type": {"text/plain"}}
		slerrors.SetRateLimitHeaders(h, q)
		if !reflect.DeepEqual(h, want) {
			t.Errorf("SetRateLimitHeaders(%+v) = %q, want %q", q, h, want)
		}
	}
	h := http.Header{}
	slerrors.SetRateLimitHeaders(h, slerrors.Quota{Policy: "p", Limit: 0, Window: time.Second})
	if len(h) != 0 {
		t.Errorf("a Limit of 0 set %q, want nothing", h)
	}
}

// The two fields share one backing array: appending to one must not write
// into the other.
func TestRateLimitFieldsAreIndependent(t *testing.T) {
	h := http.Header{}
	slerrors.SetRateLimitHeaders(h, slerrors.NewQuota("p", 10, 5, time.Minute))
	h.Add("RateLimit-Policy", `"other";q=1;w=1`)
	if got := h.Values("RateLimit"); len(got) != 1 || got[0] != `"p";r=5;t=30` {
		t.Errorf("RateLimit %q after an Add to RateLimit-Policy", got)
	}
	if got := h.Values("RateLimit-Policy"); len(got) != 2 || got[0] != `"p";q=10;w=60` {
		t.Errorf("RateLimit-Policy %q", got)
	}
}

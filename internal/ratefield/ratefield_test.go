package ratefield_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/racecheck"
	"github.com/sluicehq/sluice/internal/ratefield"
)

// headerQuotas are quotas of many shapes: escaped names, the default name,
// clamped values, long names and many policies.
func headerQuotas() []ratefield.Quota {
	qs := []ratefield.Quota{
		ratefield.NewQuota("", 10, 10, 10*time.Second),
		ratefield.NewQuota("burst", 100, 40, 60*time.Second),
		ratefield.NewQuota(`a"b\c`+"\n\u00e9", 5, -3, 500*time.Millisecond),
		{Policy: "huge", Limit: 1 << 62, Remaining: 1 << 62, Window: 1 << 62, Reset: 1 << 62},
		ratefield.NewQuota(strings.Repeat("long-policy-name", 8), 1000, 999, time.Hour), // past the one-allocation buffers
	}
	for i := 0; i < 40; i++ {
		qs = append(qs, ratefield.NewQuota(fmt.Sprintf("policy-%d", i%20), int64(1+i%3), int64(i%2), time.Duration(1+i%4)*time.Second))
	}
	return qs
}

// wantHeaders is what Header.Set with the rendered values produces: the
// fields Set must set, byte for byte.
func wantHeaders(q ratefield.Quota) http.Header {
	h := http.Header{}
	h.Set("RateLimit-Policy", string(q.AppendPolicy(nil)))
	h.Set("RateLimit", string(q.AppendRateLimit(nil)))
	return h
}

func TestSetMatchesHeaderSet(t *testing.T) {
	for _, q := range headerQuotas() {
		want := wantHeaders(q)
		h := http.Header{"Ratelimit": {"stale", "values"}, "Content-Type": {"text/plain"}}
		ratefield.Set(h, q)
		want.Set("Content-Type", "text/plain")
		if !reflect.DeepEqual(h, want) {
			t.Errorf("Set(%+v) = %q, want %q", q, h, want)
		}
	}
}

// FuzzRateLimitHeaders checks Set against Header.Set of the rendered
// values.
func FuzzRateLimitHeaders(f *testing.F) {
	f.Add("per-caller", int64(100), int64(42), int64(time.Minute), int64(time.Second))
	f.Add(`a"b\c`, int64(1<<62), int64(-1), int64(1), int64(1<<62))
	f.Add(strings.Repeat("x", 100), int64(5), int64(5), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, name string, limit, remaining, window, reset int64) {
		q := ratefield.Quota{Policy: name, Limit: limit, Remaining: remaining, Window: time.Duration(window), Reset: time.Duration(reset)}
		want := http.Header{}
		if limit > 0 {
			want = wantHeaders(q)
		}
		h := http.Header{}
		ratefield.Set(h, q)
		if !reflect.DeepEqual(h, want) {
			t.Errorf("%+v: %q, want %q", q, h, want)
		}
	})
}

// The two fields share one backing array: appending to one must not write
// into the other.
func TestRateLimitFieldsAreIndependent(t *testing.T) {
	h := http.Header{}
	ratefield.Set(h, ratefield.NewQuota("p", 10, 5, time.Minute))
	h.Add("RateLimit-Policy", `"other";q=1;w=1`)
	if got := h.Values("RateLimit"); len(got) != 1 || got[0] != `"p";r=5;t=30` {
		t.Errorf("RateLimit %q after an Add to RateLimit-Policy", got)
	}
	if got := h.Values("RateLimit-Policy"); len(got) != 2 || got[0] != `"p";q=10;w=60` {
		t.Errorf("RateLimit-Policy %q", got)
	}
}

func TestSetAllocations(t *testing.T) {
	if racecheck.Enabled || testing.CoverMode() != "" {
		t.Skip("allocation counts differ under -race and coverage")
	}
	h := http.Header{}
	q := ratefield.NewQuota("per-caller", 100, 42, time.Minute)
	// The largest values a short name can carry still fit one allocation.
	big := ratefield.Quota{Policy: "per-caller", Limit: 1 << 62, Remaining: 1 << 62, Window: 1 << 62, Reset: 1 << 62}
	// The two field values and their slices: one allocation.
	for _, q := range []ratefield.Quota{q, big} {
		if n := testing.AllocsPerRun(1000, func() { ratefield.Set(h, q) }); n > 1 {
			t.Errorf("Set(%+v) allocates %.1f times per response, want at most 1", q, n)
		}
	}
}

func TestCeilSeconds(t *testing.T) {
	for _, c := range []struct {
		d    int64
		want int64
	}{{0, 1}, {-5, 1}, {1, 1}, {1e9, 1}, {1e9 + 1, 2}, {59_999_999_999, 60}, {1<<63 - 1, 9223372037}} {
		if got := ratefield.CeilSeconds(time.Duration(c.d)); got != c.want {
			t.Errorf("CeilSeconds(%d) = %d, want %d", c.d, got, c.want)
		}
	}
}

package httplimit

import (
	"math"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	slerrors "github.com/sluicehq/sluice/errors"
)

// TestFieldCacheMatchesRendering checks that the cached fields are byte for
// byte what slerrors renders for the same allowed decision, on first use and
// on reuse, across policies (long and escaped names, more policies than the
// cache holds) and remaining counts (negative, colliding in a slot, beyond
// Structured Field integers).
func TestFieldCacheMatchesRendering(t *testing.T) {
	type policy struct {
		name   string
		limit  int64
		window time.Duration
	}
	policies := []policy{
		{"per-caller", 1_000_000, 16_000 * time.Second},
		{"", 100, time.Minute},
		{`q"uo\te é`, 10, 1500 * time.Millisecond},
		{strings.Repeat("long-name-", 8), 1 << 40, 24 * time.Hour},
		{"huge", math.MaxInt64, time.Duration(math.MaxInt64)},
	}
	for i := range fieldPolicies + 2 { // the cache fills up
		policies = append(policies, policy{"p" + string(rune('a'+i)), int64(i + 1), time.Second})
	}
	remainings := []int64{0, 1, 5, 9, 10, 11, -3, 255, 256, 512, 999_000, 1 << 50, math.MaxInt64, math.MinInt64}
	var c fieldCache
	for pass := range 2 {
		for _, p := range policies {
			for _, rem := range remainings {
				got, want := http.Header{}, http.Header{}
				c.set(got, p.name, p.limit, rem, p.window)
				slerrors.SetRateLimitHeaders(want, slerrors.NewQuota(p.name, p.limit, rem, p.window))
				if !reflect.DeepEqual(got, want) {
					t.Errorf("pass %d, %+v, remaining %d: got %q, want %q", pass, p, rem, got, want)
				}
			}
		}
	}
}

// TestFieldCacheValuesStayApart checks that a handler's Add to a field of
// one response leaves the shared values, and so other responses, alone.
func TestFieldCacheValuesStayApart(t *testing.T) {
	var c fieldCache
	a, b := http.Header{}, http.Header{}
	c.set(a, "p", 10, 3, time.Second)
	c.set(b, "p", 10, 3, time.Second)
	a.Add("RateLimit", `"other";r=1;t=1`)
	a.Add("RateLimit-Policy", `"other";q=2;w=1`)
	want := http.Header{}
	slerrors.SetRateLimitHeaders(want, slerrors.NewQuota("p", 10, 3, time.Second))
	if !reflect.DeepEqual(b, want) {
		t.Errorf("after an Add to another response: %q, want %q", b, want)
	}
	if len(a["Ratelimit"]) != 2 || len(a["Ratelimit-Policy"]) != 2 {
		t.Errorf("Add lost a value: %q", a)
	}
}

// TestFieldCacheConcurrent renders the same slots from several goroutines
// (run with -race).
func TestFieldCacheConcurrent(t *testing.T) {
	var c fieldCache
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				rem := int64((i * (g + 1)) % 700)
				name := []string{"a", "b", "c"}[i%3]
				h := http.Header{}
				c.set(h, name, 1000, rem, time.Minute)
				want := http.Header{}
				slerrors.SetRateLimitHeaders(want, slerrors.NewQuota(name, 1000, rem, time.Minute))
				if !reflect.DeepEqual(h, want) {
					t.Errorf("%q, want %q", h, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkFieldCache sets the fields of an allowed response from the
// cache ("hit": remaining counts it keeps) and on a miss (each request a
// remaining count not seen before). BENCHMARKS.md compares them with
// v0.1.0's errors.PolicyCache, measured before it was removed.
func BenchmarkFieldCache(b *testing.B) {
	const window = 16_000 * time.Second
	h := http.Header{}
	b.Run("hit", func(b *testing.B) {
		var c fieldCache
		b.ReportAllocs()
		i := int64(0)
		for b.Loop() {
			c.set(h, "per-caller", 1_000_000, 999_000-i%fieldSlots, window)
			i++
		}
	})
	b.Run("miss", func(b *testing.B) {
		var c fieldCache
		b.ReportAllocs()
		i := int64(0)
		for b.Loop() {
			c.set(h, "per-caller", 1_000_000, 999_000-i, window)
			i++
		}
	})
}

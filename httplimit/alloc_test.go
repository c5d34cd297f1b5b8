package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/racecheck"
	"github.com/sluicehq/sluice/stack"
)

// perCaller is one per-caller limit with a "*" entry (never reached by the
// test), optionally with a per-caller connections limit beside it.
func perCaller(t *testing.T, conns bool) *stack.Stack {
	t.Helper()
	cfg := stack.Config{RateLimits: []stack.RateLimit{{
		RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"},
			Requests: []stack.Rate{{Rate: 10_000_000, Period: "minute"}}}},
	}}}
	if conns {
		cfg.RateLimits = append(cfg.RateLimits, stack.RateLimit{
			RateLimitID: "in-flight", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"},
				Connections: []stack.Rate{{Rate: 10, Period: "second"}}}},
		})
	}
	s, err := stack.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMiddlewareAllocations pins the cost of the middleware per allowed
// request over a stack: no allocation beyond the handler's own (the
// RateLimit field values are shared between responses of the same policy
// and remaining units, and the callers here all have the same), with or
// without a connections limit holding a slot (reservations are pooled).
// The handler sets a Content-Type, as most do, so the response's header
// map already exists when the middleware adds its two fields.
func TestMiddlewareAllocations(t *testing.T) {
	if racecheck.Enabled || testing.CoverMode() != "" {
		t.Skip("allocation counts differ under -race and coverage")
	}
	reqs := make([]*http.Request, 100)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, "/", nil)
		reqs[i].Header.Set("X-Caller", "caller-"+strconv.Itoa(i))
	}
	keys := func(r *http.Request) (sluice.Keys, error) {
		return sluice.NewKeys("caller", r.Header.Get("X-Caller")), nil
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
	})
	allocs := func(h http.Handler) float64 {
		i := 0
		serve := func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, reqs[i%len(reqs)])
			if w.Code != http.StatusOK || w.Header().Get("Content-Type") == "" {
				t.Fatalf("status %d, header %v", w.Code, w.Header())
			}
			i++
		}
		for range len(reqs) { // every caller's bucket exists
			serve()
		}
		return testing.AllocsPerRun(1000, serve)
	}
	bare := allocs(next)
	for _, conns := range []bool{false, true} {
		s := perCaller(t, conns)
		h := httplimit.New(s, keys)(next)
		if got := allocs(h); got-bare > 0 {
			t.Errorf("connections limit %v: %.1f allocations per request, the handler alone %.1f; want no more", conns, got, bare)
		}
		// The headers are there, and the slots were all given back.
		w := httptest.NewRecorder()
		h.ServeHTTP(w, reqs[0])
		if w.Header().Get("RateLimit-Policy") != `"per-caller";q=10000000;w=60` || w.Header().Get("RateLimit") == "" {
			t.Errorf("headers %v", w.Header())
		}
		if conns {
			for range 10 {
				r, d, _ := s.ReserveSlots(reqs[0].Context(), sluice.NewKeys("caller", "caller-0"))
				if !d.Allowed {
					t.Fatalf("a slot was not released: %+v", d)
				}
				defer r.Cancel()
			}
		}
	}
}

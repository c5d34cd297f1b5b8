package middleware

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/go-chi/httprate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/stack"
)

// callers is how many distinct API keys the benchmarks cycle through.
const callers = 10_000

const apiKeyHeader = "X-Api-Key" // canonical, so Header.Get does not rewrite it

// perCallerStack is one per-caller limit with a "*" entry: 60 requests a
// minute with a burst of a million, so that every benchmark request is
// admitted and no caller's bucket refills to full between its requests (a
// full bucket carries no state, and the table sweeps it away: re-creating
// it is the bucket package's cost, measured by its own benchmarks).
func perCallerStack() *stack.Stack {
	s, err := stack.New(stack.Config{RateLimits: []stack.RateLimit{{
		RateLimitID:   "per-caller",
		DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"},
			Requests: []stack.Rate{{Rate: 60, Period: "minute", Burst: 1_000_000}}}},
	}}})
	if err != nil {
		panic(err) // a fixed configuration
	}
	return s
}

func callerKeys(r *http.Request) (sluice.Keys, error) {
	return sluice.NewKeys("caller", r.Header.Get(apiKeyHeader)), nil
}

func httprateKey(r *http.Request) (string, error) { return r.Header.Get(apiKeyHeader), nil }

// requests builds one GET per caller, each carrying its API key.
func requests() []*http.Request {
	reqs := make([]*http.Request, callers)
	for i := range reqs {
		r := httptest.NewRequest(http.MethodGet, "/v1/things", nil)
		r.Header.Set(apiKeyHeader, "key-"+strconv.Itoa(i))
		reqs[i] = r
	}
	return reqs
}

// ok is the application's handler: like most, it sets a Content-Type.
func ok(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
}

// httpSides are the handlers compared: the bare handler, go-chi/httprate
// keyed by API key, and httplimit over a stack with one per-caller limit.
func httpSides() []struct {
	name string
	h    http.Handler
} {
	next := http.HandlerFunc(ok)
	return []struct {
		name string
		h    http.Handler
	}{
		{"bare", next},
		{"httprate", httprate.LimitBy(1_000_000_000, time.Minute, httprateKey)(next)},
		{"sluice", httplimit.New(perCallerStack(), callerKeys)(next)},
	}
}

// BenchmarkHTTP is one request through each side, with a fresh
// httptest.ResponseRecorder, cycling through 10k API keys; every request
// is admitted. The sides run interleaved in rounds (see compare):
//
//	go test -run '^$' -bench HTTP -benchtime 300ms -rounds 8
func BenchmarkHTTP(b *testing.B) {
	reqs := requests()
	var sides []side
	for _, s := range httpSides() {
		sides = append(sides, side{s.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				w := httptest.NewRecorder()
				s.h.ServeHTTP(w, reqs[i])
				if w.Code != http.StatusOK {
					b.Fatalf("%s: status %d", s.name, w.Code)
				}
				if i++; i == len(reqs) {
					i = 0
				}
			}
		}})
	}
	compare(b, sides)
}

package middleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/go-chi/httprate"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/bucket"
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

// typed is the application's handler: like most, it sets a Content-Type.
func typed(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
}

// empty sets no header: the middleware's fields are then the first entries
// of the response's header map, which allocates for them, and the
// recorder's snapshot of the map grows too.
func empty(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

// httpSides are the handlers compared: the bare handler, go-chi/httprate
// keyed by API key, and httplimit over a stack with one per-caller limit.
func httpSides(next http.Handler) []struct {
	name string
	h    http.Handler
} {
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
// is admitted. It runs once with a handler that sets a Content-Type and
// once with one that sets no header. The sides run interleaved in rounds
// (see compare):
//
//	go test -run '^$' -bench HTTP -benchtime 300ms -rounds 8
func BenchmarkHTTP(b *testing.B) {
	reqs := requests()
	for _, handler := range []struct {
		name string
		h    http.HandlerFunc
	}{{"typed", typed}, {"empty", empty}} {
		b.Run("handler="+handler.name, func(b *testing.B) {
			compare(b, "HTTP, handler "+handler.name, recorderSides(httpSides(handler.h), reqs))
		})
	}
}

// instant is a sluice.Limiter that admits every request at once, with the
// RateLimit figures of a per-caller bucket: httplimit over it costs what
// the middleware costs without an engine.
type instant struct{}

func (instant) Allow(context.Context, sluice.Keys) (sluice.Decision, error) {
	return sluice.Decision{Allowed: true, LimitID: "per-caller", Limit: 1_000_000, Remaining: 999_000, Window: 16_000 * time.Second}, nil
}

// The two RateLimit fields as constants, for the floor below: shared value
// slices, no rendering, no allocation.
var (
	constPolicy    = []string{`"per-caller";q=1000000;w=16000`}
	constRateLimit = []string{`"per-caller";r=999000;t=16`}
)

var keySink int

// BenchmarkHTTPFloor splits BenchmarkHTTP's typed row (same recorder, same
// requests) into what any rate-limiting middleware of this shape pays and
// what is sluice's own: the key function alone ("key": the request's
// header read while the request is cold, and the Keys built), the two
// RateLimit fields set from constants ("fields": two entries in the
// response's header map, which the recorder's snapshot copies), both
// ("keyfields"), both with the request's context checked and one take
// from a bucket.Table of the caller's bucket ("floor": what no middleware
// with this contract avoids), and httplimit over a limiter that decides at
// once ("instant": key, fields rendered, and the middleware's own path).
// sluice − instant is the engine's share; sluice − floor is all that
// sluice adds to it. bash scripts/cgcount.sh counts a side's instructions
// and cache misses per request, without this machine's noise.
//
//	go test -run '^$' -bench HTTPFloor -benchtime 300ms -rounds 7
func BenchmarkHTTPFloor(b *testing.B) {
	reqs := requests()
	next := http.HandlerFunc(typed)
	// The floor's Table: the per-caller limit's rate and burst, on the
	// Table's own clock (a monotonic read, as the Stack's default).
	tab := bucket.NewTable(rate.Limit(1), 1_000_000)
	sides := httpSides(next)[1:] // httprate, sluice
	sides = append([]struct {
		name string
		h    http.Handler
	}{{"bare", next}}, sides...)
	sides = append(sides, []struct {
		name string
		h    http.Handler
	}{
		{"key", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, _ := callerKeys(r)
			keySink += k.Len()
			next.ServeHTTP(w, r)
		})},
		{"fields", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h["Ratelimit-Policy"], h["Ratelimit"] = constPolicy, constRateLimit
			next.ServeHTTP(w, r)
		})},
		{"keyfields", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, _ := callerKeys(r)
			keySink += k.Len()
			h := w.Header()
			h["Ratelimit-Policy"], h["Ratelimit"] = constPolicy, constRateLimit
			next.ServeHTTP(w, r)
		})},
		{"floor", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The request's context, as a limiter asked with it checks
			// it (httprate reads it too).
			if r.Context().Err() != nil {
				return
			}
			v := r.Header.Get(apiKeyHeader)
			if !tab.Allow(v) {
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			h := w.Header()
			h["Ratelimit-Policy"], h["Ratelimit"] = constPolicy, constRateLimit
			next.ServeHTTP(w, r)
		})},
		{"instant", httplimit.New(instant{}, callerKeys)(next)},
	}...)
	compare(b, "HTTP floor, handler typed", recorderSides(sides, reqs))
}

// recorderSides makes each handler a side of a comparison: a request in
// turn from reqs through a new httptest recorder, admitted (200) or the
// benchmark fails; the warm-up sends every request once.
func recorderSides(hs []struct {
	name string
	h    http.Handler
}, reqs []*http.Request) []side {
	var sides []side
	for _, s := range hs {
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
		}, func() {
			for _, r := range reqs {
				s.h.ServeHTTP(httptest.NewRecorder(), r)
			}
		}})
	}
	return sides
}

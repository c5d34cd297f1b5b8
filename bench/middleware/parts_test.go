package middleware

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/httprate"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
)

// discardW is a ResponseWriter that keeps nothing: its header map is reused,
// so the parts below cost what the middleware does, not a recorder.
type discardW struct{ h http.Header }

func (d discardW) Header() http.Header         { return d.h }
func (d discardW) Write(p []byte) (int, error) { return len(p), nil }
func (d discardW) WriteHeader(int)             {}

// BenchmarkHTTPParts splits the sluice side of BenchmarkHTTP into its parts,
// beside httprate, all without a recorder: the middleware without the
// RateLimit fields ("noheaders"), with them ("full"), the stack's Allow
// alone with the key lookup ("allow"), and the key lookup alone ("key").
//
//	go test -run '^$' -bench HTTPParts -benchtime 200ms -rounds 5
func BenchmarkHTTPParts(b *testing.B) {
	compare(b, "HTTP parts, no recorder", partsSides(requests()))
}

// partsSides are the sides of BenchmarkHTTPParts.
func partsSides(reqs []*http.Request) []side {
	s := perCallerStack()
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	var sides []side
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", next},
		{"httprate", httprate.LimitBy(1_000_000_000, time.Minute, httprateKey)(next)},
		{"noheaders", httplimit.New(s, callerKeys, httplimit.WithoutRateLimitHeaders())(next)},
		{"full", httplimit.New(s, callerKeys)(next)},
	} {
		sides = append(sides, side{c.name, func(b *testing.B) {
			w := discardW{h: http.Header{}}
			i := 0
			for b.Loop() {
				c.h.ServeHTTP(w, reqs[i])
				if i++; i == len(reqs) {
					i = 0
				}
			}
		}, nil})
	}
	sides = append(sides, side{"allow", func(b *testing.B) {
		i := 0
		ctx := context.Background()
		for b.Loop() {
			d, _ := s.Allow(ctx, sluice.NewKeys("caller", reqs[i].Header.Get(apiKeyHeader)))
			if !d.Allowed {
				b.Fatal()
			}
			if i++; i == len(reqs) {
				i = 0
			}
		}
	}, nil})
	sides = append(sides, side{"key", func(b *testing.B) {
		i := 0
		n := 0
		for b.Loop() {
			n += len(reqs[i].Header.Get(apiKeyHeader))
			if i++; i == len(reqs) {
				i = 0
			}
		}
	}, nil})
	return sides
}

// BenchmarkHandlerSide runs each side of BenchmarkHTTPParts on its own, as
// BenchmarkInterceptorSide does for the gRPC interceptors (instruction
// counts: the difference of two runs of different lengths):
//
//	go test -c && GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off GOMAXPROCS=1 valgrind --tool=callgrind \
//	  ./middleware.test -test.run '^$' -test.bench 'HandlerSide/full$' -test.benchtime 200000x
func BenchmarkHandlerSide(b *testing.B) {
	runAlone(b, partsSides(requests()))
}

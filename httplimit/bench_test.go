package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/stack"
)

// BenchmarkMiddleware measures what the middleware adds around a handler:
// bare handler, allowed (sluice.Unlimited) and throttled (sluice.Deny, the
// full 429 response written), and a stack.Stack with a connections limit
// through Allow (WithoutReserve) and through Reserve (a slot taken and
// released per request).
func BenchmarkMiddleware(b *testing.B) {
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	keys := httplimit.ClientIPKey("ip", nil)
	conns := benchStack(b)
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", noop},
		{"allowed", httplimit.New(sluice.Unlimited, keys)(noop)},
		{"throttled", httplimit.New(sluice.Deny, keys)(noop)},
		{"stack-allow", httplimit.New(conns, keys, httplimit.WithoutReserve())(noop)},
		{"stack-reserve", httplimit.New(conns, keys)(noop)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.h.ServeHTTP(discard{h: http.Header{}}, req)
			}
		})
	}
}

// discard is a ResponseWriter that keeps nothing, so that the benchmark
// measures the middleware rather than a recorder.
type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(p []byte) (int, error) { return len(p), nil }
func (d discard) WriteHeader(int)             {}

// benchStack limits in-flight requests per client address (plenty of them,
// so that the benchmark never throttles).
func benchStack(tb testing.TB) *stack.Stack {
	tb.Helper()
	s, err := stack.New(stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "in-flight", DimensionKeys: []string{"ip"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"ip": "*"}, Connections: []stack.Rate{{Rate: 1000, Period: "second"}}}}},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

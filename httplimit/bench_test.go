package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
)

// BenchmarkMiddleware measures what the middleware adds around a handler:
// bare handler, allowed (sluice.Unlimited) and throttled (sluice.Deny, the
// full 429 response written).
func BenchmarkMiddleware(b *testing.B) {
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	keys := httplimit.ClientIPKey("ip", nil)
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", noop},
		{"allowed", httplimit.New(sluice.Unlimited, keys)(noop)},
		{"throttled", httplimit.New(sluice.Deny, keys)(noop)},
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

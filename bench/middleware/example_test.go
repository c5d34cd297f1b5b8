package middleware

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/sluicehq/sluice/httplimit"
)

// The sluice side of BenchmarkHTTP: httplimit over a stack with one
// per-caller limit, keyed by API key, in front of a handler that sets a
// Content-Type.
func Example() {
	h := httplimit.New(perCallerStack(), callerKeys)(http.HandlerFunc(typed))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, requests()[42])
	fmt.Println(w.Code)
	fmt.Println(w.Header().Get("RateLimit-Policy"))
	fmt.Println(w.Header().Get("RateLimit"))
	// Output:
	// 200
	// "per-caller";q=1000000;w=1000000
	// "per-caller";r=999999;t=1
}

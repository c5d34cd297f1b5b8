package httplimit_test

// The middleware with a KeyFunc of its own, OpenAI-style throttled bodies
// and span attributes (the README's Middleware section until v0.2).

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/otelattr"
	"github.com/sluicehq/sluice/stack"
)

func Example_middleware() {
	configJSON := []byte(`{"rateLimits": [
	  {"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
	    {"dimensions": {"caller": "*"}, "requests": [{"rate": 2, "period": "minute"}]}]}
	]}`)
	limits, err := stack.Load(configJSON) // the gateway's rate-limit JSON, unchanged
	if err != nil {
		log.Fatal(err)
	}
	keys := func(r *http.Request) (sluice.Keys, error) {
		return sluice.NewKeys("caller", r.Header.Get("X-API-Key")), nil
	}
	limit := httplimit.New(otelattr.Wrap(limits), keys, // decisions land on the request's span
		httplimit.WithFormat(slerrors.OpenAI)) // default: the gateway's HTTP JSON 429

	// Mounted after routing, on each route it limits: a request that matches
	// no route (404) uses up nothing, and r.Pattern holds the route for keys.
	mux := http.NewServeMux()
	mux.Handle("GET /hello", limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	// A server would run http.ListenAndServe(":8080", mux); here, four requests.
	for _, path := range []string{"/hello", "/nope", "/hello", "/hello"} {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("X-API-Key", "alice")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// 200 hello
	// 404 404 page not found
	// 200 hello
	// 429 {"error":{"message":"Rate limit exceeded","type":"rate_limit_error","code":"429","limitKey":"per-caller/caller=alice","metric":"requests","retryAfter":30}}
}

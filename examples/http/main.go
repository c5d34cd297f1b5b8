// Command http is a small JSON API rate-limited with httplimit: every caller
// (its API key, or its address when it sends none) gets 5 requests per
// second, and the expensive route is capped at 2 per minute for everyone
// together. Throttled requests get a 429 with Retry-After and RateLimit
// headers, in the shape -format names; allowed ones carry RateLimit headers
// too.
//
//	go run ./examples/http -addr 127.0.0.1:8080 -format anthropic
//	curl -i -H 'X-API-Key: alice' http://127.0.0.1:8080/report
//
// -format is one of http (the gateway's body, the default), anthropic,
// openai, aws or jsonrpc. The third /report within a minute answers, with
// -format anthropic:
//
//	HTTP/1.1 429 Too Many Requests
//	Retry-After: 30
//	…
//	{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit exceeded","limitKey":"per-route/route=GET %2Freport","metric":"requests","retryAfter":30}}
//
// The middleware is mounted after routing, on each route: a request for a
// path that has no route gets a 404 and uses up nothing.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/otelattr"
	"github.com/sluicehq/sluice/stack"
)

// config is the gateway's JSON configuration format.
const config = `{"rateLimits": [
  {"rateLimitId": "per-route", "dimensionKeys": ["route"], "entries": [
    {"dimensions": {"route": "GET /report"}, "requests": [{"rate": 2, "period": "minute"}]}
  ]},
  {"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
    {"dimensions": {"caller": "*"}, "requests": [{"rate": 5, "period": "second"}]}
  ]}
]}`

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	formatName := flag.String("format", "http", "shape of throttled responses: http (the gateway's), anthropic, openai, aws or jsonrpc")
	flag.Parse()
	format, err := slerrors.ParseFormat(*formatName)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	h, err := newHandler(time.Now, format)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log.Printf("listening on http://%s (try /hello and /report), throttled responses in the %s format", *addr, format)
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// newHandler builds the API with the rate-limit middleware mounted on each
// route, on the clock now, answering throttled requests in format.
func newHandler(now func() time.Time, format slerrors.Format) (http.Handler, error) {
	limits, err := stack.Load([]byte(config), stack.WithClock(now))
	if err != nil {
		return nil, err
	}
	// Nobody is trusted to set X-Forwarded-For here; behind a proxy, name it:
	// httplimit.NewTrustedProxies("10.0.0.0/8").
	var proxies *httplimit.TrustedProxies
	keys := func(r *http.Request) (sluice.Keys, error) {
		var k sluice.Keys
		k.Set("route", r.Pattern) // the route the mux matched: mounted after routing
		caller := r.Header.Get("X-API-Key")
		if caller == "" {
			if ip, ok := proxies.ClientIP(r); ok {
				caller = ip.String()
			}
		}
		if caller != "" {
			k.Set("caller", caller)
		}
		return k, nil
	}
	// otelattr.Wrap records each decision on the request's span when one is
	// recording (none is in this example, so it costs nothing).
	limit := httplimit.New(otelattr.Wrap(limits), keys, httplimit.WithFormat(format))

	mux := http.NewServeMux()
	mux.Handle("GET /hello", limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]string{"hello": "world"})
	})))
	mux.Handle("GET /report", limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]int{"rows": 42})
	})))
	return mux, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

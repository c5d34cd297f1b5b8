// Command http is a small JSON API rate-limited with httplimit: every caller
// (its API key, or its address when it sends none) gets 5 requests per
// second, and the expensive route is capped at 2 per minute for everyone
// together. Throttled requests get the gateway's 429 body with Retry-After
// and RateLimit headers; allowed ones carry RateLimit headers too.
//
//	go run ./examples/http -addr 127.0.0.1:8080
//	curl -i -H 'X-API-Key: alice' http://127.0.0.1:8080/report
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
	flag.Parse()
	h, err := newHandler(time.Now)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log.Printf("listening on http://%s (try /hello and /report)", *addr)
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// newHandler builds the API behind the rate-limit middleware, on the clock now.
func newHandler(now func() time.Time) (http.Handler, error) {
	limits, err := stack.Load([]byte(config), stack.WithNow(now))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]string{"hello": "world"})
	})
	mux.HandleFunc("GET /report", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]int{"rows": 42})
	})

	// Nobody is trusted to set X-Forwarded-For here; behind a proxy, name it:
	// httplimit.NewTrustedProxies("10.0.0.0/8").
	var proxies *httplimit.TrustedProxies
	keys := func(r *http.Request) (sluice.Keys, error) {
		var k sluice.Keys
		if _, route := mux.Handler(r); route != "" {
			k.Set("route", route)
		}
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
	return httplimit.New(otelattr.Wrap(limits), keys)(mux), nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

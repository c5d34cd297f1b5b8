package httplimit_test

// The README's per-client-IP snippet is the body of this example, verbatim
// (TestReadmeSnippetsAreExamples in the root package checks it).

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func Example_clientIP() {
	clock := limitertest.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)) // a test clock; omit WithClock in a server
	limits, err := stack.Load([]byte(`{"rateLimits": [
	  {"rateLimitId": "per-ip", "dimensionKeys": ["clientIP"], "entries": [
	    {"dimensions": {"clientIP": "*"}, "requests": [{"rate": 2, "period": "minute"}]}]}
	]}`), stack.WithClock(clock))
	if err != nil {
		log.Fatal(err)
	}
	// X-Forwarded-For is believed only as far as the proxies named here
	// wrote it (your load balancers); from anyone else the peer address is
	// the client, so a forged header gets a caller nothing.
	proxies, err := httplimit.NewTrustedProxies("10.0.0.0/8")
	if err != nil {
		log.Fatal(err)
	}
	limit := httplimit.New(limits, httplimit.ClientIPKey("clientIP", proxies))

	mux := http.NewServeMux() // mounted on the route it limits: a 404 costs nothing
	mux.Handle("GET /hello", limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	// A server would run http.ListenAndServe(":8080", mux); here, requests.
	send := func(peer, forwardedFor string) {
		req := httptest.NewRequest("GET", "/hello", nil)
		req.RemoteAddr = peer
		req.Header.Set("X-Forwarded-For", forwardedFor)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	for range 3 {
		send("10.0.0.7:4242", "203.0.113.5") // through the balancer
	}
	send("10.0.0.7:4242", "198.51.100.9") // another client behind it
	send("192.0.2.1:5555", "203.0.113.5") // not a trusted proxy: its header is ignored
	// Output:
	// 200 hello
	// 200 hello
	// 429 {"error":"Rate limit exceeded","success":false,"limitKey":"per-ip/clientIP=203.0.113.5","metric":"requests","retryAfter":30}
	// 200 hello
	// 200 hello
}

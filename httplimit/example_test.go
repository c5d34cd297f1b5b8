package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func ExampleNew() {
	// Any sluice.Limiter; here a per-value token bucket on a manual clock,
	// 1 request per second per client address, burst 1.
	limiter, _ := limitertest.NewPerValue("ip", 1, time.Second)

	mw := httplimit.New(limiter, httplimit.ClientIPKey("ip", nil), httplimit.WithFormat(slerrors.HTTPJSON))
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	defer srv.Close()

	for range 2 {
		res, _ := http.Get(srv.URL)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Print(res.StatusCode, " ", res.Header.Get("RateLimit"), " ", string(body))
	}
	fmt.Println()
	// Output:
	// 200 "per-ip";r=0;t=1 hello
	// 429 "per-ip";r=0;t=1 {"error":"Rate limit exceeded","success":false,"limitKey":"per-ip/ip=127.0.0.1","metric":"requests","retryAfter":1}
}

// With a limiter that reserves (a stack.Stack), connections limits count the
// requests in flight: here one per client address, so a request made while
// the first one is still being served is refused, and the slot is free again
// once the first one has returned.
func ExampleNew_connections() {
	limits, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "in-flight", "dimensionKeys": ["ip"],
	  "entries": [{"dimensions": {"ip": "*"}, "connections": [{"rate": 1, "period": "second"}]}]}]}`))
	if err != nil {
		panic(err)
	}
	var srv *httptest.Server
	mw := httplimit.New(limits, httplimit.ClientIPKey("ip", nil))
	srv = httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/outer" { // still in flight while it asks again
			res, _ := http.Get(srv.URL + "/inner")
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			fmt.Print("inner: ", res.StatusCode, " ", string(body), "\n")
		}
		fmt.Fprint(w, "ok")
	})))
	defer srv.Close()

	for _, path := range []string{"/outer", "/after"} {
		res, _ := http.Get(srv.URL + path)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Print(path, ": ", res.StatusCode, " ", string(body), "\n")
	}
	// Output:
	// inner: 429 {"error":"Rate limit exceeded","success":false,"limitKey":"in-flight/ip=127.0.0.1","metric":"connections","retryAfter":1}
	// /outer: 200 ok
	// /after: 200 ok
}

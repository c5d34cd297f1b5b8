package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/httplimit"
)

func ExampleNew() {
	// Any sluice.Limiter; here a small GCRA on a clock the example controls,
	// 1 request per second per client address, burst 1.
	limiter := newClockLimiter("ip", 1, time.Second)

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

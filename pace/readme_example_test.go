package pace_test

// Pacing calls to a rate-limited upstream (the README's "Calling
// rate-limited APIs" section until v0.2; the package documentation says the
// rest).

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/pace"
	"github.com/sluicehq/sluice/stack"
)

func Example_callingAPIs() {
	// An upstream that allows 2 requests per second and says so in its
	// RateLimit headers (here: sluice's own middleware, OpenAI-style 429s).
	limits, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "per-key", "dimensionKeys": ["key"],
	  "entries": [{"dimensions": {"key": "*"}, "requests": [{"rate": 2, "period": "second"}]}]}]}`))
	if err != nil {
		log.Fatal(err)
	}
	keys := func(r *http.Request) (sluice.Keys, error) {
		return sluice.NewKeys("key", r.Header.Get("Authorization")), nil
	}
	upstream := httptest.NewServer(httplimit.New(limits, keys, httplimit.WithFormat(slerrors.OpenAI))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })))
	defer upstream.Close()

	// The client: every request waits for its turn with that upstream (key:
	// scheme, host and API key), learned from the responses; a 429 pauses
	// every caller of the key for its Retry-After, and is retried.
	client := &http.Client{Transport: pace.New(http.DefaultTransport,
		pace.WithMaxWait(10*time.Second), // past that, a *pace.WaitError instead of a wait
		pace.WithRetry(3))}               // attempts in all, bodies replayed with GetBody

	for range 4 { // 2 at once, then one every 500 ms: no 429
		req, _ := http.NewRequest("GET", upstream.URL, nil)
		req.Header.Set("Authorization", "Bearer sk-demo")
		res, err := client.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		res.Body.Close()
		fmt.Print(res.StatusCode, " ")
	}
	fmt.Println()
	// Output: 200 200 200 200
}

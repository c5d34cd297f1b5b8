package pace_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/pace"
	"github.com/sluicehq/sluice/stack/limitertest"
)

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// An upstream that allows 2 requests per second answers the third with a
// 429 and Retry-After: 1. The Transport pauses the upstream for that
// second, retries, and from then on paces requests half a second apart.
// The clock is simulated: the example runs in no time.
func Example() {
	clock := limitertest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clock.Now()

	sent := 0
	upstream := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		h := http.Header{}
		h.Set("RateLimit-Policy", `"default";q=2;w=1`)
		status := http.StatusOK
		if sent == 3 {
			status = http.StatusTooManyRequests
			h.Set("Retry-After", "1")
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(""))}, nil
	})
	client := &http.Client{Transport: pace.New(upstream,
		pace.WithClock(clock), pace.WithRetry(2),
		pace.WithJitter(func(time.Duration) time.Duration { return 0 }))}

	for i := range 5 {
		res, err := client.Get("https://api.example.com/v1/items")
		if err != nil {
			fmt.Println(err)
			return
		}
		res.Body.Close()
		fmt.Printf("request %d: %d at +%v\n", i+1, res.StatusCode, clock.Now().Sub(start))
	}
	fmt.Println("sent:", sent)
	// Output:
	// request 1: 200 at +0s
	// request 2: 200 at +0s
	// request 3: 200 at +1s
	// request 4: 200 at +1.5s
	// request 5: 200 at +2s
	// sent: 6
}

// Two processes, a and b, call one upstream through one Store (here in
// memory; sluiceredis.PaceStore (package sluice/redis) for a real fleet). a is throttled with
// Retry-After: 3; b, which has never been throttled, does not send into
// the pause: it waits it out, then paces by the quota a read (2 per
// second). The clock is simulated: the example runs in no time.
func ExampleWithStore() {
	clock := limitertest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clock.Now()

	sent := 0
	upstream := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		h := http.Header{}
		h.Set("RateLimit-Policy", `"default";q=2;w=1`)
		status := http.StatusOK
		if sent == 2 {
			status = http.StatusTooManyRequests
			h.Set("Retry-After", "3")
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(""))}, nil
	})

	store := pace.NewMemoryStore(0)
	process := func() *http.Client {
		return &http.Client{Transport: pace.New(upstream,
			pace.WithStore(store, time.Second), // read at most once a second per upstream
			pace.WithClock(clock),
			pace.WithJitter(func(time.Duration) time.Duration { return 0 }))}
	}
	a, b := process(), process()

	for _, p := range []struct {
		name   string
		client *http.Client
	}{{"a", a}, {"a", a}, {"b", b}, {"b", b}} {
		res, err := p.client.Get("https://api.example.com/v1/items")
		if err != nil {
			fmt.Println(err)
			return
		}
		res.Body.Close()
		fmt.Printf("%s: %d at +%v\n", p.name, res.StatusCode, clock.Now().Sub(start))
	}
	// Output:
	// a: 200 at +0s
	// a: 429 at +0s
	// b: 200 at +3s
	// b: 200 at +3.5s
}

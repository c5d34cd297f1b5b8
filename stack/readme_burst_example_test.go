package stack_test

// The README's burst snippet is the body of this example, verbatim
// (TestReadmeSnippetsAreExamples in the root package checks it).

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func Example_burst() {
	clock := limitertest.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)) // a test clock; omit WithClock in a server
	// 10 requests a second sustained, and up to 20 at once after a quiet
	// spell ("burst", a sluice extension: by default a period's worth).
	limits, err := stack.Load([]byte(`{"rateLimits": [
	  {"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
	    {"dimensions": {"caller": "*"}, "requests": [{"rate": 10, "period": "second", "burst": 20}]}]}
	]}`), stack.WithClock(clock))
	if err != nil {
		log.Fatal(err)
	}
	keys := sluice.NewKeys("caller", "alice")
	for _, idle := range []time.Duration{0, time.Second, time.Hour} {
		clock.Advance(idle)
		for n := 0; ; n++ { // send until denied
			d, err := limits.Allow(context.Background(), keys)
			if err != nil {
				log.Fatal(err)
			}
			if !d.Allowed {
				fmt.Println("idle", idle, "then", n, "allowed; retry after", d.RetryAfter)
				break
			}
		}
	}
	// Output:
	// idle 0s then 20 allowed; retry after 100ms
	// idle 1s then 10 allowed; retry after 100ms
	// idle 1h0m0s then 20 allowed; retry after 100ms
}

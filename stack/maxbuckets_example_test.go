package stack_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// A Stack bounded to two per-value buckets: a third caller arriving while
// both are in use is refused for lack of room, not for exceeding a limit.
func ExampleWithMaxBuckets() {
	cfg := stack.Config{RateLimits: []stack.RateLimit{{
		RateLimitID:   "per-caller",
		DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{
			Dimensions: map[string]string{"caller": "*"},
			Requests:   []stack.Rate{{Rate: 10, Period: stack.Second}},
		}},
	}}}
	clock := limitertest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s, err := stack.New(cfg, stack.WithMaxBuckets(2), stack.WithClock(clock))
	if err != nil {
		panic(err)
	}
	for _, caller := range []string{"alice", "bob", "carol"} {
		d, _ := s.Allow(context.Background(), sluice.NewKeys("caller", caller))
		fmt.Println(caller, d.Allowed, d.Capacity, d.RetryAfter)
	}
	// Once the buckets have refilled they are reclaimed: carol gets one.
	clock.Advance(time.Second)
	d, _ := s.Allow(context.Background(), sluice.NewKeys("caller", "carol"))
	fmt.Println("carol", d.Allowed)
	// Output:
	// alice true false 0s
	// bob true false 0s
	// carol false true 1s
	// carol true
}

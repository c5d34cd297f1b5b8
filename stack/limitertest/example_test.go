package limitertest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// A backend's test runs the whole suite with a factory:
//
//	func TestConformance(t *testing.T) {
//		limitertest.Run(t, func(t *testing.T, cfg stack.Config, clock *limitertest.Clock) sluice.Limiter {
//			s, err := stack.New(cfg, stack.WithClock(clock), stack.WithBackend(myBackend(t)))
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// The limiter must read time only from the suite's Clock, which the cases
// advance instead of sleeping.
func ExampleClock() {
	c := limitertest.NewClock(limitertest.Start)
	c.Advance(1500 * time.Millisecond)
	fmt.Println(c.Now().Sub(limitertest.Start))
	// Output: 1.5s
}

// Code that consumes a sluice.Limiter (middleware, renderers) is tested on
// a per-value limiter whose clock the test moves.
func ExampleNewPerValue() {
	lim, clock := limitertest.NewPerValue("caller", 2, 500*time.Millisecond) // burst 2, 2 per second
	alice := sluice.NewKeys("caller", "alice")
	for range 3 {
		d, _ := lim.Allow(context.Background(), alice)
		fmt.Println(d.Allowed, d.RetryAfter)
	}
	clock.Advance(500 * time.Millisecond)
	d, _ := lim.Allow(context.Background(), alice)
	fmt.Println(d.Allowed)
	// Output:
	// true 0s
	// true 0s
	// false 500ms
	// true
}

// Code that sleeps on its clock (bucket.WithClock, pace.WithClock: a
// sluice.Clock's Sleep) sleeps on the Clock: the clock moves, nothing waits,
// and the test reads what was waited for.
func ExampleClock_Sleep() {
	c := limitertest.NewClock(limitertest.Start)
	_ = c.Sleep(context.Background(), 250*time.Millisecond)
	_ = c.Sleep(context.Background(), time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fmt.Println(c.Sleep(ctx, time.Hour))
	fmt.Println(c.Now().Sub(limitertest.Start), c.Slept())
	// Output:
	// context canceled
	// 1.25s [250ms 1s]
}

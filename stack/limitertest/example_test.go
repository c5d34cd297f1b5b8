package limitertest_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/stack/limitertest"
)

// A backend's test runs the whole suite with a factory:
//
//	func TestConformance(t *testing.T) {
//		limitertest.Run(t, func(t *testing.T, cfg stack.Config, clock *limitertest.Clock) sluice.Limiter {
//			s, err := stack.New(cfg, stack.WithClock(clock.Now), stack.WithBackend(myBackend(t)))
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

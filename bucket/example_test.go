package bucket_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/bucket"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// newFakeClock returns a manual clock whose Sleep advances it instead of
// sleeping: pass bucket.WithClock(c.Now) and bucket.WithSleep(c.Sleep).
func newFakeClock() *limitertest.Clock {
	return limitertest.NewClock(time.Date(2036, time.March, 1, 12, 0, 0, 0, time.UTC))
}

// The seed's bucket: capacity 50, refilled at 20 per second.
func Example() {
	clk := newFakeClock()
	b := bucket.New(20, 50, bucket.WithClock(clk.Now))

	allowed := 0
	for i := 0; i < 50; i++ {
		if b.Allow() {
			allowed++
		}
	}
	fmt.Println("at once:", allowed)

	r := b.TakeN(clk.Now(), 1)
	fmt.Println("51st allowed:", r.OK, "retry after:", r.RetryAfter)

	for s := 1; s <= 3; s++ {
		clk.Advance(time.Second)
		n := 0
		for b.Allow() {
			n++
		}
		fmt.Printf("second %d: %d allowed\n", s, n)
	}

	clk.Advance(2500 * time.Millisecond)
	fmt.Println("after 2.5s idle:", b.Tokens(), "tokens")
	// Output:
	// at once: 50
	// 51st allowed: false retry after: 50ms
	// second 1: 20 allowed
	// second 2: 20 allowed
	// second 3: 20 allowed
	// after 2.5s idle: 50 tokens
}

// A per-value limit: each API key gets its own bucket of 2, refilled at 1/s.
func ExampleTable() {
	t0 := time.Date(2036, time.March, 1, 12, 0, 0, 0, time.UTC)
	tab := bucket.NewTable(1, 2)
	for _, key := range []string{"alice", "alice", "alice", "bob"} {
		r := tab.TakeN(t0, key, 1)
		fmt.Println(key, r.OK, r.Remaining, r.RetryAfter)
	}
	fmt.Println("live keys:", tab.Len())
	// Output:
	// alice true 1 0s
	// alice true 0 0s
	// alice false 0 1s
	// bob true 1 0s
	// live keys: 2
}

// A request whose actual cost exceeded its estimate: reserve the estimate,
// then charge the overrun, which later requests pay for.
func ExampleBucket_ChargeN() {
	t0 := time.Date(2036, time.March, 1, 12, 0, 0, 0, time.UTC)
	b := bucket.New(10, 50) // 10 tokens/s, 50 at most
	fmt.Println("estimate 40:", b.TakeN(t0, 40).OK)
	b.ChargeN(t0, 30) // actual cost 70
	fmt.Println("tokens:", b.TokensAt(t0))
	r := b.TakeN(t0, 5)
	fmt.Println("next 5:", r.OK, "retry after:", r.RetryAfter)
	// Output:
	// estimate 40: true
	// tokens: -20
	// next 5: false retry after: 2.5s
}

// Table.Allow reads the Table's clock, as Bucket.Allow does.
func ExampleTable_Allow() {
	clk := newFakeClock()
	tab := bucket.NewTable(1, 2, bucket.WithClock(clk.Now))
	fmt.Println(tab.Allow("alice"), tab.Allow("alice"), tab.Allow("alice"))
	clk.Advance(time.Second)
	fmt.Println(tab.Allow("alice"))
	// Output:
	// true true false
	// true
}

// A Budget bounds the live buckets of several Tables together. When it is
// full, a key without a bucket is denied (nothing is evicted that still
// remembers a take) until buckets refill and can be reclaimed.
func ExampleBudget() {
	t0 := time.Date(2036, time.March, 1, 12, 0, 0, 0, time.UTC)
	bud := bucket.NewBudget(2)
	perUser := bucket.NewTable(1, 5, bucket.WithBudget(bud))
	perIP := bucket.NewTable(1, 5, bucket.WithBudget(bud))
	perUser.TakeN(t0, "alice", 1)
	perIP.TakeN(t0, "10.0.0.1", 1)
	r := perUser.TakeN(t0, "bob", 1)
	fmt.Println("bob:", r.OK, "budget full:", r.BudgetFull, "retry after:", r.RetryAfter)
	// Ten seconds later alice's and 10.0.0.1's buckets have refilled: bob's
	// take reclaims one (alice's) and the other stays until a sweep or a
	// later reclaim drops it.
	r = perUser.TakeN(t0.Add(10*time.Second), "bob", 1)
	fmt.Println("bob later:", r.OK, "live buckets:", bud.Len())
	// Output:
	// bob: false budget full: true retry after: 5s
	// bob later: true live buckets: 2
}

package bucket_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/bucket"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// newFakeClock returns a manual clock whose Sleep advances it instead of
// sleeping: pass bucket.WithClock(c).
func newFakeClock() *limitertest.Clock {
	return limitertest.NewClock(time.Date(2036, time.March, 1, 12, 0, 0, 0, time.UTC))
}

// The seed's bucket: capacity 50, refilled at 20 per second.
func Example() {
	clk := newFakeClock()
	b := bucket.New(20, 50, bucket.WithClock(clk))

	allowed := 0
	for i := 0; i < 50; i++ {
		if b.Allow() {
			allowed++
		}
	}
	fmt.Println("at once:", allowed)

	r := b.TakeN(1)
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
		r := tab.TakeAt(t0, key, 1)
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

// A request whose actual cost was lower than its estimate: take the
// estimate, then give back what was not used.
func ExampleBucket_GiveBack() {
	t0 := time.Date(2036, time.March, 1, 12, 0, 0, 0, time.UTC)
	b := bucket.New(10, 50) // 10 tokens/s, 50 at most
	r := b.TakeAt(t0, 40)   // estimate 40
	fmt.Println("estimate 40:", r.OK, "left:", r.Remaining)
	if err := b.GiveBack(&r.Grant, 25); err != nil { // actual cost 15
		fmt.Println(err)
	}
	fmt.Println("tokens:", b.TokensAt(t0), "outstanding:", r.Grant.Outstanding())
	// Output:
	// estimate 40: true left: 10
	// tokens: 35 outstanding: 15
}

// Every denial says when to retry, or that no wait helps.
func ExampleResult() {
	t0 := time.Date(2036, time.March, 1, 12, 0, 0, 0, time.UTC)
	b := bucket.New(2, 4)     // 2 tokens/s, 4 at most
	never := bucket.New(0, 1) // rate 0: one token, then nothing
	b.TakeAt(t0, 4)           // empty now
	r := b.TakeAt(t0, 3)      // 3 tokens refill in 1.5 s
	fmt.Println(r.OK, r.RetryAfter, r.Permanent)
	r = b.TakeAt(t0, 5) // more than the burst: never
	fmt.Println(r.OK, r.OverBurst, r.Permanent)
	never.TakeAt(t0, 1)
	r = never.TakeAt(t0.Add(time.Hour), 1)
	fmt.Println(r.OK, r.RetryAfter, r.Permanent)
	// Output:
	// false 1.5s false
	// false true true
	// false 0s true
}

// Table.Allow reads the Table's clock, as Bucket.Allow does.
func ExampleTable_Allow() {
	clk := newFakeClock()
	tab := bucket.NewTable(1, 2, bucket.WithClock(clk))
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
	perUser.TakeAt(t0, "alice", 1)
	perIP.TakeAt(t0, "10.0.0.1", 1)
	r := perUser.TakeAt(t0, "bob", 1)
	fmt.Println("bob:", r.OK, "budget full:", r.BudgetFull, "retry after:", r.RetryAfter)
	// Ten seconds later alice's and 10.0.0.1's buckets have refilled: bob's
	// take reclaims one (alice's) and the other stays until a sweep or a
	// later reclaim drops it.
	r = perUser.TakeAt(t0.Add(10*time.Second), "bob", 1)
	fmt.Println("bob later:", r.OK, "live buckets:", bud.Len())
	// Output:
	// bob: false budget full: true retry after: 5s
	// bob later: true live buckets: 2
}

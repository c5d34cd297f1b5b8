package stack_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// A request of 0 tokens is a check: it passes while the tokens limit holds
// a whole token and takes nothing; the debit of the tokens used afterwards
// (Reconcile of a 0 estimate) may take the bucket into debt, and the next
// check is over until a token has refilled. The same rule in memory and
// through a Backend (package bucket's, and the Redis script's: see
// the redis package's TestZeroCostCheckThenDebitOnRedis).
func TestZeroCostCheckThenDebit(t *testing.T) {
	backends(t, func(t *testing.T, opts ...stack.Option) {
		clock := limitertest.NewClock(limitertest.Start)
		s := newReserver(t, tpmConfig(60), clock, opts...) // 60 tokens a minute: one a second
		ctx := context.Background()
		check := func(what string, want bool) {
			t.Helper()
			d, err := s.AllowAt(ctx, clock.Now(), llmKeys, 0)
			if err != nil || d.Allowed != want {
				t.Fatalf("%s: check %+v, %v; want allowed=%v", what, d, err, want)
			}
		}
		check("full", true)
		r, d := reserve(t, s, 0) // the check that starts a call
		if !d.Allowed {
			t.Fatalf("reserve 0: %+v", d)
		}
		if err := r.Reconcile(70); err != nil { // 70 tokens used: 10 owed
			t.Fatal(err)
		}
		d, err := s.AllowAt(ctx, clock.Now(), llmKeys, 0)
		if err != nil || d.Allowed || d.RetryAfter != 11*time.Second {
			t.Fatalf("check in debt: %+v, %v; want a retry after 11s", d, err)
		}
		clock.Advance(11*time.Second - time.Millisecond)
		check("before a token refilled", false)
		clock.Advance(time.Millisecond)
		check("once a token refilled", true)
		check("checks take nothing", true)
	})
}

package envoyrls_test

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/redis/redistest"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// Envoy's token-quota pattern: a check with hits_addend 0 before the call,
// the tokens used debited (the descriptor's own hits_addend) after it. The
// check is OK while the bucket holds a whole unit and consumes nothing; a
// debit the bucket cannot give is charged anyway, into debt, so that the
// next check is over until the bucket has refilled a unit. The same in
// memory and on Redis, where a denial is one round trip.
func TestZeroCostCheckThenDebit(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			clock := limitertest.NewClock(limitertest.Start)
			opts := []envoyrls.Option{envoyrls.WithClock(clock)}
			var calls *callCounter
			if backend == "redis" {
				b, cc := countedRedisBackend(t, redistest.Start(t).Addr, clock, "check")
				opts, calls = append(opts, envoyrls.WithBackend(b)), cc
			}
			c := serve(t, envoyrls.New(load(t, "api.yaml", twoLimits), opts...)) // ten: 10 a minute
			check := func(what string, want rlsv3.RateLimitResponse_Code, left uint32) *rlsv3.RateLimitResponse {
				t.Helper()
				r := ask(t, c, "api", hits(desc("ten", "ai"), 0))
				if r.OverallCode != want || r.Statuses[0].Code != want || r.Statuses[0].LimitRemaining != left {
					t.Fatalf("%s: %v, want %v with %d left", what, r, want, left)
				}
				return r
			}
			debit := func(n uint64) *rlsv3.RateLimitResponse {
				return ask(t, c, "api", hits(desc("ten", "ai"), n))
			}
			check("full", ok, 10)
			if r := debit(10); r.OverallCode != ok || r.Statuses[0].LimitRemaining != 0 {
				t.Fatalf("debit 10 of 10: %v", r)
			}
			// Exhausted by a counted hit: the check is over, for the 6 s a
			// unit takes to refill, and consumes nothing.
			r := check("exhausted", over, 0)
			if got := r.Statuses[0].DurationUntilReset.AsDuration(); got != 6*time.Second {
				t.Fatalf("check on an empty bucket: duration_until_reset %v, want 6s", got)
			}
			clock.Advance(6 * time.Second)
			check("a unit refilled", ok, 1)
			check("checks consume nothing", ok, 1)
			// 25 tokens used with 1 left: charged in full, 24 owed. The
			// next check waits for the debt and one unit: 25 × 6 s.
			var before int64
			if calls != nil {
				before = calls.n.Load()
			}
			if r := debit(25); r.OverallCode != over || r.Statuses[0].LimitRemaining != 1 {
				t.Fatalf("debit 25 with 1 left: %v", r)
			}
			if calls != nil {
				if got := calls.n.Load() - before; got != 2 {
					t.Errorf("a denied debit made %d Redis calls, want 2 (the decision, the charge)", got)
				}
			}
			before = 0
			if calls != nil {
				before = calls.n.Load()
			}
			r = check("in debt", over, 0)
			if calls != nil {
				if got := calls.n.Load() - before; got != 1 {
					t.Errorf("a denied check made %d Redis calls, want 1", got)
				}
			}
			if got := r.Statuses[0].DurationUntilReset.AsDuration(); got != 150*time.Second {
				t.Fatalf("check in debt: duration_until_reset %v, want 150s", got)
			}
			clock.Advance(150*time.Second - time.Microsecond)
			check("1 µs early", over, 0)
			clock.Advance(time.Microsecond)
			check("refilled", ok, 1)
			// A request-level hits_addend stays all or nothing: denied, it
			// consumes nothing.
			r = askReq(t, c, &rlsv3.RateLimitRequest{Domain: "api", HitsAddend: 5, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("ten", "ai")}})
			if r.OverallCode != over {
				t.Fatalf("request hits 5 with 1 left: %v", r)
			}
			check("after a denied request", ok, 1)
		})
	}
}

package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// Reserve and Reconcile through Redis: the estimate is taken in the one
// decision round trip, the difference settled by Adjust.
func TestReserveReconcileThroughRedis(t *testing.T) {
	srv := startRedis(t)
	client, rt := newClient(t, srv.Addr)
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock),
		sluiceredis.WithKeyPrefix(uniquePrefix("reserve")), sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cfg := stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "per-model-tpm", DimensionKeys: []string{"qualifiedModelId"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"qualifiedModelId": "*"}, Tokens: []stack.Rate{{Rate: 50, Period: "minute"}}}}},
		{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 100, Period: "minute"}}}}},
	}}
	s, err := stack.New(cfg, stack.WithClock(clock), stack.WithBackend(b), stack.WithFailClosed())
	if err != nil {
		t.Fatal(err)
	}
	keys := sluice.NewKeys("qualifiedModelId", "m", "caller", "alice")
	reserve := func(n int) (sluice.Reservation, sluice.Decision) {
		t.Helper()
		r, d, err := s.Reserve(context.Background(), keys, n)
		if err != nil {
			t.Fatal(err)
		}
		return r, d
	}
	if _, d := reserve(51); d.Allowed || !d.Permanent {
		t.Fatalf("estimate 51 over a limit of 50: %+v", d)
	}
	before := rt.n.Load()
	r, d := reserve(40)
	if !d.Allowed {
		t.Fatalf("40 of 50: %+v", d)
	}
	if got := rt.n.Load() - before; got != 1 {
		t.Errorf("Reserve took %d round trips, want 1", got)
	}
	if err := r.Reconcile(10); err != nil { // 30 back
		t.Fatal(err)
	}
	r, d = reserve(40)
	if !d.Allowed {
		t.Fatalf("after an underrun of 30: %+v", d)
	}
	if err := r.Reconcile(80); err != nil { // 40 into debt
		t.Fatal(err)
	}
	_, d = reserve(1)
	if d.Allowed || d.RetryAfter < 49*time.Second || d.RetryAfter > 50*time.Second {
		t.Errorf("after an overrun of 40: %+v, want RetryAfter ≈ 49.2s", d)
	}
	clock.Advance(d.RetryAfter)
	r, d = reserve(1)
	if !d.Allowed {
		t.Fatalf("after RetryAfter: %+v", d)
	}
	r.Cancel()
	if _, d := reserve(1); !d.Allowed {
		t.Errorf("Cancel did not give the unit back: %+v", d)
	}
}

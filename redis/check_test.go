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

// The zero-cost check on Redis follows package bucket's rule (see stack's
// TestZeroCostCheckThenDebit): it passes while the bucket holds a whole
// token, takes nothing, and after a debit into debt is over until a token
// has refilled, with the same RetryAfter as in memory.
func TestZeroCostCheckThenDebitOnRedis(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock),
		sluiceredis.WithKeyPrefix(uniquePrefix("check")), sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cfg := stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "tpm", DimensionKeys: []string{"qualifiedModelId"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"qualifiedModelId": "*"}, Tokens: []stack.Rate{{Rate: 60, Period: "minute"}}}}},
		{RateLimitID: "rpm", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 100, Period: "minute"}}}}},
	}}
	s, err := stack.New(cfg, stack.WithClock(clock), stack.WithBackend(b), stack.WithFailClosed())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := sluice.NewKeys("qualifiedModelId", "m", "caller", "alice")
	check := func(what string, want bool) sluice.Decision {
		t.Helper()
		d, err := s.AllowAt(ctx, clock.Now(), keys, 0)
		if err != nil || d.Allowed != want {
			t.Fatalf("%s: check %+v, %v; want allowed=%v", what, d, err, want)
		}
		return d
	}
	check("full", true)
	r, d, err := s.Reserve(ctx, keys, 0)
	if err != nil || !d.Allowed {
		t.Fatalf("reserve 0: %+v, %v", d, err)
	}
	if err := r.Reconcile(70); err != nil {
		t.Fatal(err)
	}
	if d := check("in debt", false); d.RetryAfter != 11*time.Second {
		t.Fatalf("check in debt: retry after %v, want 11s", d.RetryAfter)
	}
	clock.Advance(11*time.Second - time.Millisecond)
	check("before a token refilled", false)
	clock.Advance(time.Millisecond)
	check("once a token refilled", true)
	check("checks take nothing", true)
	// The check of a bucket emptied exactly (no debt) is over too.
	if _, d, _ := s.Reserve(ctx, keys, 1); !d.Allowed {
		t.Fatalf("take the last token: %+v", d)
	}
	if d := check("empty", false); d.RetryAfter != time.Second {
		t.Fatalf("check on an empty bucket: retry after %v, want 1s", d.RetryAfter)
	}
}

// A shadow op that cannot pass reports what its bucket holds (nothing is
// taken), as in memory, on the script's fast path (its stored parameters)
// and on its general path (parameters that changed), so that a caller can
// tell how far over the limit a shadow rule was.
func TestShadowDeniedReportsHeld(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	clock := limitertest.NewClock(limitertest.Start)
	rb, err := sluiceredis.New(client, sluiceredis.WithClock(clock),
		sluiceredis.WithKeyPrefix(uniquePrefix("shadowheld")), sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, be := range []struct {
		name string
		b    stack.Backend
	}{{"memory", stack.NewMemoryBackend()}, {"redis", rb}} {
		at := clock.Now()
		shadow := stack.Op{Key: "s", Rate: 10, Period: time.Hour, Burst: 10, Cost: 8, Shadow: true}
		other := stack.Op{Key: "o", Rate: 100, Period: time.Hour, Burst: 100, Cost: 1}
		if out, err := be.b.Take(ctx, at, []stack.Op{shadow, other}); err != nil || len(out.ShadowDenied) != 0 || out.Remaining[0] != 2 {
			t.Fatalf("%s: first take %+v, %v; want remaining 2", be.name, out, err)
		}
		shadow.Cost = 3 // 2 held
		out, err := be.b.Take(ctx, at, []stack.Op{shadow, other})
		if err != nil || out.Denied != -1 || len(out.ShadowDenied) != 1 || out.Remaining[0] != 2 || out.Remaining[1] != 98 {
			t.Fatalf("%s: shadow over %+v, %v; want shadow denied, remaining [2 98]", be.name, out, err)
		}
		shadow.Rate, shadow.Burst = 20, 20 // new parameters (the general path on Redis): still 2 held
		shadow.Cost = 3
		out, err = be.b.Take(ctx, at, []stack.Op{shadow, other})
		if err != nil || out.Denied != -1 || len(out.ShadowDenied) != 1 || out.Remaining[0] != 2 {
			t.Fatalf("%s: shadow over after a new burst %+v, %v; want shadow denied, remaining 2", be.name, out, err)
		}
	}
}

package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// The fleet's remaining gaps of issue #21, item 4, each against a real
// redis-server that the test stops and restarts. Time is a fake clock
// (WithClock), which the backend's probe interval and rejoin period follow
// too: the only real wait is for the server to come up (until it answers
// PING).

const (
	gapProbe = 50 * time.Millisecond
	// gapTimeout makes the rejoin period 4·(probe + timeout), over 4 s of
	// the fake clock: no test's checks reach its end (a stopped server
	// refuses connections at once: nothing waits on the timeout).
	gapTimeout = time.Second
)

// gapBackend is a Backend with a local fallback of half of each limit, on
// its own client (dialling fails fast while the server is down).
func gapBackend(t *testing.T, addr, name string, clock *limitertest.Clock) *sluiceredis.Backend {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 50 * time.Millisecond, DialerRetries: 1})
	t.Cleanup(func() { client.Close() })
	b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(uniquePrefix(name)), sluiceredis.WithClock(clock),
		sluiceredis.WithTimeout(gapTimeout), sluiceredis.WithProbeInterval(gapProbe), sluiceredis.WithLocalFallback(0.5),
		// These tests need every decision to reach Redis, so that the
		// outage is seen; a cached denial would answer without a call.
		sluiceredis.WithoutDenialCache())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gapOp is one unit of a 10/s, burst 10 bucket: 5/s, burst 5, in the
// fallback.
func gapOp(key string, cost int64) stack.Op {
	return stack.Op{Key: key, Rate: 10, Period: time.Second, Burst: 10, Cost: cost}
}

// admitCount takes one unit of key at the clock's instant until denied,
// and returns how many were admitted (at most limit, then it fails).
func admitCount(t *testing.T, b *sluiceredis.Backend, clock *limitertest.Clock, key string, limit int) int {
	t.Helper()
	for n := 0; ; n++ {
		out, err := b.Take(context.Background(), clock.Now(), []stack.Op{gapOp(key, 1)})
		if err != nil {
			t.Fatalf("take %d of %s: %v", n, key, err)
		}
		if out.Denied >= 0 {
			return n
		}
		if n == limit {
			t.Fatalf("%s admitted more than %d at one instant", key, limit)
		}
	}
}

// restart starts the stopped server again (it answers PING) and steps the
// clock over the probe interval, so that the next decision probes it.
func restart(t *testing.T, srv interface {
	Restart(testing.TB)
}, clock *limitertest.Clock) {
	t.Helper()
	srv.Restart(t)
	clock.Advance(gapProbe)
}

// (a) A give-back while Redis is down returns to the local bucket no unit
// it did not take: the give-back of a take made in Redis before the
// outage adds nothing locally (and is not owed away: Redis is charged for
// every unit the fallback admitted), and a give-back of a local take
// returns it, exactly.
func TestGiveBackDuringOutageAddsNoLocalUnits(t *testing.T) {
	srv := startRedis(t)
	if srv.External {
		t.Skip("SLUICE_REDIS_ADDR is set: this test must stop its own server")
	}
	ctx := context.Background()
	clock := limitertest.NewClock(limitertest.Start)
	b := gapBackend(t, srv.Addr, "outage-giveback", clock)

	redisTake := clock.Now()
	if out, err := b.Take(ctx, redisTake, []stack.Op{gapOp("k", 4)}); err != nil || out.Denied != -1 {
		t.Fatalf("a take of 4 in Redis: %+v, %v", out, err)
	}
	clock.Advance(100 * time.Millisecond)
	srv.Stop()
	// The fallback begins: its bucket is empty now and gets 5/s.
	if n := admitCount(t, b, clock, "k", 10); n != 0 {
		t.Fatalf("a new local bucket admitted %d", n)
	}
	clock.Advance(time.Second)
	if n := admitCount(t, b, clock, "k", 10); n != 5 {
		t.Fatalf("local bucket after a second at 5/s: %d admitted, want 5", n)
	}
	// The Redis take's give-back: the local bucket never held those units.
	back := gapOp("k", -4)
	back.TakenAt = redisTake
	if err := b.Adjust(ctx, clock.Now(), []stack.Op{back}); err != nil {
		t.Fatal(err)
	}
	if n := admitCount(t, b, clock, "k", 10); n != 0 {
		t.Errorf("a give-back of a take made in Redis before the outage let %d more through the local bucket", n)
	}
	// A local take's give-back: exactly its unit.
	back = gapOp("k", -1)
	back.TakenAt = clock.Now()
	if err := b.Adjust(ctx, clock.Now(), []stack.Op{back}); err != nil {
		t.Fatal(err)
	}
	if n := admitCount(t, b, clock, "k", 10); n != 1 {
		t.Errorf("a give-back of a local unit let %d through, want exactly 1", n)
	}

	// Redis comes back empty (no persistence): the probe charges it with
	// the 5 units the fallback admitted, so 5 of 10 are left.
	restart(t, srv, clock)
	probe := gapOp("k", 0)
	probe.Shadow = true // the local bound is empty: its check is over, reported
	out, err := b.Take(ctx, clock.Now(), []stack.Op{probe})
	if err != nil || out.Denied != -1 {
		t.Fatalf("first decision after Redis returned: %+v, %v", out, err)
	}
	if out.Remaining[0] != 5 {
		t.Errorf("Redis holds %d after the fallback's payment, want 5 (10 less the 5 admitted locally)", out.Remaining[0])
	}
}

// (b) After an outage, a bucket this process never decided locally does
// not deny in the rejoin period while the process stays within its share:
// its local bound holds what the share refilled since the outage began,
// not nothing. Beyond the share it still denies: switching creates no
// token.
func TestNoSpuriousDenialsAfterRejoin(t *testing.T) {
	srv := startRedis(t)
	if srv.External {
		t.Skip("SLUICE_REDIS_ADDR is set: this test must stop its own server")
	}
	ctx := context.Background()
	clock := limitertest.NewClock(limitertest.Start)
	b := gapBackend(t, srv.Addr, "rejoin", clock)
	if n := admitCount(t, b, clock, "seen", 20); n != 10 {
		t.Fatalf("Redis admitted %d of a full bucket of 10", n)
	}
	srv.Stop()
	if n := admitCount(t, b, clock, "seen", 10); n != 0 { // the fallback begins, empty
		t.Fatalf("a new local bucket admitted %d", n)
	}
	clock.Advance(2 * time.Second)
	restart(t, srv, clock)
	// The first decision probes Redis (empty after the restart) and begins
	// the rejoin period; "fresh" was never decided locally.
	out, err := b.Take(ctx, clock.Now(), []stack.Op{gapOp("fresh", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Denied >= 0 {
		t.Fatalf("the first decision on a bucket with no local history after the outage was denied: %+v", out)
	}
	// 4 more fit in the share (5/s, burst 5, since the outage began);
	// then the rejoin bound denies, though Redis would admit 5 more.
	if n := admitCount(t, b, clock, "fresh", 10); n != 4 {
		t.Errorf("rejoin period: %d more admitted on a fresh bucket, want 4 (its share: 5 in all)", n)
	}
	// The bucket used during the outage keeps its own bound: 5 at 5/s
	// over the 2 s, capped at the share's burst.
	if n := admitCount(t, b, clock, "seen", 10); n != 5 {
		t.Errorf("rejoin period: %d admitted on the bucket decided locally, want 5", n)
	}
}

// (c) A payment of the fallback's debts that Redis refuses with an error
// reply (here a key holding something that is not a bucket), not an
// outage, answers the probe but pays nothing for that key: the other debts
// are paid, the refused one stays owed and is paid once Redis accepts it;
// a debt refused again and again is dropped after a bounded number of
// tries and reported with a *PaymentError.
func TestRefusedPaymentStaysOwed(t *testing.T) {
	srv := startRedis(t)
	if srv.External {
		t.Skip("SLUICE_REDIS_ADDR is set: this test must stop its own server")
	}
	ctx := context.Background()
	clock := limitertest.NewClock(limitertest.Start)
	b := gapBackend(t, srv.Addr, "refused", clock)

	srv.Stop()
	for _, k := range []string{"k1", "k2", "k5"} {
		if n := admitCount(t, b, clock, k, 10); n != 0 { // the fallback begins, empty
			t.Fatalf("a new local bucket %s admitted %d", k, n)
		}
	}
	clock.Advance(time.Second)
	for _, take := range []struct {
		key string
		n   int
	}{{"k1", 3}, {"k2", 3}, {"k5", 1}} {
		for range take.n {
			if out, err := b.Take(ctx, clock.Now(), []stack.Op{gapOp(take.key, 1)}); err != nil || out.Denied != -1 {
				t.Fatalf("local take of %s: %+v, %v", take.key, out, err)
			}
		}
	}
	srv.Restart(t)
	check, _ := newClient(t, srv.Addr)
	for _, k := range []string{"k1", "k5"} {
		if err := check.Set(ctx, b.KeyPrefix()+k, "not a bucket", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(gapProbe) // the next decision probes
	// The probe: k2's 3 are paid, k1's and k5's refused (twice: by the
	// probe and by the payment that begins the rejoin period).
	if out, err := b.Take(ctx, clock.Now(), []stack.Op{gapOp("k3", 0)}); err != nil || out.Denied != -1 {
		t.Fatalf("decision after Redis returned: %+v, %v", out, err)
	}
	if v := check.Get(ctx, b.KeyPrefix()+"k2").Val(); v == "" {
		t.Fatal("k2's debt was not paid: Redis holds no state for it")
	} else if f := storedBucket(t, v); f[5] != 7*100000 {
		t.Errorf("k2 after the payment holds %v ticks, want 7 tokens (700000)", f[5])
	}
	// k1's key is fixed; k5's stays bad. Redis fails again (the decision
	// on k9 is local) and returns: the probe pays k1's debt, and k5's,
	// refused a third time, is dropped and reported.
	if err := check.Del(ctx, b.KeyPrefix()+"k1").Err(); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if _, err := b.Take(ctx, clock.Now(), []stack.Op{gapOp("k9", 1)}); err != nil {
		t.Fatal(err)
	}
	srv.Restart(t)
	check, _ = newClient(t, srv.Addr)
	if err := check.Set(ctx, b.KeyPrefix()+"k5", "not a bucket", 0).Err(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(gapProbe) // the next decision probes
	out, err := b.Take(ctx, clock.Now(), []stack.Op{gapOp("k3", 0)})
	if err != nil {
		t.Fatal(err)
	}
	v, err := check.Get(ctx, b.KeyPrefix()+"k1").Result()
	if err != nil {
		t.Fatalf("k1 after the second outage: %v (its refused debt was never paid)", err)
	}
	if f := storedBucket(t, v); f[5] != 7*100000 {
		t.Errorf("k1 after its debt was paid holds %v ticks, want 7 tokens (700000)", f[5])
	}
	var pe *sluiceredis.PaymentError
	for _, n := range out.Notices {
		if errors.As(n, &pe) {
			break
		}
	}
	if pe == nil || len(pe.Keys) != 1 || pe.Keys[0] != "k5" || pe.Units != 1 {
		t.Errorf("notices %v: want a PaymentError dropping k5's 1 unit", out.Notices)
	}
}

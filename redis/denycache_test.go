package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/racecheck"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// denyOp is one unit of a 10/s, burst 10 bucket.
func denyOp(key string, cost int64) stack.Op {
	return stack.Op{Key: key, Rate: 10, Period: time.Second, Burst: 10, Cost: cost}
}

// TestDenialCacheAnswersUntilRetryAfter: once Redis denies a bucket, this
// process answers its denials without a call, with the RetryAfter the
// script gives at each instant (a twin backend without the cache asks it),
// and the first decision at RetryAfter goes to Redis and is admitted.
func TestDenialCacheAnswersUntilRetryAfter(t *testing.T) {
	srv := startRedis(t)
	client, rt := newClient(t, srv.Addr)
	clock := limitertest.NewClock(limitertest.Start)
	prefix := uniquePrefix("deny")
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	twin, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(prefix),
		sluiceredis.WithTimeout(5*time.Second), sluiceredis.WithoutDenialCache())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ops := []stack.Op{denyOp("k", 1)}
	for i := range 10 {
		if out, err := b.Take(ctx, clock.Now(), ops); err != nil || out.Denied != -1 {
			t.Fatalf("take %d of a full bucket of 10: %+v, %v", i, out, err)
		}
	}
	first, err := b.Take(ctx, clock.Now(), ops)
	if err != nil || first.Denied != 0 || first.RetryAfter != 100*time.Millisecond {
		t.Fatalf("the 11th take: %+v, %v; want denied with RetryAfter 100ms", first, err)
	}
	calls := rt.n.Load()
	for step := range 99 {
		out, err := b.Take(ctx, clock.Now(), ops)
		if err != nil {
			t.Fatal(err)
		}
		want, err := twin.Take(ctx, clock.Now(), ops)
		if err != nil {
			t.Fatal(err)
		}
		if out.Denied != want.Denied || out.RetryAfter != want.RetryAfter || out.Permanent || out.OverBurst {
			t.Fatalf("step %d: cached %+v, the script %+v", step, out, want)
		}
		if want.RetryAfter != 100*time.Millisecond-time.Duration(step)*time.Millisecond {
			t.Fatalf("step %d: the script says %v", step, want.RetryAfter)
		}
		clock.Advance(time.Millisecond)
	}
	if got := rt.n.Load() - calls; got != 99 { // the twin's calls only
		t.Errorf("99 cached denials made %d calls besides the twin's 99", got-99)
	}
	if hits, _ := b.DenialCacheStats(); hits != 99 {
		t.Errorf("DenialCacheStats hits = %d, want 99", hits)
	}
	clock.Advance(time.Millisecond) // RetryAfter has passed
	calls = rt.n.Load()
	if out, err := b.Take(ctx, clock.Now(), ops); err != nil || out.Denied != -1 {
		t.Fatalf("at RetryAfter: %+v, %v; want admitted", out, err)
	}
	if rt.n.Load() == calls {
		t.Error("the decision at RetryAfter made no call")
	}
}

// TestDenialCacheDropsOnChange: a give-back from this process, a take of
// the same bucket with another cost that Redis admits, and a changed limit
// each make the next decision ask Redis.
func TestDenialCacheDropsOnChange(t *testing.T) {
	srv := startRedis(t)
	client, rt := newClient(t, srv.Addr)
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(uniquePrefix("drop")), sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	take := func(op stack.Op) (stack.Outcome, bool) {
		t.Helper()
		before := rt.n.Load()
		out, err := b.Take(ctx, clock.Now(), []stack.Op{op})
		if err != nil {
			t.Fatal(err)
		}
		return out, rt.n.Load() != before
	}
	drain := func(key string) time.Time {
		for range 10 {
			take(denyOp(key, 1))
		}
		at := clock.Now()
		if out, called := take(denyOp(key, 2)); out.Denied != 0 || !called {
			t.Fatalf("a cost of 2 on an empty bucket: %+v, called %v", out, called)
		}
		if out, called := take(denyOp(key, 2)); out.Denied != 0 || called {
			t.Fatalf("the same denial again: %+v, called %v; want cached", out, called)
		}
		return at
	}

	// A give-back of a unit taken now: the bucket admits a cost of 1 at once.
	drain("give")
	back := denyOp("give", -1)
	back.TakenAt = clock.Now()
	if err := b.Adjust(ctx, clock.Now(), []stack.Op{back}); err != nil {
		t.Fatal(err)
	}
	if out, called := take(denyOp("give", 1)); out.Denied != -1 || !called {
		t.Errorf("after a give-back: %+v, called %v; want admitted by Redis", out, called)
	}

	// Another cost is not answered from the entry of cost 2.
	drain("cost")
	clock.Advance(100 * time.Millisecond) // one unit refilled
	if out, called := take(denyOp("cost", 1)); out.Denied != -1 || !called {
		t.Errorf("a cost of 1 after 100ms: %+v, called %v; want admitted by Redis", out, called)
	}

	// A reload that raises the burst: the old entry does not answer.
	drain("reload")
	bigger := denyOp("reload", 2)
	bigger.Burst = 20
	if _, called := take(bigger); !called {
		t.Error("an op with another burst was answered from the old entry")
	}
	// And the bucket under the old limit is asked again too.
	if _, called := take(denyOp("reload", 2)); !called {
		t.Error("after a call with another burst, the old entry still answered")
	}
}

// TestDenialCacheDeniesThroughAnOutage: while Redis is down, a cached
// denial still denies until its RetryAfter; after it, the failure policy
// decides (here, no fallback: ErrUnavailable).
func TestDenialCacheDeniesThroughAnOutage(t *testing.T) {
	srv := startRedis(t)
	if srv.External {
		t.Skip("SLUICE_REDIS_ADDR is set: this test must stop its own server")
	}
	clock := limitertest.NewClock(limitertest.Start)
	b := func() *sluiceredis.Backend {
		client, _ := newClient(t, srv.Addr)
		b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(uniquePrefix("outage")),
			sluiceredis.WithTimeout(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}()
	ctx := context.Background()
	ops := []stack.Op{denyOp("k", 1)}
	for range 11 {
		if _, err := b.Take(ctx, clock.Now(), ops); err != nil {
			t.Fatal(err)
		}
	}
	srv.Stop()
	for range 99 {
		out, err := b.Take(ctx, clock.Now(), ops)
		if err != nil || out.Denied != 0 {
			t.Fatalf("a cached denial with Redis down: %+v, %v", out, err)
		}
		clock.Advance(time.Millisecond)
	}
	clock.Advance(time.Millisecond)
	if _, err := b.Take(ctx, clock.Now(), ops); !errors.Is(err, sluiceredis.ErrUnavailable) {
		t.Errorf("after RetryAfter with Redis down: %v, want ErrUnavailable", err)
	}
}

// TestDenialCacheIsTheScript is the near-cache's linearizability form for
// one process: a seeded sequence of takes (one to three buckets, shadow
// ops, several costs, changing bursts), give-backs and clock steps on a
// real redis-server; after every decision the cache answered, a twin
// backend without the cache asks the script the same at the same instant
// (a denial takes nothing), and the two must be the same denial.
func TestDenialCacheIsTheScript(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	ctx := context.Background()
	seeds := 20
	if testing.Short() || racecheck.Enabled {
		seeds = 6
	}
	totalHits := int64(0)
	for seed := range seeds {
		clock := limitertest.NewClock(limitertest.Start)
		prefix := uniquePrefix(fmt.Sprint("lin", seed))
		b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		twin, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(prefix),
			sluiceredis.WithTimeout(5*time.Second), sluiceredis.WithoutDenialCache())
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(seed), 39))
		keys := []string{"a", "b", "c"}
		op := func() stack.Op {
			o := stack.Op{Key: keys[rng.IntN(len(keys))], Rate: 5, Period: time.Second, Burst: 4, Cost: 1 + rng.Int64N(2)}
			if rng.IntN(10) == 0 {
				o.Burst = 6 // a reload
			}
			if rng.IntN(8) == 0 {
				o.Shadow = true
			}
			return o
		}
		type took struct {
			op stack.Op
			at time.Time
		}
		var takes []took
		for step := range 400 {
			switch r := rng.IntN(20); {
			case r < 3:
				clock.Advance(time.Duration(rng.IntN(80)) * time.Millisecond)
			case r == 3 && len(takes) > 0:
				tk := takes[rng.IntN(len(takes))]
				back := tk.op
				back.Cost, back.TakenAt, back.Shadow = -back.Cost, tk.at, false
				if err := b.Adjust(ctx, clock.Now(), []stack.Op{back}); err != nil {
					t.Fatal(err)
				}
			default:
				ops := []stack.Op{op()}
				for rng.IntN(3) == 0 && len(ops) < 3 {
					ops = append(ops, op())
				}
				h0, _ := b.DenialCacheStats()
				out, err := b.Take(ctx, clock.Now(), ops)
				if err != nil {
					t.Fatal(err)
				}
				if h1, _ := b.DenialCacheStats(); h1 != h0 {
					totalHits++
					want, err := twin.Take(ctx, clock.Now(), ops)
					if err != nil {
						t.Fatal(err)
					}
					if out.Denied != want.Denied || out.RetryAfter != want.RetryAfter || out.Permanent != want.Permanent ||
						out.OverBurst != want.OverBurst || !slices.Equal(out.ShadowDenied, want.ShadowDenied) {
						t.Fatalf("seed %d step %d, ops %+v: cached %+v, the script %+v", seed, step, ops, out, want)
					}
				} else if out.Denied < 0 {
					for i, o := range ops {
						if !slices.Contains(out.ShadowDenied, i) {
							takes = append(takes, took{o, clock.Now()})
						}
					}
				}
			}
		}
	}
	if totalHits < 100 {
		t.Errorf("only %d cached denials were checked", totalHits)
	}
	t.Logf("%d cached denials checked against the script", totalHits)
}

// TestDenialCacheBounded: a cache of a few KiB holds a bounded number of
// entries, evicting (counted) to make room.
func TestDenialCacheBounded(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(uniquePrefix("bound")),
		sluiceredis.WithTimeout(5*time.Second), sluiceredis.WithDenialCache(16<<10))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 1000 {
		op := stack.Op{Key: fmt.Sprint("key-", i), Rate: 1, Period: time.Second, Burst: 1, Cost: 2} // never fits: permanent
		op.Cost = 1
		for range 2 {
			if _, err := b.Take(ctx, clock.Now(), []stack.Op{op}); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, bytes := sluiceredis.DenialCacheSize(b)
	if bytes > 16<<10 || n == 0 || n > 16<<10/96 {
		t.Errorf("%d entries, %d bytes in a cache of 16 KiB", n, bytes)
	}
	if _, ev := b.DenialCacheStats(); ev == 0 {
		t.Error("1000 denials in a 16 KiB cache evicted nothing")
	}
}

// TestDenialCacheHitAllocations: a decision answered from the cache
// allocates nothing.
func TestDenialCacheHitAllocations(t *testing.T) {
	if racecheck.Enabled || testing.CoverMode() != "" {
		t.Skip("allocation counts differ under -race and -cover")
	}
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(uniquePrefix("allochit")))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ops := []stack.Op{{Key: "k", Rate: 1, Period: time.Hour, Burst: 1, Cost: 1}}
	for range 2 {
		if _, err := b.Take(ctx, time.Time{}, ops); err != nil {
			t.Fatal(err)
		}
	}
	got := testing.AllocsPerRun(200, func() {
		out, err := b.Take(ctx, time.Time{}, ops)
		if err != nil || out.Denied != 0 {
			t.Fatalf("%+v, %v", out, err)
		}
	})
	if hits, _ := b.DenialCacheStats(); hits < 200 {
		t.Fatalf("%d hits", hits)
	}
	if got != 0 {
		t.Errorf("%.1f allocations per cached denial, want 0", got)
	}
}

// TestDenialCacheServerTime: on the server's TIME (no WithClock) a cached
// denial is never early against the script's: asked right after, the
// script's RetryAfter is at most the cached one, and less only by the time
// between the two (bounded here by a generous 1 s).
func TestDenialCacheServerTime(t *testing.T) {
	srv := startRedis(t)
	client, rt := newClient(t, srv.Addr)
	prefix := uniquePrefix("servertime")
	b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	twin, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithTimeout(5*time.Second), sluiceredis.WithoutDenialCache())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ops := []stack.Op{{Key: "k", Rate: 1, Period: time.Hour, Burst: 2, Cost: 1}}
	for range 3 {
		if _, err := b.Take(ctx, time.Time{}, ops); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		before := rt.n.Load()
		out, err := b.Take(ctx, time.Time{}, ops)
		if err != nil || out.Denied != 0 || rt.n.Load() != before {
			t.Fatalf("%+v, %v, calls %d: want a cached denial", out, err, rt.n.Load()-before)
		}
		want, err := twin.Take(ctx, time.Time{}, ops)
		if err != nil || want.Denied != 0 {
			t.Fatal(want, err)
		}
		if out.RetryAfter < want.RetryAfter || out.RetryAfter-want.RetryAfter > time.Second {
			t.Fatalf("cached RetryAfter %v, the script's right after %v", out.RetryAfter, want.RetryAfter)
		}
	}
}

// TestDenialCacheSingleFlight: 32 goroutines hammering one denied
// bucket whose entry has died (a give-back from this process) ask Redis
// one at a time: one call, then cached answers for all.
func TestDenialCacheSingleFlight(t *testing.T) {
	srv := startRedis(t)
	client, rt := newClient(t, srv.Addr)
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(uniquePrefix("herd")), sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ops := []stack.Op{{Key: "k", Rate: 1, Period: time.Hour, Burst: 1, Cost: 1}}
	for range 2 {
		if _, err := b.Take(ctx, clock.Now(), ops); err != nil {
			t.Fatal(err)
		}
	}
	// A charge (Adjust) kills the entry without making the bucket admit.
	charge := ops[0]
	if err := b.Adjust(ctx, clock.Now(), []stack.Op{charge}); err != nil {
		t.Fatal(err)
	}
	before := rt.n.Load()
	done := make(chan stack.Outcome, 32)
	for range 32 {
		go func() {
			out, err := b.Take(ctx, clock.Now(), ops)
			if err != nil {
				t.Error(err)
			}
			done <- out
		}()
	}
	for range 32 {
		if out := <-done; out.Denied != 0 {
			t.Errorf("%+v, want denied", out)
		}
	}
	if n := rt.n.Load() - before; n != 1 {
		t.Errorf("32 concurrent denials of a dead entry's bucket made %d calls, want 1", n)
	}
}

// TestDenialCacheLetsGoOfAnAdmittingBucket: once a denied bucket has been
// admitted twice by Redis, its entry is gone, so that decisions on a hot
// bucket within its limit no longer ask Redis one at a time.
func TestDenialCacheLetsGoOfAnAdmittingBucket(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(uniquePrefix("letgo")), sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ops := []stack.Op{denyOp("k", 1)}
	for range 11 {
		if _, err := b.Take(ctx, clock.Now(), ops); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := sluiceredis.DenialCacheSize(b); n != 1 {
		t.Fatalf("%d entries after a denial, want 1", n)
	}
	clock.Advance(time.Second) // full again
	for i := range 2 {
		if out, err := b.Take(ctx, clock.Now(), ops); err != nil || out.Denied != -1 {
			t.Fatalf("take %d after a second: %+v, %v", i, out, err)
		}
		n, _ := sluiceredis.DenialCacheSize(b)
		if want := 1 - i; n != want {
			t.Errorf("after %d admissions: %d entries, want %d", i+1, n, want)
		}
	}
}

// TestDenialCacheConcurrentGiveBacks: takes and give-backs of one bucket
// from many goroutines of one process, on a still clock; once they have
// all returned, a decision the cache answers must be the script's own (a
// give-back whose reply came back while a denial was in flight must not
// leave that denial cached).
func TestDenialCacheConcurrentGiveBacks(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	ctx := context.Background()
	checked := 0
	for round := range 30 {
		clock := limitertest.NewClock(limitertest.Start)
		prefix := uniquePrefix(fmt.Sprint("conc", round))
		b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		twin, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(prefix),
			sluiceredis.WithTimeout(5*time.Second), sluiceredis.WithoutDenialCache())
		if err != nil {
			t.Fatal(err)
		}
		op := stack.Op{Key: "k", Rate: 1, Period: time.Hour, Burst: 3, Cost: 1}
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				var held int
				for range 20 {
					if held > 0 && rng.IntN(3) == 0 {
						back := op
						back.Cost, back.TakenAt = -1, clock.Now()
						if err := b.Adjust(ctx, clock.Now(), []stack.Op{back}); err != nil {
							t.Error(err)
							return
						}
						held--
						continue
					}
					out, err := b.Take(ctx, clock.Now(), []stack.Op{op})
					if err != nil {
						t.Error(err)
						return
					}
					if out.Denied < 0 {
						held++
					}
				}
			})
		}
		wg.Wait()
		h0, _ := b.DenialCacheStats()
		out, err := b.Take(ctx, clock.Now(), []stack.Op{op})
		if err != nil {
			t.Fatal(err)
		}
		if h1, _ := b.DenialCacheStats(); h1 == h0 {
			continue
		}
		checked++
		want, err := twin.Take(ctx, clock.Now(), []stack.Op{op})
		if err != nil {
			t.Fatal(err)
		}
		if want.Denied != out.Denied || want.RetryAfter != out.RetryAfter {
			t.Fatalf("round %d: cached %+v after the goroutines, the script %+v", round, out, want)
		}
	}
	t.Logf("%d of 30 rounds ended on a cached denial, each the script's", checked)
}

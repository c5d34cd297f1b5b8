package redis_test

import (
	"context"
	"testing"
	"time"

	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// The probe that ends an outage of a single server, made by a decision
// whose caller has given up (its context is cancelled), still charges what
// was decided locally, or keeps it owed.
func TestFallbackCancelledProbe(t *testing.T) {
	srv := startRedis(t, "--maxmemory-policy", "noeviction") // its own server: its memory limit changes
	client, _ := newClient(t, srv.Addr)
	ctx := context.Background()
	oom := func(on bool) {
		t.Helper()
		mm := "0"
		if on {
			mm = "1"
		}
		if err := client.ConfigSet(ctx, "maxmemory", mm).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Every decision probes while down: each is made a probe interval
	// after the last (the clock moves only when stepped).
	const interval = time.Nanosecond
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithTimeout(2*time.Second),
		sluiceredis.WithProbeInterval(interval),
		sluiceredis.WithLocalFallback(0.5), sluiceredis.WithKeyPrefix(uniquePrefix("cprobe1")))
	if err != nil {
		t.Fatal(err)
	}
	op := stack.Op{Key: "k", Rate: 100, Period: time.Second, Burst: 100, Cost: 1}
	oom(true)
	if out, err := b.Take(ctx, clock.Now(), []stack.Op{op}); err != nil || out.Denied != 0 {
		t.Fatalf("Redis down, empty local bucket: %+v, %v", out, err)
	}
	clock.Advance(time.Second)
	const local = 10
	for i := 0; i < local; i++ {
		if out, err := b.Take(ctx, clock.Now(), []stack.Op{op}); err != nil || out.Denied >= 0 {
			t.Fatalf("local decision %d: %+v, %v", i, out, err)
		}
		clock.Advance(interval)
	}
	oom(false)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, _ = b.Take(cctx, clock.Now(), []stack.Op{op}) // probes Redis with a cancelled context
	probe := op
	probe.Cost = 0
	var out stack.Outcome
	for i := 0; i < 3; i++ { // until Redis decides again
		out, err = b.Take(ctx, clock.Now(), []stack.Op{probe})
	}
	if err != nil || out.Denied >= 0 {
		t.Fatalf("Redis back: %+v, %v", out, err)
	}
	if got, want := out.Remaining[0], int64(100-local); got != want {
		t.Errorf("the bucket in Redis holds %d after %d local decisions were charged, want %d", got, local, want)
	}
}

// A local decision whose caller has given up creates no bucket full: the
// next decision finds it empty, as every new local bucket starts.
func TestFallbackCancelledNewBucket(t *testing.T) {
	srv := startRedis(t, "--maxmemory-policy", "noeviction") // its own server: its memory limit changes
	client, _ := newClient(t, srv.Addr)
	ctx := context.Background()
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithTimeout(2*time.Second),
		sluiceredis.WithProbeInterval(time.Hour), sluiceredis.WithLocalFallback(0.5),
		sluiceredis.WithKeyPrefix(uniquePrefix("cnew1")))
	if err != nil {
		t.Fatal(err)
	}
	op1 := stack.Op{Key: "k1", Rate: 100, Period: time.Second, Burst: 100, Cost: 1}
	op2 := op1
	op2.Key = "k2"
	if err := client.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if out, err := b.Take(ctx, clock.Now(), []stack.Op{op1}); err != nil || out.Denied != 0 {
		t.Fatalf("Redis down, empty local bucket: %+v, %v", out, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Take(cctx, clock.Now(), []stack.Op{op2}); err == nil {
		t.Fatal("a decision with a cancelled context succeeded")
	}
	// The clock stands still: k2's local bucket is empty.
	if out, err := b.Take(ctx, clock.Now(), []stack.Op{op2}); err != nil || out.Denied != 0 {
		t.Errorf("k2's local bucket after a cancelled decision: %+v, %v; want a denial", out, err)
	}
}

// While rejoining, a decision takes locally and then in Redis: a Redis call
// cut short by its caller (who gives up as it starts) gives the local units
// back.
func TestFallbackCancelledRejoinTake(t *testing.T) {
	srv := startRedis(t, "--maxmemory-policy", "noeviction") // its own server: its memory limit changes
	client, _ := newClient(t, srv.Addr)
	hook := &cancelOnScript{}
	client.AddHook(hook)
	admin := node(t, srv.Addr)
	ctx := context.Background()
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithTimeout(2*time.Second),
		sluiceredis.WithProbeInterval(time.Nanosecond), sluiceredis.WithLocalFallback(0.5),
		sluiceredis.WithKeyPrefix(uniquePrefix("crejoin1")))
	if err != nil {
		t.Fatal(err)
	}
	op := stack.Op{Key: "k", Rate: 100, Period: time.Second, Burst: 100, Cost: 10}
	if err := admin.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if out, err := b.Take(ctx, clock.Now(), []stack.Op{op}); err != nil || out.Denied != 0 {
		t.Fatalf("Redis down, empty local bucket: %+v, %v", out, err)
	}
	clock.Advance(time.Second) // the local bucket: 50; a probe is due
	if err := admin.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	probe := op
	probe.Cost = 0
	if out, err := b.Take(ctx, clock.Now(), []stack.Op{probe}); err != nil || out.Denied >= 0 {
		t.Fatalf("Redis back (rejoining): %+v, %v", out, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	hook.arm(cancel)
	_, err = b.Take(cctx, clock.Now(), []stack.Op{op}) // local, then Redis: the caller gives up
	cancel()
	if err == nil {
		t.Fatal("a decision whose caller gave up during its Redis call succeeded")
	}
	all := op
	all.Cost = 50
	if out, err := b.Take(ctx, clock.Now(), []stack.Op{all}); err != nil || out.Denied >= 0 {
		t.Errorf("the local bucket after a failed decision: %+v, %v; want its 50 units", out, err)
	}
}

// The event that Redis decides again, queued by a probe whose caller gave
// up (the decision then fails), reaches the Stack with the next decision.
func TestFallbackEventOfCancelledProbe(t *testing.T) {
	srv := startRedis(t, "--maxmemory-policy", "noeviction") // its own server: its memory limit changes
	client, _ := newClient(t, srv.Addr)
	hook := &cancelOnScript{}
	client.AddHook(hook)
	ctx := context.Background()
	const interval = time.Nanosecond
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithTimeout(2*time.Second),
		sluiceredis.WithProbeInterval(interval), sluiceredis.WithLocalFallback(0.5),
		sluiceredis.WithKeyPrefix(uniquePrefix("cevent1")))
	if err != nil {
		t.Fatal(err)
	}
	var heard []*stack.FallbackError
	take := func(ctx context.Context, op stack.Op) error {
		out, err := b.Take(ctx, clock.Now(), []stack.Op{op})
		if err == nil { // the Stack hears only the error of a failed decision
			for _, n := range out.Notices {
				if fe, ok := n.(*stack.FallbackError); ok {
					heard = append(heard, fe)
				}
			}
		}
		return err
	}
	op := stack.Op{Key: "k", Rate: 100, Period: time.Second, Burst: 100, Cost: 1}
	if err := client.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := take(ctx, op); err != nil {
		t.Fatal(err)
	}
	if err := client.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(interval) // the next decision probes
	cctx, cancel := context.WithCancel(ctx)
	hook.arm(cancel) // the caller gives up as the probe starts: the probe still pays, and succeeds
	if err := take(cctx, op); err == nil {
		t.Fatal("a decision whose caller gave up succeeded")
	}
	if err := take(ctx, op); err != nil {
		t.Fatal(err)
	}
	if len(heard) != 2 || !heard[0].Active || heard[1].Active {
		t.Errorf("heard %v, want the fallback entered and then left", heard)
	}
}

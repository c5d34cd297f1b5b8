package redis_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucketkey"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// TestClusterNodeFallbackFaults makes one master of a three-master cluster
// refuse writes (maxmemory 1: OOM) and accept them again, under a
// per-master local fallback, to check what a probe and a failed decision
// do with the fallback's debt and events.
func TestClusterNodeFallbackFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	addrs, _ := startCluster(t, 3, 0, "--cluster-require-full-coverage", "no")
	client, _ := newClusterClient(t, addrs)
	ctx := context.Background()
	masters := clusterMasters(t, client, 3)
	nA, nB := masters[0], masters[1]
	adminB := node(t, nB)
	oom := func(on bool) {
		t.Helper()
		mm := "0"
		if on {
			mm = "1"
			if err := adminB.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := adminB.ConfigSet(ctx, "maxmemory", mm).Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = adminB.ConfigSet(ctx, "maxmemory", "0").Err() })

	// A probe made by a decision whose caller has given up (its context is
	// cancelled) still charges what was decided locally, or keeps it owed:
	// the debt is the backend's, not the caller's.
	t.Run("cancelledProbe", func(t *testing.T) {
		// Every decision on B after the first probes: each is made a probe
		// interval after the last (the clock moves only when stepped).
		const interval = time.Nanosecond
		clock := limitertest.NewClock(limitertest.Start)
		b, err := sluiceredis.New(client, sluiceredis.WithSpread(), sluiceredis.WithClock(clock),
			sluiceredis.WithTimeout(2*time.Second), sluiceredis.WithProbeInterval(interval),
			sluiceredis.WithLocalFallback(0.5), sluiceredis.WithKeyPrefix(uniquePrefix("cprobe")))
		if err != nil {
			t.Fatal(err)
		}
		kB := keyOn(t, client, b, nB)
		opB := stack.Op{Key: kB, Rate: 100, Period: time.Second, Burst: 100, Cost: 1}
		oom(true)
		defer oom(false)
		// B fails: its local bucket starts empty; a second gives it 50.
		if out, err := b.Take(ctx, clock.Now(), []stack.Op{opB}); err != nil || out.Denied != 0 {
			t.Fatalf("B down, empty local bucket: %+v, %v", out, err)
		}
		clock.Advance(time.Second)
		const local = 10
		for i := 0; i < local; i++ {
			if out, err := b.Take(ctx, clock.Now(), []stack.Op{opB}); err != nil || out.Denied >= 0 {
				t.Fatalf("local decision %d: %+v, %v", i, out, err)
			}
			clock.Advance(interval)
		}
		oom(false)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, _ = b.Take(cctx, clock.Now(), []stack.Op{opB}) // probes B with a cancelled context
		probe := opB
		probe.Cost = 0
		var out stack.Outcome
		for i := 0; i < 3; i++ { // until B decides in Redis again
			out, err = b.Take(ctx, clock.Now(), []stack.Op{probe})
		}
		if err != nil || out.Denied >= 0 {
			t.Fatalf("B back: %+v, %v", out, err)
		}
		if got, want := out.Remaining[0], int64(100-local); got != want {
			t.Errorf("B's bucket in Redis holds %d after %d local decisions were charged, want %d", got, local, want)
		}
	})

	// The events of a decision that fails (the Stack hears only its error)
	// reach the error handler with the next decision that succeeds.
	t.Run("eventOfFailedDecision", func(t *testing.T) {
		clock := limitertest.NewClock(limitertest.Start)
		b, err := sluiceredis.New(client, sluiceredis.WithSpread(), sluiceredis.WithClock(clock),
			sluiceredis.WithTimeout(2*time.Second), sluiceredis.WithProbeInterval(time.Nanosecond),
			sluiceredis.WithLocalFallback(0.5), sluiceredis.WithKeyPrefix(uniquePrefix("fevent")))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var heard []error
		st, err := stack.New(stack.Config{RateLimits: threeLimits.RateLimits[:2]}, stack.WithBackend(b),
			stack.WithClock(clock), stack.WithErrorHandler(func(err error) {
				mu.Lock()
				heard = append(heard, err)
				mu.Unlock()
			}))
		if err != nil {
			t.Fatal(err)
		}
		heardB := func(active bool) bool {
			mu.Lock()
			defer mu.Unlock()
			for _, err := range heard {
				var fe *stack.FallbackError
				var ne *sluiceredis.NodeError
				if errors.As(err, &fe) && fe.Active == active && errors.As(fe.Err, &ne) && ne.Addr == nB {
					return true
				}
			}
			return false
		}
		targetKey := func(v string) string {
			return b.Key(bucketkey.Render("per-target", sluice.MetricRequests, 0, []string{"*"}, []string{v}))
		}
		callerKey := func(v string) string {
			return b.Key(bucketkey.Render("per-caller", sluice.MetricRequests, 0, []string{"*"}, []string{v}))
		}
		var target, good, bad string
		for i := 0; target == "" || good == "" || bad == ""; i++ {
			v := "v" + itoa(i)
			switch {
			case target == "" && nodeOf(t, client, targetKey(v)) == nB:
				target = v
			case good == "" && nodeOf(t, client, callerKey(v)) == nA:
				good = v
			case bad == "" && nodeOf(t, client, callerKey(v)) == nA:
				bad = v
			}
		}
		// The bad caller's bucket holds something else: a decision on it
		// fails (not an outage).
		if err := client.Set(ctx, callerKey(bad), "not a bucket", 0).Err(); err != nil {
			t.Fatal(err)
		}
		oom(true)
		defer oom(false)
		if d, err := st.Allow(ctx, sluice.NewKeys("targetName", target, "caller", good)); err != nil || d.Allowed {
			t.Fatalf("B down, its local bucket empty: %+v, %v", d, err)
		}
		if !heardB(true) {
			t.Fatalf("heard %v, want B entering its fallback", heard)
		}
		clock.Advance(time.Second) // the local bucket gets its share; a probe is due
		oom(false)
		// This decision probes B (which decides again: an event) and fails
		// on the bad caller's bucket.
		d, err := st.Allow(ctx, sluice.NewKeys("targetName", target, "caller", bad))
		if err != nil || !d.Allowed { // the Stack fails open
			t.Fatalf("decision on the bad caller: %+v, %v", d, err)
		}
		if d, err := st.Allow(ctx, sluice.NewKeys("targetName", target, "caller", good)); err != nil || !d.Allowed {
			t.Fatalf("B back: %+v, %v", d, err)
		}
		if !heardB(false) {
			t.Errorf("heard %v, want B deciding again", heard)
		}
	})

	// A decision on a master's local buckets whose caller has given up
	// creates no bucket full: the next decision finds it empty, as every
	// new local bucket starts.
	t.Run("cancelledNewBucket", func(t *testing.T) {
		clock := limitertest.NewClock(limitertest.Start)
		b, err := sluiceredis.New(client, sluiceredis.WithSpread(), sluiceredis.WithClock(clock),
			sluiceredis.WithTimeout(2*time.Second), sluiceredis.WithProbeInterval(time.Hour),
			sluiceredis.WithLocalFallback(0.5), sluiceredis.WithKeyPrefix(uniquePrefix("cnew")))
		if err != nil {
			t.Fatal(err)
		}
		k1 := keyOn(t, client, b, nB)
		k2 := keyOn(t, client, b, nB, sluiceredis.Slot(b.Key(k1)))
		op1 := stack.Op{Key: k1, Rate: 100, Period: time.Second, Burst: 100, Cost: 1}
		op2 := op1
		op2.Key = k2
		oom(true)
		defer oom(false)
		if out, err := b.Take(ctx, clock.Now(), []stack.Op{op1}); err != nil || out.Denied != 0 {
			t.Fatalf("B down, empty local bucket: %+v, %v", out, err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := b.Take(cctx, clock.Now(), []stack.Op{op2}); err == nil {
			t.Fatal("a decision with a cancelled context succeeded")
		}
		// The clock stands still: k2's local bucket is empty.
		if out, err := b.Take(ctx, clock.Now(), []stack.Op{op2}); err != nil || out.Denied != 0 {
			t.Errorf("B down, k2's local bucket after a cancelled decision: %+v, %v; want a denial", out, err)
		}
	})

	// A decision that fails because its caller gave up while another part
	// was in flight gives back what its local part took: a failed or
	// denied decision consumes nothing, locally either. The caller gives
	// up as the Redis call starts.
	hook := &cancelOnScript{}
	cclient := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	cclient.OnNewNode(func(n *redis.Client) { n.AddHook(hook) })
	t.Cleanup(func() { cclient.Close() })
	// giveUpThenTakeAll decides ops with a caller that gives up as the
	// Redis call starts, which must fail, and then takes all 50 units of
	// local's bucket, which must be there still.
	giveUpThenTakeAll := func(t *testing.T, b *sluiceredis.Backend, at time.Time, ops []stack.Op, local stack.Op) {
		t.Helper()
		cctx, cancel := context.WithCancel(ctx)
		hook.arm(cancel)
		_, err := b.Take(cctx, at, ops)
		cancel()
		if err == nil {
			t.Fatal("a decision whose caller gave up during its Redis call succeeded")
		}
		local.Cost = 50
		if out, err := b.Take(ctx, at, []stack.Op{local}); err != nil || out.Denied >= 0 {
			t.Errorf("%s's local bucket after a failed decision: %+v, %v; want its 50 units", local.Key, out, err)
		}
	}
	t.Run("cancelledGiveBack", func(t *testing.T) {
		clock := limitertest.NewClock(limitertest.Start)
		b, err := sluiceredis.New(cclient, sluiceredis.WithSpread(), sluiceredis.WithClock(clock),
			sluiceredis.WithTimeout(2*time.Second), sluiceredis.WithProbeInterval(time.Hour),
			sluiceredis.WithLocalFallback(0.5), sluiceredis.WithKeyPrefix(uniquePrefix("cgive")))
		if err != nil {
			t.Fatal(err)
		}
		opA := stack.Op{Key: keyOn(t, client, b, nA), Rate: 100, Period: time.Second, Burst: 100, Cost: 1}
		opB := stack.Op{Key: keyOn(t, client, b, nB), Rate: 100, Period: time.Second, Burst: 100, Cost: 10}
		oom(true)
		defer oom(false)
		if out, err := b.Take(ctx, clock.Now(), []stack.Op{opB}); err != nil || out.Denied != 0 {
			t.Fatalf("B down, empty local bucket: %+v, %v", out, err)
		}
		clock.Advance(time.Second)                                      // B's local bucket: 50
		giveUpThenTakeAll(t, b, clock.Now(), []stack.Op{opB, opA}, opB) // B local, then A's call: the caller gives up
	})

	// The same for a rejoining master, whose decisions take locally and
	// then in Redis: a Redis call cut short by the caller gives the local
	// units back.
	t.Run("cancelledRejoinTake", func(t *testing.T) {
		clock := limitertest.NewClock(limitertest.Start)
		b, err := sluiceredis.New(cclient, sluiceredis.WithSpread(), sluiceredis.WithClock(clock),
			sluiceredis.WithTimeout(2*time.Second), sluiceredis.WithProbeInterval(time.Nanosecond),
			sluiceredis.WithLocalFallback(0.5), sluiceredis.WithKeyPrefix(uniquePrefix("crejoin")))
		if err != nil {
			t.Fatal(err)
		}
		opB := stack.Op{Key: keyOn(t, client, b, nB), Rate: 100, Period: time.Second, Burst: 100, Cost: 10}
		oom(true)
		if out, err := b.Take(ctx, clock.Now(), []stack.Op{opB}); err != nil || out.Denied != 0 {
			t.Fatalf("B down, empty local bucket: %+v, %v", out, err)
		}
		clock.Advance(time.Second) // B's local bucket: 50; a probe is due
		oom(false)
		probe := opB
		probe.Cost = 0
		if out, err := b.Take(ctx, clock.Now(), []stack.Op{probe}); err != nil || out.Denied >= 0 {
			t.Fatalf("B back (rejoining): %+v, %v", out, err)
		}
		giveUpThenTakeAll(t, b, clock.Now(), []stack.Op{opB}, opB) // local, then Redis: the caller gives up
	})

}

// cancelOnScript cancels, once armed, a context as the next script call
// starts: a caller giving up while its decision's Redis call is in flight.
type cancelOnScript struct {
	cancel atomic.Pointer[context.CancelFunc]
}

func (h *cancelOnScript) arm(cancel context.CancelFunc) { h.cancel.Store(&cancel) }

func (h *cancelOnScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *cancelOnScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			if c := h.cancel.Swap(nil); c != nil {
				(*c)()
			}
		}
		return next(ctx, cmd)
	}
}

func (h *cancelOnScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

package redis_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucketkey"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// TestClusterNodeFallback kills a master of a six-node cluster under
// traffic with WithLocalFallback: the buckets of the other masters are
// still decided in Redis (their counts there are exact), the failed
// master's buckets are decided locally at the fallback's share (empty at
// first, then what the share's rate refilled, never more), decisions on
// both stay all or nothing, an adjustment is applied in Redis and locally
// alike, the error handler's events name the master, and after its replica
// takes over what was taken locally is charged to the new master. Time is
// the injected clock, stepped; each step waits for the traffic to have
// decided, not for a span of time; the replica takes over when the test
// says so (CLUSTER FAILOVER TAKEOVER).
func TestClusterNodeFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node cluster")
	}
	addrs, srvs := startCluster(t, 3, 1, "--cluster-node-timeout", "2000",
		"--cluster-require-full-coverage", "no", // the other masters serve while B's slots have none
		"--repl-diskless-sync", "no") // its replica's first sync starts at once (no diskless delay)
	client, _ := newClusterClient(t, addrs, fastRetries)
	ctx := context.Background()
	masters := clusterMasters(t, client, 3)
	clock := limitertest.NewClock(limitertest.Start)
	const share = 0.5
	const probe = 100 * time.Millisecond
	b, err := sluiceredis.New(client, sluiceredis.WithSpread(), sluiceredis.WithClock(clock),
		sluiceredis.WithTimeout(300*time.Millisecond), sluiceredis.WithProbeInterval(probe),
		sluiceredis.WithLocalFallback(share), sluiceredis.WithKeyPrefix(uniquePrefix("nodefb")))
	if err != nil {
		t.Fatal(err)
	}
	nA, nB, nC := masters[0], masters[1], masters[2]
	kA := keyOn(t, client, b, nA)
	kB := keyOn(t, client, b, nB)
	kC := keyOn(t, client, b, nC)
	const burstA, rateB, burstB = 1000000, 100, 100
	opA := stack.Op{Key: kA, Rate: 1, Period: time.Hour, Burst: burstA, Cost: 1} // never denies: counts exactly
	opB := stack.Op{Key: kB, Rate: rateB, Period: time.Second, Burst: burstB, Cost: 1}
	opC := stack.Op{Key: kC, Rate: 1, Period: time.Hour, Burst: 1, Cost: 1} // emptied below: denies

	var mu sync.Mutex
	var notices []*stack.FallbackError
	take := func(ops ...stack.Op) (stack.Outcome, error) {
		out, err := b.Take(ctx, clock.Now(), ops)
		mu.Lock()
		for _, n := range out.Notices {
			var fe *stack.FallbackError
			if !errors.As(n, &fe) {
				t.Errorf("notice %v is not a *stack.FallbackError", n)
				continue
			}
			notices = append(notices, fe)
		}
		mu.Unlock()
		return out, err
	}
	// heard reports whether an event about addr with Active active came.
	heard := func(addr string, active bool) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range notices {
			var ne *sluiceredis.NodeError
			if n.Active == active && errors.As(n.Err, &ne) && ne.Addr == addr {
				return true
			}
		}
		return false
	}

	// A Stack on its own backend, with an error handler, and two callers
	// whose buckets are on A and on B.
	bs, err := sluiceredis.New(client, sluiceredis.WithSpread(), sluiceredis.WithClock(clock),
		sluiceredis.WithTimeout(300*time.Millisecond), sluiceredis.WithProbeInterval(probe),
		sluiceredis.WithLocalFallback(share), sluiceredis.WithKeyPrefix(uniquePrefix("nodefb-stack")))
	if err != nil {
		t.Fatal(err)
	}
	var handled []error
	st, err := stack.New(stack.Config{RateLimits: threeLimits.RateLimits[1:2]}, stack.WithBackend(bs), stack.WithClock(clock),
		stack.WithErrorHandler(func(err error) {
			mu.Lock()
			handled = append(handled, err)
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	callerKey := func(caller string) string {
		return bs.Key(bucketkey.Render("per-caller", sluice.MetricRequests, 0, []string{"*"}, []string{caller}))
	}
	var callerA, callerB string
	for i := 0; callerA == "" || callerB == ""; i++ {
		c := "c" + itoa(i)
		switch nodeOf(t, client, callerKey(c)) {
		case nA:
			callerA = c
		case nB:
			callerB = c
		}
	}
	for _, c := range []string{callerA, callerB} {
		if d, err := st.Allow(ctx, sluice.NewKeys("caller", c)); err != nil || !d.Allowed {
			t.Fatalf("caller %s before the kill: %+v, %v", c, d, err)
		}
	}
	heldA := func() int64 {
		v, err := client.Get(ctx, callerKey(callerA)).Result()
		if err != nil {
			t.Fatalf("caller A's bucket: %v", err)
		}
		f := storedBucket(t, v)
		return int64(f[5] / f[0])
	}

	// B's bucket emptied in Redis, its replica in sync.
	for i := 0; i < burstB; i++ {
		if out, err := take(opA, opB); err != nil || out.Denied >= 0 {
			t.Fatalf("before the kill, decision %d: %+v, %v", i, out, err)
		}
	}
	if out, err := take(opA, opB); err != nil || out.Denied != 1 {
		t.Fatalf("B's bucket empty: %+v, %v", out, err)
	}
	if out, err := take(opC); err != nil || out.Denied >= 0 {
		t.Fatalf("C's one token: %+v, %v", out, err)
	}
	slotB := sluiceredis.Slot(b.Key(kB))
	replicaB := replicaOf(t, addrs, nB)
	replicaInSync(t, nB, keyInSlot(slotB))

	// Traffic: decisions on A alone, on A and B, and on B and C (C
	// denies: what B took locally is given back), from four goroutines.
	var withA, both atomic.Int64 // admitted
	var needB atomic.Int64       // decided, needing B
	var prog progress
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			defer prog.bump()
			for i := 0; !stop.Load(); i++ {
				ops := []stack.Op{opA}
				switch {
				case g == 3 && i%2 == 1:
					ops = []stack.Op{opB, opC}
				case i%2 == 1 || g < 2:
					ops = append(ops, opB)
				}
				out, err := take(ops...)
				if err != nil {
					t.Errorf("a decision failed: %v", err)
					stop.Store(true)
					return
				}
				if out.Denied < 0 && ops[0].Key == kB {
					t.Errorf("a decision on B and an empty C admitted: %+v", out)
					stop.Store(true)
					return
				}
				if out.Denied < 0 {
					withA.Add(1)
					if len(ops) == 2 {
						both.Add(1)
					}
				}
				if len(ops) == 2 && ops[0].Key == kA {
					needB.Add(1)
				}
				prog.bump()
			}
		})
	}
	// decisions waits until the traffic has made n more decisions on A
	// and B, and moreA more admissions with A.
	decisions := func(n, moreA int64, when string) {
		t.Helper()
		n0, a0 := needB.Load(), withA.Load()
		prog.await(t, fmt.Sprintf("%d decisions needing B and %d admitted with A %s", n, moreA, when), func() bool {
			return needB.Load()-n0 >= n && withA.Load()-a0 >= moreA || stop.Load()
		})
	}
	decisions(20, 0, "before the kill")
	var srvB = srvs[0]
	for _, s := range srvs {
		if s.Addr == nB {
			srvB = s
		}
	}
	srvB.Stop()
	prog.await(t, "an event naming B as local", func() bool { return heard(nB, true) || stop.Load() })
	// The clock stands still: B's local bucket, empty, admits nothing,
	// while decisions on A alone go on in Redis.
	a0, b0 := withA.Load(), both.Load()
	decisions(50, 10, "with B local and the clock still")
	if n := both.Load() - b0; n != 0 {
		t.Errorf("%d decisions needing B admitted by an empty local bucket", n)
	}
	if n := withA.Load() - a0; n == 0 {
		t.Error("no decision on A alone admitted while B is down")
	}
	// Through the Stack: the caller on B is decided locally (an empty
	// bucket: denied), and the error handler hears that B is local; the
	// caller on A is decided, and counted, in Redis.
	if d, err := st.Allow(ctx, sluice.NewKeys("caller", callerB)); err != nil || d.Allowed {
		t.Errorf("caller on B, B down: %+v, %v; want a local denial", d, err)
	}
	var before int64
	for k := 0; k < 2; k++ { // the bucket, written by the first (it expires once refilled)
		if k == 1 {
			before = heldA()
		}
		if d, err := st.Allow(ctx, sluice.NewKeys("caller", callerA)); err != nil || !d.Allowed {
			t.Errorf("caller on A, B down: %+v, %v", d, err)
		}
	}
	if got := heldA(); got != before-1 {
		t.Errorf("caller A's bucket in Redis holds %d after an admission, want %d", got, before-1)
	}
	mu.Lock()
	heardB := false
	for _, err := range handled {
		var fe *stack.FallbackError
		var ne *sluiceredis.NodeError
		if errors.As(err, &fe) && fe.Active && errors.As(fe.Err, &ne) && ne.Addr == nB {
			heardB = true
		}
	}
	mu.Unlock()
	if !heardB {
		t.Errorf("the Stack's error handler heard %v, want B entering its local fallback", handled)
	}

	// A second: the local bucket gets the share of B's rate, no more. The
	// traffic goes on until it is spent (on a busy machine a few hundred
	// milliseconds may not be enough: the rejoin check below needs it
	// spent, in debt by the charge), then a while more, admitting nothing.
	b1 := both.Load()
	clock.Advance(time.Second)
	prog.await(t, "the local bucket's second spent", func() bool { return both.Load()-b1 >= int64(share*rateB) || stop.Load() })
	decisions(50, 0, "once the local bucket is spent")
	stop.Store(true)
	wg.Wait()
	local := both.Load() - b1
	if local != int64(share*rateB) {
		t.Errorf("%d decisions needing B admitted locally in a second, want %d", local, int64(share*rateB))
	}
	// A forced charge of one on both while B is down: in Redis on A,
	// locally (and owed) on B.
	if err := b.Adjust(ctx, clock.Now(), []stack.Op{opA, opB}); err != nil {
		t.Fatalf("adjust while B is down: %v", err)
	}
	if heard(nB, false) {
		t.Fatal("B decided again before its replica took over")
	}
	for _, n := range masters {
		if n != nB && (heard(n, true) || heard(n, false)) {
			t.Errorf("an event names %s, which did not fail", n)
		}
	}
	// A's count in Redis: every admission took once, every denial on B
	// gave back what A took, never more. A give-back whose take was made
	// before the clock moved on, and landed after a take at the later
	// instant, returns a second's refill less (issue #21: that take may
	// have started over from a refilled bucket): at most one such per
	// goroutine, each a whole unit less as counted.
	probeA := opA
	probeA.Cost = 0
	out, err := take(probeA)
	if err != nil || out.Denied >= 0 {
		t.Fatalf("A: %+v, %v", out, err)
	}
	if got, want := out.Remaining[0], int64(burstA-burstB-1)-withA.Load(); got > want || got < want-4 {
		t.Errorf("A holds %d in Redis after %d admissions and a charge, want %d (or up to 4 less)", got, withA.Load()+burstB, want)
	}

	// B's replica takes over; the next probe, one probe interval on,
	// charges the new master with what was decided locally: B's bucket,
	// full again after the second (whatever the replica missed), holds
	// burst - local.
	probeB := opB
	probeB.Cost = 0
	takeOver(t, client, replicaB, nA, slotB)
	clock.Advance(probe)
	if _, err := take(probeB); err != nil {
		t.Fatalf("the probe of B's slots after the takeover: %v", err)
	}
	if !heard(nB, false) {
		t.Fatal("the probe after the takeover did not end B's fallback")
	}
	if nodeOf(t, client, b.Key(kB)) == nB {
		t.Fatal("B's slot still on B")
	}
	// The charge is in B's bucket on the new master (read as stored: the
	// clock stands still since the pay, so what it holds is what it had
	// then).
	v, err := client.Get(ctx, b.Key(kB)).Result()
	if err != nil {
		t.Fatalf("B's bucket on the new master: %v", err)
	}
	f := storedBucket(t, v)
	held := int64(f[5] / f[0])
	if want := burstB - local - 1; held != want {
		t.Errorf("B's new master holds %d after %d local decisions and a charge were charged, want %d", held, local, want)
	}
	// For the rejoin period (1.6 s of the clock) a decision on B must
	// also pass its local bucket: in debt by the charge, refilled by the
	// share of the rate over the probe interval: 50/s × 0.1 s - 1 = 4,
	// though Redis holds 49.
	rejoinAdmits := int(share*rateB*probe.Seconds()) - 1
	for i := 0; i <= rejoinAdmits; i++ {
		out, err = take(opB)
		if err != nil {
			t.Fatalf("B rejoining, decision %d: %v", i, err)
		}
		if admitted := out.Denied < 0; admitted != (i < rejoinAdmits) {
			t.Fatalf("B rejoining, decision %d: %+v; want %d admitted, then the local bound's denial", i, out, rejoinAdmits)
		}
	}
	t.Logf("%d admissions with A, %d locally on B; B's bucket on the new master: %d", withA.Load(), local, held)
}

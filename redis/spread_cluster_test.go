package redis_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
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

// newClusterClient returns a cluster client closed when the test ends and
// a counter of the script calls sent to any node (EVALSHA or EVAL, alone
// or in a pipeline, redirections included): the round trips decisions
// make, leaving out the client's own slot-map refreshes.
func newClusterClient(t testing.TB, addrs []string, opts ...func(*redis.ClusterOptions)) (*redis.ClusterClient, *scriptCalls) {
	t.Helper()
	rt := &scriptCalls{}
	o := &redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClusterClient(o)
	c.OnNewNode(func(n *redis.Client) { n.AddHook(rt) })
	t.Cleanup(func() { c.Close() })
	return c, rt
}

// fastRetries makes a cluster client retry a failed node (a killed
// master) after a millisecond rather than go-redis's backoff of up to half
// a second, and dial a refusing node once rather than five times: the same
// outcome, without the wall-clock waits.
func fastRetries(o *redis.ClusterOptions) {
	o.MinRetryBackoff, o.MaxRetryBackoff = time.Millisecond, time.Millisecond
	o.DialerRetries = 1
}

// nodeOf returns the address of the master holding key.
func nodeOf(t testing.TB, c *redis.ClusterClient, key string) string {
	t.Helper()
	n, err := c.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return n.Options().Addr
}

// threeBucketKeys are the bucket keys threeLimits uses for keys t, x, c.
func threeBucketKeys(target, tool, caller string) []string {
	return []string{
		bucketkey.Render("per-target", sluice.MetricRequests, 0, []string{"*"}, []string{target}),
		bucketkey.Render("per-caller", sluice.MetricRequests, 0, []string{"*"}, []string{caller}),
		bucketkey.Render("per-tool", sluice.MetricRequests, 0, []string{"*", "*"}, []string{target, tool}),
	}
}

// valuesOnNodes finds target, tool and caller values whose three buckets
// sit on exactly n distinct masters.
func valuesOnNodes(t testing.TB, c *redis.ClusterClient, b *sluiceredis.Backend, n int) (string, string, string) {
	t.Helper()
	for i := 0; i < 10000; i++ {
		tg, tl, cl := "t"+itoa(i), "x"+itoa(i*7+1), "c"+itoa(i*13+2)
		nodes := map[string]bool{}
		for _, k := range threeBucketKeys(tg, tl, cl) {
			nodes[nodeOf(t, c, b.Key(k))] = true
		}
		if len(nodes) == n {
			return tg, tl, cl
		}
	}
	t.Fatalf("no values put three buckets on %d nodes", n)
	return "", "", ""
}

func itoa(i int) string {
	return string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26))
}

// TestClusterSpread runs on one three-master cluster: keys spread, the
// slot computation, round trips per decision by number of nodes, the
// in-memory semantics across nodes, and admissions under concurrency.
func TestClusterSpread(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	addrs, srvs := startCluster(t, 3, 0)
	client, rt := newClusterClient(t, addrs)
	ctx := context.Background()

	t.Run("slots", func(t *testing.T) {
		// Slot (CRC16, locally) agrees with CLUSTER KEYSLOT.
		b, err := sluiceredis.New(client, sluiceredis.WithSpread())
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 300; i++ {
			k := b.Key(bucketkey.Render("per-caller", "requests", 0, []string{"*"}, []string{"caller-" + itoa(i)}))
			want, err := client.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := sluiceredis.Slot(k); int64(got) != want {
				t.Fatalf("Slot(%q) = %d, CLUSTER KEYSLOT %d", k, got, want)
			}
		}
	})

	t.Run("roundTrips", func(t *testing.T) {
		for n := 1; n <= 3; n++ {
			clock := limitertest.NewClock(limitertest.Start)
			b := newSpreadBackend(t, client, clock, "rt")
			if err := b.Load(ctx); err != nil {
				t.Fatal(err)
			}
			s, err := stack.New(threeLimits, stack.WithClock(clock), stack.WithBackend(b), stack.WithFailClosed())
			if err != nil {
				t.Fatal(err)
			}
			tg, tl, cl := valuesOnNodes(t, client, b, n)
			keys := sluice.NewKeys("targetName", tg, "toolName", tl, "caller", cl)
			before := rt.n.Load()
			allowed := 0
			for i := 0; i < 100; i++ {
				d, err := s.Allow(ctx, keys)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					allowed++
				}
			}
			if allowed != 100 {
				t.Errorf("%d nodes: allowed %d of 100 (limit 100/s)", n, allowed)
			}
			if got := rt.n.Load() - before; got != int64(100*n) {
				t.Errorf("%d-node decisions: %d round trips for 100, want %d", n, got, 100*n)
			}
			t.Logf("%d-node decision: %.2f round trips", n, float64(rt.n.Load()-before)/100)
			// The 101st is denied by per-tool: the other buckets are given
			// back, so each holds exactly 100 taken.
			d, err := s.Allow(ctx, keys)
			if err != nil || d.Allowed || d.LimitID != "per-tool" {
				t.Fatalf("101st: %+v, %v; want a per-tool denial", d, err)
			}
			check := make([]stack.Op, 3)
			for i, k := range threeBucketKeys(tg, tl, cl) {
				check[i] = stack.Op{Key: k, Rate: []int64{1000, 500, 100}[i], Period: time.Second, Burst: []int64{1000, 500, 100}[i]}
			}
			for i := range check {
				check[i].Shadow = true // a check of an empty bucket is over: shadow reports it, with 0 left
			}
			out, err := b.Take(ctx, clock.Now(), check)
			if err != nil || out.Denied != -1 || !slices.Equal(out.Remaining, []int64{900, 400, 0}) {
				t.Errorf("%d nodes: after the denial remaining %v (%+v, %v), want [900 400 0]", n, out.Remaining, out, err)
			}
		}
	})

	t.Run("matchesMemory", func(t *testing.T) {
		// The same random takes and adjustments on buckets spread over the
		// three masters and on stack.MemoryBackend give the same outcomes.
		// Each bucket keeps its parameters: after a reload that changes
		// them, a multi-node denial may convert a bucket evaluated after
		// the denying one, which the in-memory stack converts at its next
		// use instead.
		clock := limitertest.NewClock(limitertest.Start)
		rb := newSpreadBackend(t, client, clock, "mm")
		mem := stack.NewMemoryBackend()
		names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
		nodes := map[string]bool{}
		for _, k := range names {
			nodes[nodeOf(t, client, rb.Key(k))] = true
		}
		if len(nodes) != 3 {
			t.Fatalf("keys a–h on %d masters, want 3", len(nodes))
		}
		rng := rand.New(rand.NewPCG(15, 3))
		leases := map[string][]string{}
		lengthened := 0
		multi := 0
		for step := 0; step < 400; step++ {
			clock.Advance(fuzzSteps[rng.IntN(len(fuzzSteps))])
			n := 1 + rng.IntN(4)
			perm := rng.Perm(len(names))
			ops := make([]stack.Op, n)
			for i := range ops {
				r := fuzzRates[perm[i]] // a bucket keeps its parameters, as between reloads
				ops[i] = stack.Op{Key: names[perm[i]], Rate: r.rate, Period: r.period, Burst: r.burst,
					Cost: int64(rng.IntN(4)), Shadow: rng.IntN(5) == 0}
				if rng.IntN(8) == 0 {
					ops[i].Cost = int64(rng.IntN(60))
				}
				if perm[i] >= 6 { // g and h are connections slots (2 and 1)
					ops[i] = stack.Op{Key: names[perm[i]], Burst: int64(8 - perm[i]), Cost: 1, Shadow: ops[i].Shadow,
						Conn: true, Lease: "l" + strconv.Itoa(step) + "-" + strconv.Itoa(i), TTL: time.Hour}
				}
			}
			at := clock.Now()
			if rng.IntN(5) == 0 {
				if rng.IntN(2) == 0 {
					for i := range ops {
						// a give-back of a take at this instant: no take
						// can be later, so both give it all back
						ops[i].Cost = -ops[i].Cost
						ops[i].TakenAt = at
					}
				}
				for i := range ops {
					if ops[i].Conn && len(leases[ops[i].Key]) > 0 { // release a held slot
						ops[i].Lease, ops[i].Cost = leases[ops[i].Key][0], -1
						leases[ops[i].Key] = leases[ops[i].Key][1:]
					}
				}
				if errR, errM := rb.Adjust(ctx, at, ops), mem.Adjust(ctx, at, ops); errR != nil || errM != nil {
					t.Fatalf("step %d Adjust(%+v): redis %v, memory %v", step, ops, errR, errM)
				}
				continue
			}
			got, err := rb.Take(ctx, at, ops)
			if err != nil {
				t.Fatalf("step %d Take(%+v): %v", step, ops, err)
			}
			want, _ := mem.Take(ctx, at, ops)
			if got.Denied >= 0 && got.RetryAfter > want.RetryAfter && slices.ContainsFunc(ops[got.Denied+1:], func(o stack.Op) bool { return o.Conn }) {
				// A full connections slot after the denial, on another node,
				// may lengthen the wait (never shorten it): memory does not
				// probe slots, a node's script reports its own denial.
				want.RetryAfter = got.RetryAfter
				lengthened++
			}
			if got.Denied >= 0 {
				got.Remaining, want.Remaining = nil, nil // reported on a denial by some paths only
			}
			if got.Denied != want.Denied || got.Permanent != want.Permanent || got.OverBurst != want.OverBurst ||
				got.RetryAfter != want.RetryAfter || !slices.Equal(got.Remaining, want.Remaining) ||
				!slices.Equal(got.ShadowDenied, want.ShadowDenied) {
				t.Fatalf("step %d at +%v Take(%+v):\nredis  %+v\nmemory %+v", step, at.Sub(limitertest.Start), ops, got, want)
			}
			if got.Denied < 0 {
				for i, op := range ops {
					if op.Conn && !slices.Contains(got.ShadowDenied, i) {
						leases[op.Key] = append(leases[op.Key], op.Lease)
					}
				}
			}
			on := map[string]bool{}
			for _, op := range ops {
				on[nodeOf(t, client, rb.Key(op.Key))] = true
			}
			if len(on) > 1 {
				multi++
			}
		}
		t.Logf("%d multi-node decisions, %d waits lengthened by a slot", multi, lengthened)
		if multi < 100 {
			t.Errorf("only %d of the decisions spanned several nodes", multi)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		// The clock stands still: over all the goroutines, admissions never
		// exceed the smallest burst, and every bucket holds exactly what was
		// admitted (give-backs are exact).
		clock := limitertest.NewClock(limitertest.Start)
		b := newSpreadBackend(t, client, clock, "cc")
		for _, nodes := range []int{1, 3} {
			tg, tl, cl := valuesOnNodes(t, client, b, nodes)
			bursts := []int64{60, 40, 50}
			ops := make([]stack.Op, 3)
			for i, k := range threeBucketKeys(tg, tl, cl) {
				ops[i] = stack.Op{Key: k, Rate: 1, Period: time.Hour, Burst: bursts[i], Cost: 1}
			}
			var admitted, denied atomic.Int64
			var wg sync.WaitGroup
			for g := 0; g < 16; g++ {
				wg.Go(func() {
					for i := 0; i < 12; i++ {
						out, err := b.Take(ctx, clock.Now(), slices.Clone(ops))
						if err != nil {
							t.Error(err)
							return
						}
						if out.Denied < 0 {
							admitted.Add(1)
						} else {
							denied.Add(1)
							if out.RetryAfter <= 0 {
								t.Errorf("denial without a wait: %+v", out)
							}
						}
					}
				})
			}
			wg.Wait()
			if a := admitted.Load(); a > 40 || a < 20 {
				t.Errorf("admitted %d with the smallest burst 40 and no refill, want at most 40 (and most of them)", a)
			}
			check := slices.Clone(ops)
			for i := range check {
				check[i].Cost, check[i].Shadow = 0, true // an empty bucket's check is over: shadow reports 0 left
			}
			out, err := b.Take(ctx, clock.Now(), check)
			a := admitted.Load()
			want := []int64{60 - a, 40 - a, 50 - a}
			if err != nil || !slices.Equal(out.Remaining, want) {
				t.Errorf("%d nodes: after %d admissions remaining %v (%v), want %v", nodes, a, out.Remaining, err, want)
			}
		}
	})

	t.Run("perSlot", func(t *testing.T) {
		// Without the cross-slot flag (a server before Redis 7), a
		// one-node decision over three slots is one call per slot, and
		// still all or nothing.
		clock := limitertest.NewClock(limitertest.Start)
		b := newSpreadBackend(t, client, clock, "ps")
		sluiceredis.NoCrossSlot(b)
		if err := b.Load(ctx); err != nil {
			t.Fatal(err)
		}
		s, err := stack.New(threeLimits, stack.WithClock(clock), stack.WithBackend(b), stack.WithFailClosed())
		if err != nil {
			t.Fatal(err)
		}
		tg, tl, cl := valuesOnNodes(t, client, b, 1)
		keys := sluice.NewKeys("targetName", tg, "toolName", tl, "caller", cl)
		before := rt.n.Load()
		for i := 0; i < 100; i++ {
			if d, err := s.Allow(ctx, keys); err != nil || !d.Allowed {
				t.Fatalf("decision %d: %+v, %v", i, d, err)
			}
		}
		if got := rt.n.Load() - before; got != 300 {
			t.Errorf("100 decisions over three slots took %d calls, want 300", got)
		}
		if d, err := s.Allow(ctx, keys); err != nil || d.Allowed || d.LimitID != "per-tool" {
			t.Fatalf("101st: %+v, %v", d, err)
		}
		check := make([]stack.Op, 3)
		for i, k := range threeBucketKeys(tg, tl, cl) {
			check[i] = stack.Op{Key: k, Rate: []int64{1000, 500, 100}[i], Period: time.Second, Burst: []int64{1000, 500, 100}[i], Shadow: true}
		}
		out, err := b.Take(ctx, clock.Now(), check)
		if err != nil || !slices.Equal(out.Remaining, []int64{900, 400, 0}) {
			t.Errorf("after the denial remaining %v (%v), want [900 400 0]", out.Remaining, err)
		}
	})

	t.Run("fallbackExact", func(t *testing.T) {
		// A decision on nodes X and Y while X stops answering: with a local
		// fallback, every admitted decision is charged to Y's bucket
		// exactly once, whether Redis or the fallback admitted it (Y's part
		// of a failed call is given back; a payment that reaches Y but not
		// X leaves only X's part owed).
		clock := limitertest.NewClock(limitertest.Start)
		b, err := sluiceredis.New(client, sluiceredis.WithSpread(), sluiceredis.WithClock(clock),
			sluiceredis.WithKeyPrefix(uniquePrefix("fx")), sluiceredis.WithTimeout(100*time.Millisecond),
			sluiceredis.WithProbeInterval(50*time.Millisecond), sluiceredis.WithLocalFallback(1))
		if err != nil {
			t.Fatal(err)
		}
		x := srvs[0]
		kX := keyOn(t, client, b, x.Addr)
		kY := keyOn(t, client, b, srvs[1].Addr)
		const burst, drained = 1_000_000, 500_000
		ops := []stack.Op{
			{Key: kX, Rate: 1000, Period: time.Second, Burst: burst, Cost: 1},
			{Key: kY, Rate: 1000, Period: time.Second, Burst: burst, Cost: 1},
		}
		// Y far from full, so that refill never reaches the burst.
		if err := b.Adjust(ctx, clock.Now(), []stack.Op{{Key: kY, Rate: 1000, Period: time.Second, Burst: burst, Cost: drained}}); err != nil {
			t.Fatal(err)
		}
		admitted := 0
		var active, inactive bool
		take := func() {
			out, err := b.Take(ctx, clock.Now(), slices.Clone(ops))
			if err != nil {
				t.Fatalf("take: %v", err)
			}
			if out.Denied < 0 {
				admitted++
			}
			for _, n := range out.Notices {
				var fe *stack.FallbackError
				if errors.As(n, &fe) {
					active = active || fe.Active
					inactive = inactive || (active && !fe.Active)
				}
			}
		}
		for i := 0; i < 5; i++ {
			take()
		}
		start := clock.Now()
		x.Pause(t)
		take() // times out: the fallback starts, its buckets empty
		clock.Advance(time.Second)
		for i := 0; i < 20; i++ {
			if i%5 == 0 {
				clock.Advance(50 * time.Millisecond) // a probe pays Y and fails on X (it times out)
			}
			take() // local
		}
		x.Resume(t)
		eventually(t, "the fallback ends", func() bool {
			clock.Advance(50 * time.Millisecond) // the next decision probes
			take()
			return inactive
		})
		for i := 0; i < 5; i++ {
			take()
		}
		refill := int64(clock.Now().Sub(start) / time.Millisecond) // Y's 1000/s since it was drained
		probe := slices.Clone(ops[1:])
		probe[0].Cost, probe[0].Shadow = 0, true
		out, err := b.Take(ctx, clock.Now(), probe)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(burst-drained-admitted) + refill; out.Remaining[0] != want {
			t.Errorf("Y holds %d after %d admissions, want %d (each charged once)", out.Remaining[0], admitted, want)
		}
		t.Logf("%d admitted through the outage; Y charged exactly", admitted)
	})

	t.Run("batched", func(t *testing.T) {
		// Concurrent one-node decisions share calls (their buckets in three
		// slots of the node: the cross-slot form of a batch), and decide as
		// one limiter: exactly the smallest burst is admitted.
		clock := limitertest.NewClock(limitertest.Start)
		b := newSpreadBackend(t, client, clock, "bt")
		if err := b.Load(ctx); err != nil {
			t.Fatal(err)
		}
		tg, tl, cl := valuesOnNodes(t, client, b, 1)
		ops := make([]stack.Op, 3)
		for i, k := range threeBucketKeys(tg, tl, cl) {
			ops[i] = stack.Op{Key: k, Rate: 1, Period: time.Hour, Burst: []int64{900, 600, 700}[i], Cost: 1}
		}
		var admitted atomic.Int64
		before := rt.n.Load()
		var wg sync.WaitGroup
		for g := 0; g < 16; g++ {
			wg.Go(func() {
				for i := 0; i < 50; i++ {
					out, err := b.Take(ctx, clock.Now(), slices.Clone(ops))
					if err != nil {
						t.Error(err)
						return
					}
					if out.Denied < 0 {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		calls := rt.n.Load() - before
		if a := admitted.Load(); a != 600 {
			t.Errorf("admitted %d of 800 on one node, want exactly the smallest burst, 600", a)
		}
		if calls >= 800 {
			t.Errorf("%d calls for 800 concurrent one-node decisions: not batched", calls)
		}
		t.Logf("800 concurrent one-node decisions in %d calls", calls)
	})
	t.Run("fallback", func(t *testing.T) {
		// One master stops answering (SIGSTOP): with a local fallback the
		// whole backend decides locally, and when the master answers again
		// what was decided locally is paid on every node and Redis decides.
		clock := limitertest.NewClock(limitertest.Start)
		b, err := sluiceredis.New(client, sluiceredis.WithSpread(), sluiceredis.WithClock(clock),
			sluiceredis.WithKeyPrefix(uniquePrefix("fb")), sluiceredis.WithTimeout(100*time.Millisecond),
			sluiceredis.WithProbeInterval(50*time.Millisecond), sluiceredis.WithLocalFallback(1))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var events []*stack.FallbackError
		s, err := stack.New(threeLimits, stack.WithClock(clock), stack.WithBackend(b), stack.WithFailClosed(),
			stack.WithErrorHandler(func(err error) {
				var fe *stack.FallbackError
				if errors.As(err, &fe) {
					mu.Lock()
					events = append(events, fe)
					mu.Unlock()
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		tg, tl, cl := valuesOnNodes(t, client, b, 3)
		keys := sluice.NewKeys("targetName", tg, "toolName", tl, "caller", cl)
		callerKey := b.Key(threeBucketKeys(tg, tl, cl)[1])
		paused := srvs[0]
		for _, srv := range srvs {
			if srv.Addr == nodeOf(t, client, callerKey) {
				paused = srv
			}
		}
		decide := func() bool {
			clock.Advance(20 * time.Millisecond)
			d, err := s.Allow(ctx, keys)
			if err != nil {
				t.Fatalf("decision: %v", err)
			}
			return d.Allowed
		}
		for i := 0; i < 5; i++ {
			if !decide() {
				t.Fatal("denied before the outage")
			}
		}
		paused.Pause(t)
		local := 0
		for i := 0; i < 15; i++ { // 300 ms of the clock, a probe (timing out) every 50 ms
			if decide() {
				local++
			}
		}
		paused.Resume(t)
		eventually(t, "the fallback ends", func() bool {
			decide()
			mu.Lock()
			defer mu.Unlock()
			return len(events) > 0 && !events[len(events)-1].Active
		})
		mu.Lock()
		if !events[0].Active || local == 0 {
			t.Errorf("events %v, %d allowed during the outage; want an active fallback that admits", events, local)
		}
		mu.Unlock()
		// Redis decides again on all three nodes, and the caller's bucket
		// (on the paused node) was charged: the local decisions were paid,
		// which may have emptied the buckets, so a second refills them.
		clock.Advance(time.Second)
		d, err := s.Allow(ctx, keys)
		if err != nil || !d.Allowed {
			t.Fatalf("after the outage: %+v, %v", d, err)
		}
		if ttl, err := client.PTTL(ctx, callerKey).Result(); err != nil || ttl <= 0 {
			t.Errorf("the caller's bucket on the paused node: PTTL %v, %v; want a charged bucket", ttl, err)
		}
	})
}

// scriptCalls counts script calls (EVALSHA, EVAL) a client sends.
type scriptCalls struct{ n atomic.Int64 }

func (h *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if n := cmd.Name(); n == "evalsha" || n == "eval" {
				h.n.Add(1)
				break
			}
		}
		return next(ctx, cmds)
	}
}

// newSpreadBackend is the spread backend most of these tests use: buckets
// over the cluster's masters, time from clock, its own key prefix, and a
// timeout long enough for a loaded machine.
func newSpreadBackend(t *testing.T, client redis.UniversalClient, clock *limitertest.Clock, prefix string) *sluiceredis.Backend {
	t.Helper()
	b, err := sluiceredis.New(client, sluiceredis.WithSpread(), sluiceredis.WithClock(clock),
		sluiceredis.WithKeyPrefix(uniquePrefix(prefix)), sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

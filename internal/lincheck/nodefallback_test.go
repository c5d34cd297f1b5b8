package lincheck

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/redis/redistest"
	"github.com/sluicehq/sluice/stack"
)

// TestInterleavingsNodeFallback runs the seeded scheduler on the Redis
// backend's per-master local fallback (WithSpread and WithLocalFallback on
// a Redis Cluster). Besides the callers (read the instant, take, give back
// in full or in parts), a fault step drawn in the same seeded order makes
// the master of the buckets refuse every write (OOM: maxmemory 1) or
// accept them again, so that takes and give-backs land in Redis, in the
// failed master's local buckets (the give-back credits of
// nodefallback.go), in the probe that pays their debts, and in the rejoin
// period bounded by both. The fallback's share is 1 and there is one
// process, so over every window the kept units must stay within burst +
// rate·Δt, as the bucket alone would keep them. A fault costs no wall
// clock: the master answers OOM at once, and the backend's probe interval
// (1 ms) is on the scheduler's clock.
//
// The scheduler steps whole calls on one goroutine: a give-back that lands
// while a probe's payment is in flight (TestNodeGiveBackDuringProbe in
// the redis package) is not among its interleavings.
func TestInterleavingsNodeFallback(t *testing.T) {
	addrs := startCluster(t, 3)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1})
	defer client.Close()
	ctx := context.Background()
	const callers, steps, burst = 5, 400, 3
	caught, faults, whileDown := 0, 0, 0
	for _, seed := range seedsToRun(t, seedsFor(30)) {
		s := newSched(seed, 400)
		tg := &nodeTarget{s: s, ctx: ctx, admittedWhileDown: &whileDown}
		var err error
		tg.b, err = sluiceredis.New(client, sluiceredis.WithSpread(), sluiceredis.WithClock(sluice.ClockFunc(func() time.Time { return tg.now })),
			sluiceredis.WithTimeout(10*time.Second), sluiceredis.WithProbeInterval(time.Millisecond),
			sluiceredis.WithLocalFallback(1), sluiceredis.WithKeyPrefix("lincheck-nodefb-"+strconv.FormatUint(seed, 10)))
		if err != nil {
			t.Fatal(err)
		}
		// Two buckets on one master: the one the fault step fails.
		master := ""
		tg.keys = map[string]string{}
		for i := 0; len(tg.keys) < len(tableKeys); i++ {
			k := "k" + strconv.Itoa(i)
			n, err := client.MasterForKey(ctx, tg.b.Key(k))
			if err != nil {
				t.Fatal(err)
			}
			if master == "" {
				master = n.Options().Addr
			}
			if n.Options().Addr == master {
				tg.keys[tableKeys[len(tg.keys)]] = k
			}
		}
		admin := redis.NewClient(&redis.Options{Addr: master, MaxRetries: -1})
		oom := false
		setOOM := func(on bool) {
			v := "0"
			if on {
				v = "1"
			}
			if err := admin.ConfigSet(ctx, "maxmemory", v).Err(); err != nil {
				t.Fatal(err)
			}
			oom, tg.down = on, on
		}
		var fns []func()
		for i := range callers {
			c := &targetCaller{s: s, tg: tg, id: i, keys: len(tableKeys), burst: burst}
			fns = append(fns, c.step)
		}
		fns = append(fns, func() {
			if s.rng.IntN(2) == 0 {
				return
			}
			setOOM(!oom)
			if oom {
				faults++
			}
			s.tracef("master %s refuses writes: %v", master, oom)
		})
		v := ""
		for range steps / 20 {
			s.run(20, fns)
			if len(s.errs) > 0 {
				setOOM(false)
				t.Fatalf("seed %d: %s; last steps:\n%s", seed, s.errs[0], tail(strings.Join(s.trace, "\n"), 30))
			}
			if v = windowViolation(s.kept, targetSpec(len(tableKeys), burst).Params); v != "" {
				break
			}
		}
		setOOM(false)
		admin.Close()
		if _, ok := replaySeed(t); ok {
			t.Logf("seed %d:\n%s", seed, strings.Join(s.trace, "\n"))
		}
		if v != "" {
			caught++
			t.Errorf("seed %d: %s (replay: LINCHECK_SEED=%d); last steps:\n%s", seed, v, seed, tail(strings.Join(s.trace, "\n"), 40))
		}
	}
	if faults == 0 || whileDown == 0 {
		t.Errorf("%d master failures, %d decisions admitted while it refused writes: the fallback was not exercised", faults, whileDown)
	}
	t.Logf("%d master failures over the seeds, %d decisions admitted locally; %d seeds broke the window bound", faults, whileDown, caught)
}

// nodeTarget is a target on a Redis Cluster backend whose clock the
// scheduler sets to each call's instant.
type nodeTarget struct {
	s    *sched
	ctx  context.Context
	b    *sluiceredis.Backend
	now  time.Time         // the backend's clock
	keys map[string]string // the scheduler's key names to bucket keys
	down bool              // the master refuses writes

	admittedWhileDown *int
}

func (n *nodeTarget) op(key string, cost int64) stack.Op {
	return stack.Op{Key: n.keys[key], Rate: int64(testRate), Period: time.Second, Burst: 3, Cost: cost}
}

func (n *nodeTarget) take(key string, t time.Time, k int) (bool, int64, grant) {
	n.now = t
	out, err := n.b.Take(n.ctx, t, []stack.Op{n.op(key, int64(k))})
	if err != nil {
		n.s.errs = append(n.s.errs, fmt.Sprintf("step %d: take %d of %s: %v", len(n.s.trace), k, key, err))
		return false, 0, grant{}
	}
	rem := int64(remainingUnknown)
	if len(out.Remaining) == 1 {
		rem = out.Remaining[0]
	}
	if out.Denied < 0 && n.down {
		*n.admittedWhileDown++
	}
	return out.Denied < 0, rem, grant{at: t, left: int64(k)}
}

func (n *nodeTarget) giveBack(key string, g *grant, k int) error {
	if g.at.IsZero() {
		return errors.New("a give-back without a take")
	}
	n.now = at(n.s.now)
	op := n.op(key, -int64(k))
	op.TakenAt, op.Taken = g.at, g.left
	g.left -= int64(k)
	return n.b.Adjust(n.ctx, n.now, []stack.Op{op})
}

// startCluster starts masters cluster-enabled redis-servers and joins them
// (redis-cli --cluster create), then asks each until it reports
// cluster_state:ok. It skips without redis-cli or cluster mode.
func startCluster(t *testing.T, masters int) []string {
	t.Helper()
	redistest.RequireServer(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not on PATH: cannot create a cluster")
	}
	var addrs []string
	for range masters {
		addrs = append(addrs, redistest.Start(t, "--cluster-enabled", "yes").Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		if strings.Contains(string(out), "cluster support disabled") {
			t.Skipf("redis-server has no cluster mode: %s", out)
		}
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		deadline := time.Now().Add(30 * time.Second)
		for {
			info, _ := c.ClusterInfo(context.Background()).Result()
			if strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				t.Fatalf("cluster node %s not ok: %s", a, info)
			}
		}
		c.Close()
	}
	return addrs
}

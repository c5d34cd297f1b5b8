package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// keyOn returns a bucket key (plain names) whose Redis key is on master
// addr and not in any slot of avoid.
func keyOn(t testing.TB, c *redis.ClusterClient, b *sluiceredis.Backend, addr string, avoid ...int) string {
	t.Helper()
	for i := 0; i < 100000; i++ {
		k := fmt.Sprintf("k%d", i)
		rk := b.Key(k)
		s := sluiceredis.Slot(rk)
		if nodeOf(t, c, rk) == addr && !containsInt(avoid, s) {
			return k
		}
	}
	t.Fatalf("no key on %s", addr)
	return ""
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// replicaInSync waits until master's replica has every write the master
// had when it was called: a write on one connection, then WAIT for one
// replica to acknowledge it (no polling).
func replicaInSync(t testing.TB, master string, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventLimit)
	defer cancel()
	conn := node(t, master).Conn()
	defer conn.Close()
	if err := conn.Set(ctx, key, "sync", 0).Err(); err != nil {
		t.Fatalf("a write on %s: %v", master, err)
	}
	if n, err := conn.Wait(ctx, 1, 0).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT for %s's replica: %d, %v", master, n, err)
	}
}

// replicaOf returns the address of master's replica among addrs, asking
// each node its role (a replica knows its master at once; the cluster's
// view of it follows by gossip).
func replicaOf(t testing.TB, addrs []string, master string) string {
	t.Helper()
	host, port, _ := strings.Cut(master, ":")
	for _, a := range addrs {
		role, err := node(t, a).Do(context.Background(), "ROLE").Slice()
		if err != nil {
			t.Fatalf("ROLE of %s: %v", a, err)
		}
		if len(role) >= 3 && role[0] == "slave" && role[1] == host && fmt.Sprint(role[2]) == port {
			return a
		}
	}
	t.Fatalf("no replica of %s among %v", master, addrs)
	return ""
}

// takeOver makes replica the master of its failed master's slots now
// (CLUSTER FAILOVER TAKEOVER: no failure detection to wait for) and waits
// until the other nodes and client route slot to it.
func takeOver(t testing.TB, client *redis.ClusterClient, replica, other string, slot int) {
	t.Helper()
	ctx := context.Background()
	if err := node(t, replica).Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER TAKEOVER on %s: %v", replica, err)
	}
	o := node(t, other)
	eventually(t, "slot "+strconv.Itoa(slot)+" served by "+replica, func() bool {
		ranges, err := o.ClusterSlots(ctx).Result() //lint:ignore SA1019 CLUSTER SHARDS is Redis 7 only
		if err != nil {
			return false
		}
		for _, r := range ranges {
			if slot >= int(r.Start) && slot <= int(r.End) {
				return r.Nodes[0].Addr == replica
			}
		}
		return false
	})
	eventually(t, "the client routing slot "+strconv.Itoa(slot)+" to "+replica, func() bool {
		client.ReloadState(ctx)
		n, err := client.MasterForKey(ctx, keyInSlot(slot))
		return err == nil && n.Options().Addr == replica
	})
}

// keyInSlot returns a key of slot.
func keyInSlot(slot int) string {
	for i := 0; ; i++ {
		if k := "s" + strconv.Itoa(i); sluiceredis.Slot(k) == slot {
			return k
		}
	}
}

func node(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestClusterFaults runs on six nodes (three masters, three replicas): a
// slot of a decision's bucket migrates to another master under traffic,
// then a master is killed and its replica takes over. Decisions never
// admit past a limit, decisions that do not need the failed master go on,
// those that need it fail and, on the injected clock, are not retried
// until the probe interval has passed; they succeed as soon as the replica
// serves the slots. Each step waits for the traffic to have decided, not
// for a span of time.
func TestClusterFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node cluster")
	}
	addrs, srvs := startCluster(t, 3, 1, "--cluster-node-timeout", "3000",
		"--cluster-require-full-coverage", "no", // the other masters serve while B's slots have none
		"--repl-diskless-sync", "no") // the replicas' first sync starts at once (no diskless delay)
	client, _ := newClusterClient(t, addrs, fastRetries)
	ctx := context.Background()
	masters := clusterMasters(t, client, 3)
	clock := limitertest.NewClock(limitertest.Start)
	const probe = 100 * time.Millisecond
	b, err := sluiceredis.New(client, sluiceredis.WithSpread(), sluiceredis.WithClock(clock),
		sluiceredis.WithTimeout(5*time.Second), sluiceredis.WithProbeInterval(probe),
		sluiceredis.WithKeyPrefix(uniquePrefix("fault")))
	if err != nil {
		t.Fatal(err)
	}
	nA, nB, nC := masters[0], masters[1], masters[2]
	kA1 := keyOn(t, client, b, nA)
	kA2 := keyOn(t, client, b, nA, sluiceredis.Slot(b.Key(kA1)))
	kB := keyOn(t, client, b, nB)
	const burstA1 = 1000000 // every decision passes: the count must match exactly
	op := func(k string, burst int64) stack.Op {
		return stack.Op{Key: k, Rate: 1, Period: time.Hour, Burst: burst, Cost: 1}
	}
	all := []stack.Op{op(kA1, burstA1), op(kA2, 100000), op(kB, 100000)}

	// A slot migrates from A to C while eight goroutines decide on A (two
	// slots: one cross-slot call, batched) and on A and B.
	var decided, admitted, failed atomic.Int64
	var prog progress
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		dec := all // A and B: two calls
		if g%2 == 1 {
			dec = all[:2] // A alone: batched with A's other decisions, two slots
		}
		wg.Go(func() {
			defer prog.bump()
			for !stop.Load() {
				out, err := b.Take(ctx, clock.Now(), append([]stack.Op(nil), dec...))
				switch {
				case err != nil && errors.Is(err, sluiceredis.ErrUnavailable):
					failed.Add(1)
				case err != nil:
					t.Errorf("migration: %v", err)
					stop.Store(true)
				case out.Denied < 0:
					admitted.Add(1)
				}
				decided.Add(1)
				prog.bump()
			}
		})
	}
	// traffic waits until the goroutines have made n more decisions.
	// Each step passes the probe interval first: a master that failed a
	// decision (a redirection the client gave up on) is asked again.
	traffic := func(n int64, when string) {
		t.Helper()
		clock.Advance(probe)
		d0 := decided.Load()
		prog.await(t, fmt.Sprintf("%d decisions %s", n, when), func() bool { return decided.Load()-d0 >= n || stop.Load() })
	}
	slot := sluiceredis.Slot(b.Key(kA1))
	a, c := node(t, nA), node(t, nC)
	idA, idC := a.ClusterMyID(ctx).Val(), c.ClusterMyID(ctx).Val()
	traffic(40, "before the migration")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	atStart := admitted.Load()
	must(c.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", idA).Err())
	must(a.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", idC).Err())
	traffic(40, "with the slot migrating, its keys on A")
	host, port, _ := strings.Cut(nC, ":")
	for {
		keys, err := a.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		must(err)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(a.Do(ctx, args...).Err())
	}
	traffic(40, "with the slot migrating, its keys on C")
	for _, n := range []string{nC, nA, nB} { // the destination first, then the source
		must(node(t, n).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", idC).Err())
	}
	during := admitted.Load() - atStart
	traffic(40, "after the migration")
	stop.Store(true)
	wg.Wait()
	if during == 0 {
		t.Error("no decision was admitted while the slot migrated")
	}
	// The bucket, now on C, holds exactly what was taken (a call cut
	// short may have taken unseen): no decision was lost or counted
	// twice by the move.
	eventually(t, "the client sees the slot on C", func() bool {
		client.ReloadState(ctx)
		return nodeOf(t, client, b.Key(kA1)) == nC
	})
	clock.Advance(probe) // a master the last decisions failed on is asked again
	probeA := []stack.Op{op(kA1, burstA1)}
	probeA[0].Cost = 0
	out, err := b.Take(ctx, clock.Now(), probeA)
	if err != nil || out.Denied >= 0 {
		t.Fatalf("after the migration: %+v, %v", out, err)
	}
	if rem, n, f := out.Remaining[0], admitted.Load(), failed.Load(); rem > burstA1-n || rem < burstA1-n-f {
		t.Errorf("after %d admissions and %d failures, %d left of %d", n, f, rem, burstA1)
	}
	if ok, _ := c.Exists(ctx, b.Key(kA1)).Result(); ok != 1 && admitted.Load() < burstA1 {
		t.Errorf("bucket %s not on C after the migration", b.Key(kA1))
	}
	t.Logf("migration under traffic: %d admitted (%d while the slot moved), %d unavailable, %d left", admitted.Load(), during, failed.Load(), out.Remaining[0])

	// Kill B once its replica has every write: decisions on A alone go
	// on; a decision that needs B fails, and the next ones fail at once
	// (B is not asked) until the clock passes the probe interval; once the
	// replica has taken over, they succeed.
	slotB := sluiceredis.Slot(b.Key(kB))
	replicaB := replicaOf(t, addrs, nB)
	replicaInSync(t, nB, keyInSlot(slotB))
	var srvB = srvs[0]
	for _, s := range srvs {
		if s.Addr == nB {
			srvB = s
		}
	}
	srvB.Stop()
	onlyA := []stack.Op{op(kA2, 100000)}
	needB := func(step string) error {
		t.Helper()
		if _, err := b.Take(ctx, clock.Now(), append([]stack.Op(nil), onlyA...)); err != nil {
			t.Fatalf("%s: a decision on A alone failed while B is down: %v", step, err)
		}
		out, err := b.Take(ctx, clock.Now(), append([]stack.Op(nil), all[1:]...))
		if err != nil && !errors.Is(err, sluiceredis.ErrUnavailable) {
			t.Fatalf("%s: a decision needing B: %v, want ErrUnavailable", step, err)
		}
		if err == nil && out.Denied >= 0 {
			t.Fatalf("%s: a decision needing B denied: %+v", step, out)
		}
		return err
	}
	notRetried := func(err error) bool { return err != nil && strings.Contains(err.Error(), "not retried") }
	if err := needB("B killed"); err == nil || notRetried(err) {
		t.Fatalf("B killed: the first decision needing B: %v, want B's failure", err)
	}
	for i := 0; i < 3; i++ {
		if err := needB("within the probe interval"); !notRetried(err) {
			t.Fatalf("within the probe interval: a decision needing B: %v, want it failed without asking B", err)
		}
	}
	clock.Advance(probe)
	if err := needB("probe interval passed"); err == nil || notRetried(err) {
		t.Fatalf("probe interval passed: a decision needing B: %v, want B asked (and failing)", err)
	}
	if err := needB("probe failed"); !notRetried(err) {
		t.Fatalf("after a failed probe: %v, want B not asked again", err)
	}
	takeOver(t, client, replicaB, nA, slotB)
	if err := needB("replica took over"); err != nil {
		t.Fatalf("a decision needing B's slots after the takeover: %v", err)
	}
}

// clusterMasters returns the addresses of the cluster's masters, in slot
// order, failing t unless there are want of them.
func clusterMasters(t testing.TB, client *redis.ClusterClient, want int) []string {
	t.Helper()
	var masters []string
	slots, err := client.ClusterSlots(context.Background()).Result() //lint:ignore SA1019 CLUSTER SHARDS is Redis 7 only
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slots {
		if !containsStr(masters, s.Nodes[0].Addr) {
			masters = append(masters, s.Nodes[0].Addr)
		}
	}
	if len(masters) != want {
		t.Fatalf("masters %v, want %d", masters, want)
	}
	return masters
}

func containsStr(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

package redisbackend_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
	"github.com/sluicehq/sluice/stack/redisbackend"
)

// keyOn returns a bucket key (plain names) whose Redis key is on master
// addr and not in any slot of avoid.
func keyOn(t testing.TB, c *redis.ClusterClient, b *redisbackend.Backend, addr string, avoid ...int) string {
	t.Helper()
	for i := 0; i < 100000; i++ {
		k := fmt.Sprintf("k%d", i)
		rk := b.Key(k)
		s := redisbackend.Slot(rk)
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

// waitFor polls cond every 50 ms until it holds or d has passed.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func node(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestClusterFaults runs on six nodes (three masters, three replicas): a
// slot of a decision's bucket migrates to another master under traffic,
// then a master is killed and its replica promoted. Decisions never admit
// past a limit, decisions that do not need the failed master go on, and
// the others come back after the promotion.
func TestClusterFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node cluster")
	}
	addrs, srvs := startCluster(t, 3, 1, "--cluster-node-timeout", "3000",
		"--cluster-require-full-coverage", "no") // the other masters serve while B's slots have none
	client, _ := newClusterClient(t, addrs)
	ctx := context.Background()
	masters := clusterMasters(t, client, 3)
	clock := limitertest.NewClock(limitertest.Start)
	b, err := redisbackend.New(client, redisbackend.WithSpread(), redisbackend.WithClock(clock.Now),
		redisbackend.WithTimeout(300*time.Millisecond), redisbackend.WithProbeInterval(100*time.Millisecond),
		redisbackend.WithKeyPrefix(uniquePrefix("fault")))
	if err != nil {
		t.Fatal(err)
	}
	nA, nB, nC := masters[0], masters[1], masters[2]
	kA1 := keyOn(t, client, b, nA)
	kA2 := keyOn(t, client, b, nA, redisbackend.Slot(b.Key(kA1)))
	kB := keyOn(t, client, b, nB)
	const burstA1 = 1000000 // every decision passes: the count must match exactly
	op := func(k string, burst int64) stack.Op {
		return stack.Op{Key: k, Rate: 1, Period: time.Hour, Burst: burst, Cost: 1}
	}
	all := []stack.Op{op(kA1, burstA1), op(kA2, 100000), op(kB, 100000)}

	// A slot migrates from A to C while eight goroutines decide on A (two
	// slots: one cross-slot call, batched) and on A and B.
	var admitted, failed atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		dec := all // A and B: two calls
		if g%2 == 1 {
			dec = all[:2] // A alone: batched with A's other decisions, two slots
		}
		wg.Go(func() {
			for !stop.Load() {
				out, err := b.Take(ctx, clock.Now(), append([]stack.Op(nil), dec...))
				switch {
				case err != nil && errors.Is(err, redisbackend.ErrUnavailable):
					failed.Add(1)
				case err != nil:
					t.Errorf("migration: %v", err)
					return
				case out.Denied < 0:
					admitted.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	slot := redisbackend.Slot(b.Key(kA1))
	a, c := node(t, nA), node(t, nC)
	idA, idC := a.ClusterMyID(ctx).Val(), c.ClusterMyID(ctx).Val()
	time.Sleep(100 * time.Millisecond)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	atStart := admitted.Load()
	must(c.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", idA).Err())
	must(a.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", idC).Err())
	time.Sleep(100 * time.Millisecond)
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
	time.Sleep(100 * time.Millisecond)
	for _, n := range []string{nC, nA, nB} { // the destination first, then the source
		must(node(t, n).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", idC).Err())
	}
	during := admitted.Load() - atStart
	time.Sleep(200 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if during == 0 {
		t.Error("no decision was admitted while the slot migrated")
	}
	// The bucket, now on C, holds exactly what was taken (a call cut
	// short may have taken unseen): no decision was lost or counted
	// twice by the move.
	client.ReloadState(ctx)
	waitFor(t, 5*time.Second, "the client sees the slot on C", func() bool { return nodeOf(t, client, b.Key(kA1)) == nC })
	probe := []stack.Op{op(kA1, burstA1)}
	probe[0].Cost = 0
	out, err := b.Take(ctx, clock.Now(), probe)
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

	// Kill B (after its replica has synced): decisions on A only go on;
	// decisions that need B fail (the policy applies) until the replica
	// is promoted, then succeed.
	waitFor(t, 20*time.Second, "B's replica in sync", func() bool {
		info, _ := node(t, nB).Info(ctx, "replication").Result()
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	})
	var srvB = srvs[0]
	for _, s := range srvs {
		if s.Addr == nB {
			srvB = s
		}
	}
	srvB.Stop()
	onlyA := []stack.Op{op(kA2, 100000)}
	sawFail := false
	promoted := func() bool {
		s, err := node(t, nA).ClusterSlots(ctx).Result() //lint:ignore SA1019 CLUSTER SHARDS is Redis 7 only
		if err != nil {
			return false
		}
		bs := redisbackend.Slot(b.Key(kB))
		for _, r := range s {
			if bs >= int(r.Start) && bs <= int(r.End) {
				return r.Nodes[0].Addr != nB
			}
		}
		return false
	}
	deadline := time.Now().Add(30 * time.Second)
	for !promoted() {
		if time.Now().After(deadline) {
			t.Fatal("B's replica not promoted within 30 s")
		}
		if _, err := b.Take(ctx, clock.Now(), append([]stack.Op(nil), onlyA...)); err != nil {
			t.Fatalf("a decision on A alone failed while B is down: %v", err)
		}
		if _, err := b.Take(ctx, clock.Now(), append([]stack.Op(nil), all[1:]...)); err != nil {
			if !errors.Is(err, redisbackend.ErrUnavailable) {
				t.Fatalf("a decision needing B: %v, want ErrUnavailable", err)
			}
			sawFail = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !sawFail {
		t.Error("no decision needing B failed while B was down")
	}
	waitFor(t, 10*time.Second, "decisions needing B succeed after the promotion", func() bool {
		out, err := b.Take(ctx, clock.Now(), append([]stack.Op(nil), all[1:]...))
		return err == nil && out.Denied < 0
	})
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

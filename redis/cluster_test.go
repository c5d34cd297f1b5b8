package redis_test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/redis/redistest"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// startCluster starts masters·(1+replicas) cluster-enabled redis-servers
// (extra arguments go to each) and joins them with redis-cli --cluster
// create, then waits until every node reports cluster_state:ok (asking
// each until it does, within eventLimit). It skips
// (with the reason) only when redis-cli or cluster mode is unavailable.
func startCluster(t testing.TB, masters, replicas int, extra ...string) ([]string, []*redistest.Server) {
	t.Helper()
	redistest.RequireServer(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not on PATH: cannot create a cluster")
	}
	var addrs []string
	var srvs []*redistest.Server
	for i := 0; i < masters*(1+replicas); i++ {
		srv := startRedis(t, append([]string{"--cluster-enabled", "yes"}, extra...)...) // each in its own --dir
		addrs = append(addrs, srv.Addr)
		srvs = append(srvs, srv)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		if strings.Contains(string(out), "cluster support disabled") {
			t.Skipf("redis-server has no cluster mode: %s", out)
		}
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		var info string
		eventually(t, "cluster node "+a+" ok", func() bool {
			info, _ = c.ClusterInfo(context.Background()).Result()
			return strings.Contains(info, "cluster_state:ok")
		})
		c.Close()
	}
	return addrs, srvs
}

// A three-node Redis Cluster: the script's keys share a hash tag, so a
// three-limit decision runs in one slot on one node, and decides as on a
// single server.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	addrs, _ := startCluster(t, 3, 0)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	for _, tag := range []string{"alpha", "beta", "gamma"} {
		clock := limitertest.NewClock(limitertest.Start)
		b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithHashTag(tag),
			sluiceredis.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		s, err := stack.New(threeLimits, stack.WithClock(clock), stack.WithBackend(b), stack.WithFailClosed())
		if err != nil {
			t.Fatal(err)
		}
		allowed := 0
		for i := 0; i < 150; i++ {
			d, err := s.Allow(ctx, threeKeys)
			if err != nil {
				t.Fatalf("tag %s: %v", tag, err)
			}
			if d.Allowed {
				allowed++
			}
		}
		if allowed != 100 {
			t.Errorf("tag %s: allowed %d of 150 against the 100/s tool limit, want 100", tag, allowed)
		}
		// All three buckets are on the one node that owns the tag's slot.
		slot := client.ClusterKeySlot(ctx, b.KeyPrefix()).Val()
		nodesWithKeys := 0
		err = client.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			keys, err := node.Keys(ctx, b.KeyPrefix()+"*").Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				nodesWithKeys++
				if len(keys) != 3 {
					t.Errorf("tag %s: node %s holds %d keys, want the 3 buckets", tag, node.Options().Addr, len(keys))
				}
				if n := node.ClusterCountKeysInSlot(ctx, int(slot)).Val(); n != 3 {
					t.Errorf("tag %s: slot %d holds %d keys on %s, want 3", tag, slot, n, node.Options().Addr)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if nodesWithKeys != 1 {
			t.Errorf("tag %s: buckets found on %d nodes, want 1", tag, nodesWithKeys)
		}
	}
}

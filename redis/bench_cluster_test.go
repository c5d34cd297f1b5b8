package redis_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
)

// BenchmarkCluster measures three stacked limits decided on a three-master
// Redis Cluster with WithSpread, by how many masters hold the decision's
// buckets (node1, node2, node3), against the same stack on a single
// redis-server in the same run (single), from one goroutine and from 16.
// SLUICE_BENCH_ROUNDS=N runs N rounds, each running every side once.
// Metrics: ns/op per decision, calls/op (script calls per decision over
// all masters), server-µs/call and server-µs/op (INFO commandstats,
// summed over the masters).
func BenchmarkCluster(b *testing.B) {
	ctx := context.Background()
	srv := startRedis(b)
	single, _ := newClient(b, srv.Addr)
	addrs, _ := startCluster(b, 3, 0)
	cluster, rt := newClusterClient(b, addrs)
	var masters []*redis.Client
	for _, a := range addrs {
		masters = append(masters, redis.NewClient(&redis.Options{Addr: a}))
	}
	b.Cleanup(func() {
		for _, m := range masters {
			m.Close()
		}
	})
	side := func(client redis.UniversalClient, keys sluice.Keys, opts ...sluiceredis.Option) func(b *testing.B) {
		opts = append(opts, sluiceredis.WithKeyPrefix(uniquePrefix("bench")), sluiceredis.WithTimeout(5*time.Second))
		be, err := sluiceredis.New(client, opts...)
		if err != nil {
			b.Fatal(err)
		}
		if err := be.Load(ctx); err != nil {
			b.Fatal(err)
		}
		s, err := stack.New(benchLimits, stack.WithBackend(be), stack.WithFailClosed())
		if err != nil {
			b.Fatal(err)
		}
		return func(b *testing.B) {
			d, err := s.Allow(ctx, keys)
			if err != nil || !d.Allowed {
				b.Fatalf("%+v, %v", d, err)
			}
		}
	}
	type cside struct {
		name    string
		decide  func(b *testing.B)
		servers []*redis.Client
	}
	sides := []cside{{"single", side(single, threeKeys), []*redis.Client{single}}}
	for n := 1; n <= 3; n++ {
		be, _ := sluiceredis.New(cluster, sluiceredis.WithSpread(), sluiceredis.WithKeyPrefix(uniquePrefix("bench")))
		tg, tl, cl := valuesOnNodes(b, cluster, be, n)
		keys := sluice.NewKeys("targetName", tg, "toolName", tl, "caller", cl)
		sides = append(sides, cside{"node" + strconv.Itoa(n), sideWith(b, be, keys), masters})
	}
	par := (16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
	rounds := 1
	if n, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for range rounds {
		for _, conc := range []int{1, 16} {
			for _, s := range sides {
				b.Run("g"+strconv.Itoa(conc)+"/"+s.name, func(b *testing.B) {
					for _, m := range s.servers {
						if err := m.ConfigResetStat(ctx).Err(); err != nil {
							b.Fatal(err)
						}
					}
					before := rt.n.Load()
					if conc == 1 {
						for b.Loop() {
							s.decide(b)
						}
					} else {
						b.SetParallelism(par)
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								s.decide(b)
							}
						})
					}
					var calls, usec float64
					for _, m := range s.servers {
						c, u := evalshaStats(b, m)
						calls += c
						usec += u
					}
					if calls > 0 {
						b.ReportMetric(usec/calls, "server-µs/call")
						b.ReportMetric(calls/float64(b.N), "calls/op")
						b.ReportMetric(usec/float64(b.N), "server-µs/op")
					}
					if s.name != "single" {
						b.ReportMetric(float64(rt.n.Load()-before)/float64(b.N), "roundtrips/op")
					}
				})
			}
		}
	}
}

// sideWith returns a decision of benchLimits for keys through be.
func sideWith(b *testing.B, be *sluiceredis.Backend, keys sluice.Keys) func(b *testing.B) {
	if err := be.Load(context.Background()); err != nil {
		b.Fatal(err)
	}
	s, err := stack.New(benchLimits, stack.WithBackend(be), stack.WithFailClosed())
	if err != nil {
		b.Fatal(err)
	}
	return func(b *testing.B) {
		d, err := s.Allow(context.Background(), keys)
		if err != nil || !d.Allowed {
			b.Fatalf("%+v, %v", d, err)
		}
	}
}

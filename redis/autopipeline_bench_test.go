package redis_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
)

// BenchmarkAutoPipeline measures go-redis's experimental AutoPipeline
// (v9.22.0 and later; this module requires v9.23.0) against the backend's
// own batching (issue #39 item 5): a Stack on a Backend over the plain
// client with its default batching ("batcher"), against one over the
// client's AutoPipeliner with the backend's batching off (WithMaxBatch(1):
// each decision its own EVALSHA, which go-redis pipelines with the
// others in flight). One limit and three, from 16 and 64 goroutines, every
// decision admitted. Metrics: ns/op per decision, the server process's CPU
// per decision (redis-cpu-µs/op, from /proc) and EVALSHA's command time per
// decision (server-µs/op, INFO commandstats). SLUICE_BENCH_ROUNDS=N
// alternates the sides N times.
//
//	cd redis && SLUICE_BENCH_ROUNDS=3 go test -run '^$' -bench AutoPipeline -benchtime 20000x
func BenchmarkAutoPipeline(b *testing.B) {
	srv := startRedis(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	b.Cleanup(func() { client.Close() })
	cpuTime, ok := serverCPU(b, srv, client)
	if !ok {
		b.Skip("the redis-server's CPU time cannot be read")
	}
	ap, err := client.AutoPipeline()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	side := func(c redis.UniversalClient, cfg stack.Config, opts ...sluiceredis.Option) func() error {
		be, err := sluiceredis.New(c, append([]sluiceredis.Option{sluiceredis.WithKeyPrefix(uniquePrefix("ap")),
			sluiceredis.WithTimeout(5 * time.Second)}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		if err := be.Load(ctx); err != nil {
			b.Fatal(err)
		}
		s, err := stack.New(cfg, stack.WithBackend(be), stack.WithFailClosed())
		if err != nil {
			b.Fatal(err)
		}
		return func() error {
			d, err := s.Allow(ctx, threeKeys)
			if err == nil && !d.Allowed {
				b.Errorf("denied: %+v", d)
			}
			return err
		}
	}
	type sd struct {
		name   string
		decide func() error
	}
	groups := []struct {
		name  string
		sides []sd
	}{
		{"1limit", []sd{{"batcher", side(client, oneLimit)}, {"autopipeline", side(ap, oneLimit, sluiceredis.WithMaxBatch(1))}}},
		{"3limits", []sd{{"batcher", side(client, benchLimits)}, {"autopipeline", side(ap, benchLimits, sluiceredis.WithMaxBatch(1))}}},
	}
	rounds := 1
	if n, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for range rounds {
		for _, g := range groups {
			for _, conc := range []int{16, 64} {
				for _, s := range g.sides {
					b.Run(g.name+"/g"+strconv.Itoa(conc)+"/"+s.name, func(b *testing.B) {
						if err := client.ConfigResetStat(ctx).Err(); err != nil {
							b.Fatal(err)
						}
						cpu0 := cpuTime()
						b.SetParallelism((conc + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								if err := s.decide(); err != nil {
									b.Error(err)
									return
								}
							}
						})
						cpu1 := cpuTime()
						b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "redis-cpu-µs/op")
						calls, usec := evalshaStats(b, client)
						if calls > 0 {
							b.ReportMetric(usec/float64(b.N), "server-µs/op")
							b.ReportMetric(calls/float64(b.N), "calls/op")
						}
					})
				}
			}
		}
	}
}

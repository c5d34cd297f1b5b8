package redis_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
)

// benchLimits are three stacked limits high enough that every decision is
// an admission (each still reads and writes three buckets).
var benchLimits = stack.Config{RateLimits: []stack.RateLimit{
	{RateLimitID: "per-target", DimensionKeys: []string{"targetName"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "*"}, Requests: []stack.Rate{{Rate: 10_000_000, Period: stack.Second}}}}},
	{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 5_000_000, Period: stack.Second}}}}},
	{RateLimitID: "per-tool", DimensionKeys: []string{"targetName", "toolName"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "*", "toolName": "*"}, Requests: []stack.Rate{{Rate: 1_000_000, Period: stack.Second}}}}},
}}

// oneLimit is benchLimits' per-caller limit alone.
var oneLimit = stack.Config{RateLimits: benchLimits.RateLimits[1:2]}

// evalshaStats returns the calls and server microseconds of EVALSHA and
// EVAL since the last CONFIG RESETSTAT (INFO commandstats).
func evalshaStats(b *testing.B, c *redis.Client) (calls, usec float64) {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(line[strings.Index(line, ":")+1:]), ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls += n
			case "usec":
				usec += n
			}
		}
	}
	return calls, usec
}

type limiter struct {
	name   string
	decide func(b *testing.B)
}

type benchGroup struct {
	name  string
	sides []limiter
}

// BenchmarkRedis compares sluice's Redis backend with
// github.com/go-redis/redis_rate v10 on one redis-server: one limit, and
// three stacked limits (sluice: one script call; redis_rate: three Allow
// calls), from one goroutine and from 16. SLUICE_BENCH_ROUNDS=N runs N
// rounds, each running every side once, so that the sides alternate. Metrics: ns/op per decision, server-µs/call
// (usec_per_call of EVALSHA in INFO commandstats, reset before each run)
// and calls/op.
func BenchmarkRedis(b *testing.B) {
	srv := startRedis(b)
	client, _ := newClient(b, srv.Addr)
	ctx := context.Background()
	rl := redis_rate.NewLimiter(client)
	sluiceSide := func(cfg stack.Config, keys sluice.Keys) func(b *testing.B) {
		be, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(uniquePrefix("bench")), sluiceredis.WithTimeout(5*time.Second))
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
		return func(b *testing.B) {
			d, err := s.Allow(ctx, keys)
			if err != nil || !d.Allowed {
				b.Fatalf("%+v, %v", d, err)
			}
		}
	}
	rrSide := func(n int) func(b *testing.B) {
		all := []struct {
			key   string
			limit redis_rate.Limit
		}{
			{"rr:caller:c", redis_rate.PerSecond(5_000_000)},
			{"rr:target:t", redis_rate.PerSecond(10_000_000)},
			{"rr:tool:t,x", redis_rate.PerSecond(1_000_000)},
		}[:n]
		return func(b *testing.B) {
			for _, l := range all {
				res, err := rl.Allow(ctx, l.key, l.limit)
				if err != nil || res.Allowed == 0 {
					b.Fatalf("%+v, %v", res, err)
				}
			}
		}
	}
	groups := []benchGroup{
		{"1limit", []limiter{{"sluice", sluiceSide(oneLimit, threeKeys)}, {"redis_rate", rrSide(1)}}},
		{"3limits", []limiter{{"sluice", sluiceSide(benchLimits, threeKeys)}, {"redis_rate", rrSide(3)}}},
	}
	par := (16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
	rounds := 1
	if n, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for range rounds {
		runRound(b, groups, par, client)
	}
}

// runRound runs every side of every group once, in order: rounds
// interleave the sides (go test's -count would repeat each side before
// the next).
func runRound(b *testing.B, groups []benchGroup, par int, client *redis.Client) {
	ctx := context.Background()
	for _, g := range groups {
		for _, conc := range []int{1, 16} {
			for _, side := range g.sides {
				name := g.name + "/g" + strconv.Itoa(conc) + "/" + side.name
				b.Run(name, func(b *testing.B) {
					if err := client.ConfigResetStat(ctx).Err(); err != nil {
						b.Fatal(err)
					}
					if conc == 1 {
						for b.Loop() {
							side.decide(b)
						}
					} else {
						b.SetParallelism(par)
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								side.decide(b)
							}
						})
					}
					calls, usec := evalshaStats(b, client)
					if calls > 0 {
						b.ReportMetric(usec/calls, "server-µs/call")
						b.ReportMetric(calls/float64(b.N), "calls/op")
						b.ReportMetric(usec/float64(b.N), "server-µs/op")
					}
				})
			}
		}
	}
}

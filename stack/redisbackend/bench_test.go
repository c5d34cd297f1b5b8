package redisbackend_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/redisbackend"
)

// benchLimits are three stacked limits high enough that every decision is
// an admission (each still reads and writes three buckets).
var benchLimits = stack.Config{RateLimits: []stack.RateLimit{
	{RateLimitID: "per-target", DimensionKeys: []string{"targetName"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "*"}, Requests: []stack.Rate{{Rate: 10_000_000, Period: stack.PeriodSecond}}}}},
	{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 5_000_000, Period: stack.PeriodSecond}}}}},
	{RateLimitID: "per-tool", DimensionKeys: []string{"targetName", "toolName"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "*", "toolName": "*"}, Requests: []stack.Rate{{Rate: 1_000_000, Period: stack.PeriodSecond}}}}},
}}

// BenchmarkStack3 compares one three-limit decision through sluice's Redis
// backend (one script call) with github.com/go-redis/redis_rate doing the
// same three limits (three Allow calls), against the same redis-server.
func BenchmarkStack3(b *testing.B) {
	srv := startRedis(b)
	client, rt := newClient(b, srv.Addr)
	ctx := context.Background()
	report := func(b *testing.B, trips int64) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		b.ReportMetric(float64(trips)/float64(b.N), "roundtrips/op")
	}

	be, err := redisbackend.New(client, redisbackend.WithKeyPrefix(uniquePrefix("bench")), redisbackend.WithTimeout(time.Second))
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
	decide := func(b *testing.B) {
		d, err := s.Allow(ctx, threeKeys)
		if err != nil || !d.Allowed {
			b.Fatalf("%+v, %v", d, err)
		}
	}
	b.Run("sluice-redis", func(b *testing.B) {
		b.ReportAllocs()
		before := rt.n.Load()
		for b.Loop() {
			decide(b)
		}
		report(b, rt.n.Load()-before)
	})
	b.Run("sluice-redis/parallel", func(b *testing.B) {
		b.ReportAllocs()
		before := rt.n.Load()
		b.SetParallelism(8) // 8 goroutines per CPU: many concurrent callers
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				decide(b)
			}
		})
		report(b, rt.n.Load()-before)
	})

	rl := redis_rate.NewLimiter(client)
	limits := []struct {
		key   string
		limit redis_rate.Limit
	}{
		{"rr:target:t", redis_rate.PerSecond(10_000_000)},
		{"rr:caller:c", redis_rate.PerSecond(5_000_000)},
		{"rr:tool:t,x", redis_rate.PerSecond(1_000_000)},
	}
	peer := func(b *testing.B) {
		for _, l := range limits {
			res, err := rl.Allow(ctx, l.key, l.limit)
			if err != nil || res.Allowed == 0 {
				b.Fatalf("%+v, %v", res, err)
			}
		}
	}
	b.Run("redis_rate", func(b *testing.B) {
		b.ReportAllocs()
		before := rt.n.Load()
		for b.Loop() {
			peer(b)
		}
		report(b, rt.n.Load()-before)
	})
	b.Run("redis_rate/parallel", func(b *testing.B) {
		b.ReportAllocs()
		before := rt.n.Load()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				peer(b)
			}
		})
		report(b, rt.n.Load()-before)
	})
}

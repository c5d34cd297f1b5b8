package redis_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
)

// A fleet's pods each build the same Stack on a Backend of one Redis; their
// decisions are then shared. Building them contacts no server.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379",
		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer client.Close()

	b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix("api"), sluiceredis.WithLocalFallback(1.0/6))
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"},
			Requests: []stack.Rate{{Rate: 100, Period: stack.Second}}}}}}}
	if _, err := stack.New(cfg, stack.WithBackend(b)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("keys:", b.KeyPrefix()+"per-caller|requests|0|1:*|5:alice" /* see stack.Op.Key */)

	_, err = sluiceredis.New(client, sluiceredis.WithLocalFallback(2))
	fmt.Println(err)
	// Output:
	// keys: api:{api}:per-caller|requests|0|1:*|5:alice
	// sluice/redis: WithLocalFallback(2): the share is not in (0, 1]
}

type printLogger struct{}

func (printLogger) Printf(_ context.Context, format string, v ...any) { fmt.Printf(format+"\n", v...) }

// QuietLogger drops go-redis's per-failure dial messages and passes the
// rest to your logger; install it once with redis.SetLogger.
func ExampleQuietLogger() {
	l := sluiceredis.QuietLogger(printLogger{})
	ctx := context.Background()
	l.Printf(ctx, "redis: connection pool: failed to dial after %d attempts: %v", 1, "connection refused")
	l.Printf(ctx, "redis: %s", "another message")
	// redis.SetLogger(l)
	// Output:
	// redis: another message
}

// On Redis Cluster, WithPin spreads the buckets over the cluster while
// keeping each caller's buckets of the chosen limits in one slot, so that
// a decision on them is one call to one node.
func ExampleWithPin() {
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7000"},
		ContextTimeoutEnabled: true})
	defer client.Close()
	b, err := sluiceredis.New(client, sluiceredis.WithPin(func(k sluiceredis.Bucket) string {
		if k.LimitID == "per-caller" || k.LimitID == "per-caller-tool" {
			return k.Value(0) // the caller: dimension 0 of both limits
		}
		return "" // other limits: a tag of their own
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	// Bucket keys as stack.Op.Key describes them: limit, metric, rate
	// index, entry values, request values.
	caller := b.Key("per-caller|requests|0|1:*|5:alice")
	tool := b.Key("per-caller-tool|requests|0|1:*,1:*|5:alice,6:search")
	target := b.Key("per-target|requests|0|1:*|5:alice")
	// The hash tag, between braces, decides the slot: alice's two buckets
	// share one tag, per-target's bucket has a tag of its own.
	fmt.Println(caller)
	fmt.Println(tool)
	fmt.Println(target)
	// Output:
	// sluice:{72b6e072}:per-caller|requests|0|1:*|5:alice
	// sluice:{72b6e072}:per-caller-tool|requests|0|1:*,1:*|5:alice,6:search
	// sluice:{5992d738}:per-target|requests|0|1:*|5:alice
}

// The near-cache of denials is on by default (1 MiB); WithDenialCache
// resizes it and WithoutDenialCache turns it off. DenialCacheStats counts
// its hits and evictions (otelmetric.Metrics.ObserveDenialCache exports
// them). Building a Backend contacts no server.
func ExampleWithDenialCache() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()

	big, _ := sluiceredis.New(client, sluiceredis.WithDenialCache(16<<20)) // 16 MiB, as LOCAL_CACHE_SIZE_IN_BYTES=16777216
	off, _ := sluiceredis.New(client, sluiceredis.WithoutDenialCache())
	hits, evictions := big.DenialCacheStats()
	fmt.Println(hits, evictions)
	hits, evictions = off.DenialCacheStats()
	fmt.Println(hits, evictions)
	// Output:
	// 0 0
	// 0 0
}

package redis_test

// Example_paceFleet: a fleet of pacers over one Redis (the README's "A
// fleet of pacers" section until v0.2). It has no // Output: since it needs
// a Redis server: go test compiles it, and TestPaceStoreTwoProcesses runs
// the same against a real one.

import (
	"log"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/pace"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
)

func Example_paceFleet() {
	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})

	// The quota, shared exactly: every request of every process takes a
	// unit from one Redis-backed stack, keyed by upstream.
	b, err := sluiceredis.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	quota, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "upstreams", "dimensionKeys": ["upstream"],
	  "entries": [{"dimensions": {"upstream": "*"}, "requests": [{"rate": 150, "period": "second"}]}]}]}`), stack.WithBackend(b))
	if err != nil {
		log.Fatal(err)
	}

	// What the processes learn, shared: the quota any of them reads from an
	// upstream's headers, and the pause a 429 imposes on any of them.
	learned, err := sluiceredis.NewPaceStore(rdb)
	if err != nil {
		log.Fatal(err)
	}

	client := &http.Client{Transport: pace.New(http.DefaultTransport,
		pace.WithLimiter(quota, nil),         // keys: pace.Transport.DefaultKeys
		pace.WithStore(learned, time.Second), // read at most once a second per upstream
		pace.WithRetry(3))}
	_ = client // every process of the fleet builds the same client
}

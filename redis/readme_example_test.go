package redis_test

// The README's Redis snippet is the body of this example, verbatim
// (TestReadmeSnippetsAreExamples in the root module checks it). It has no
// // Output: since it needs a Redis server: go test compiles it.

import (
	"log"

	"github.com/redis/go-redis/v9"

	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
)

func Example_fleet() {
	redis.SetLogger(sluiceredis.QuietLogger(nil)) // outages go to the error handler, not one log line per dial
	client := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	b, err := sluiceredis.New(client, sluiceredis.WithLocalFallback(1.0/6)) // six pods: 1/6 each while Redis is down
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := stack.Parse(configJSON) // configJSON: your gateway's rate-limit JSON, a []byte
	if err != nil {
		log.Fatal(err)
	}
	limits, err := stack.New(cfg, stack.WithBackend(b), stack.WithErrorHandler(report)) // report: your func(error) for Redis failures
	if err != nil {
		log.Fatal(err)
	}
	_ = limits // limits.Allow(ctx, keys) now decides for the whole fleet
}

// report receives backend errors and the fallback's transitions
// (*stack.FallbackError).
func report(err error) { log.Print(err) }

var configJSON = []byte(`{"rateLimits": [
  {"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
    {"dimensions": {"caller": "*"}, "requests": [{"rate": 150, "period": "second"}]}]}
]}`)

package redisbackend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
	"github.com/sluicehq/sluice/stack/redisbackend"
)

// A caller whose deadline, shorter than the backend's timeout, passes
// while Redis is slow has given up: that is not Redis failing (which would
// send the whole backend, or a cluster master, to its fallback or to
// failing every call for the probe interval). The read times out as a
// network timeout at that deadline, sometimes before the context reports
// it.
func TestCallerDeadlineIsNotAnOutage(t *testing.T) {
	srv := startRedis(t, "--maxmemory-policy", "noeviction") // its own server: it is paused
	client, _ := newClient(t, srv.Addr)
	admin := node(t, srv.Addr)
	ctx := context.Background()
	clock := limitertest.NewClock(limitertest.Start)
	b, err := redisbackend.New(client, redisbackend.WithClock(clock.Now), redisbackend.WithTimeout(5*time.Second),
		redisbackend.WithKeyPrefix(uniquePrefix("deadline")))
	if err != nil {
		t.Fatal(err)
	}
	op := stack.Op{Key: "k", Rate: 100, Period: time.Second, Burst: 100, Cost: 1}
	if err := admin.Do(ctx, "client", "pause", 10000, "write").Err(); err != nil {
		t.Fatal(err)
	}
	defer admin.Do(ctx, "client", "unpause")
	for i := 0; i < 30; i++ {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		_, err := b.Take(dctx, clock.Now(), []stack.Op{op})
		cancel()
		if err == nil || errors.Is(err, redisbackend.ErrUnavailable) {
			t.Fatalf("decision %d, its caller's deadline passed on a slow server: %v; want the caller's error, not an outage", i, err)
		}
	}
}

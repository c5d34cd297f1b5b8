package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/faultproxy"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// A caller whose deadline, shorter than the backend's timeout, passes
// while Redis is slow has given up: that is not Redis failing (which would
// send the whole backend, or a cluster master, to its fallback or to
// failing every call for the probe interval). The read times out as a
// network timeout at that deadline, sometimes before the context reports
// it. Redis is slow because the proxy holds every request until the test
// releases it (a server paused for a while could answer before a loaded
// machine's deadline). On the fake clock the probe interval never passes:
// had a single one of those failures been taken for an outage, the
// decision after the release would fail without asking Redis.
func TestCallerDeadlineIsNotAnOutage(t *testing.T) {
	srv := startRedis(t)
	proxy := faultproxy.NewProxy(t, srv.Addr)
	client, _ := newClient(t, proxy.Addr)
	ctx := context.Background()
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithTimeout(time.Hour),
		sluiceredis.WithKeyPrefix(uniquePrefix("deadline")))
	if err != nil {
		t.Fatal(err)
	}
	op := stack.Op{Key: "k", Rate: 100, Period: time.Second, Burst: 100, Cost: 1}
	proxy.SetMode(faultproxy.Stall)
	for i := 0; i < 30; i++ {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond) // real time: a network deadline
		_, err := b.Take(dctx, clock.Now(), []stack.Op{op})
		cancel()
		if err == nil || errors.Is(err, sluiceredis.ErrUnavailable) {
			t.Fatalf("decision %d, its caller's deadline passed on a slow server: %v; want the caller's error, not an outage", i, err)
		}
	}
	proxy.Release()
	out, err := b.Take(ctx, clock.Now(), []stack.Op{op})
	if err != nil {
		t.Fatalf("the first decision once Redis answers: %v (an outage was recorded)", err)
	}
	// The held requests never reached Redis: one unit taken of 100.
	if out.Denied != -1 || out.Remaining[0] != 99 {
		t.Errorf("the first decision once Redis answers: %+v; want admitted, 99 left (the held requests took nothing)", out)
	}
}

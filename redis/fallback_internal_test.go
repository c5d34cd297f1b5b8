package redis

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// TestNodeFlappingBucketsBounded for the single-server fallback: a Redis
// that keeps failing again within the rejoin period.
func TestFlappingBucketsBounded(t *testing.T) {
	b, clock := unreachableBackend(t)
	ctx := context.Background()
	fail := errors.New("redis failed")
	b.fail(fail)
	const perEntry = 4096
	for i := 0; i < maxLocalKeys+perEntry; i++ {
		if i > 0 && i%perEntry == 0 {
			b.rejoined(ctx) // a probe succeeded (nothing owed: every decision was denied)
			b.fail(fail)    // and Redis failed again
		}
		out, err := b.takeLocal(ctx, clock.Now(), []stack.Op{{Key: fmt.Sprint("k", i), Rate: 100, Period: time.Second, Burst: 100, Cost: 1}})
		if err != nil {
			t.Fatalf("bucket %d, entry %d: %v", i, i/perEntry+1, err)
		}
		if out.Denied != 0 {
			t.Fatalf("bucket %d: a new local bucket admitted: %+v", i, out)
		}
	}
	if n := len(b.fb.owed); n > perEntry {
		t.Errorf("the fallback keeps %d local buckets, want at most the %d of its latest entry", n, perEntry)
	}
}

// unreachableBackend is a Backend with a local fallback at share 0.5 and an
// injected clock whose client reaches no Redis: tests drive the fallback's
// bookkeeping step by step, and no call they make reaches a server.
func unreachableBackend(t *testing.T, opts ...Option) (*Backend, *limitertest.Clock) {
	t.Helper()
	clock := limitertest.NewClock(limitertest.Start)
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	b, err := New(client, append(opts, WithClock(clock), WithLocalFallback(0.5))...)
	if err != nil {
		t.Fatal(err)
	}
	return b, clock
}

package redisbackend_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/redisbackend"
)

// Six clients ("pods"), each with its own connection pool and Stack, hammer
// one limit through one Redis with server time. Whatever the interleaving,
// the fleet admits at most burst + rate × elapsed, the bound of one bucket.
func TestSixPodsNeverExceedTheBound(t *testing.T) {
	srv := startRedis(t)
	const rate, burst = 200, 50
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "shared", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"},
			Requests: []stack.Rate{{Rate: rate, Period: stack.PeriodSecond, Burst: burst}}}}}}}
	prefix := uniquePrefix("pods")
	pods := make([]*stack.Stack, 6)
	for i := range pods {
		client, _ := newClient(t, srv.Addr)
		b, err := redisbackend.New(client, redisbackend.WithKeyPrefix(prefix), redisbackend.WithTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if pods[i], err = stack.New(cfg, stack.WithBackend(b), stack.WithFailClosed()); err != nil {
			t.Fatal(err)
		}
	}
	keys := sluice.NewKeys("caller", "everyone")
	var admitted, denied, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(600 * time.Millisecond)
	for _, pod := range pods {
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					d, err := pod.Allow(context.Background(), keys)
					switch {
					case err != nil:
						failed.Add(1)
					case d.Allowed:
						admitted.Add(1)
					default:
						denied.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	bound := burst + int64(rate*elapsed.Seconds()) + 1
	t.Logf("%d admitted, %d denied in %v; bound %d", admitted.Load(), denied.Load(), elapsed, bound)
	if failed.Load() != 0 {
		t.Fatalf("%d decisions failed", failed.Load())
	}
	if admitted.Load() > bound {
		t.Errorf("six pods admitted %d in %v, more than burst+rate×elapsed = %d", admitted.Load(), elapsed, bound)
	}
	if admitted.Load() < burst || denied.Load() == 0 {
		t.Errorf("the limit was not exercised: %d admitted, %d denied", admitted.Load(), denied.Load())
	}
}

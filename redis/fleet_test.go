package redis_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// Six clients ("pods"), each with its own connection pool and Stack, hammer
// one limit through one Redis. Time is a fake clock stepped by 10 ms (two
// units of the limit); at each step the 24 goroutines make 120 decisions
// at once, whatever the interleaving. The fleet admits exactly what one
// bucket would: the burst at the first step, then two a step.
func TestSixPodsNeverExceedTheBound(t *testing.T) {
	srv := startRedis(t)
	const rate, burst = 200, 50
	const step = 10 * time.Millisecond
	const steps = 20
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "shared", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"},
			Requests: []stack.Rate{{Rate: rate, Period: stack.Second, Burst: burst}}}}}}}
	prefix := uniquePrefix("pods")
	clock := limitertest.NewClock(limitertest.Start)
	pods := make([]*stack.Stack, 6)
	for i := range pods {
		client, _ := newClient(t, srv.Addr)
		b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithClock(clock),
			sluiceredis.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if pods[i], err = stack.New(cfg, stack.WithBackend(b), stack.WithClock(clock), stack.WithFailClosed()); err != nil {
			t.Fatal(err)
		}
	}
	keys := sluice.NewKeys("caller", "everyone")
	var total, denied, failed atomic.Int64
	for i := range steps {
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for _, pod := range pods {
			for g := 0; g < 4; g++ {
				wg.Go(func() {
					for range 5 {
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
				})
			}
		}
		wg.Wait()
		want := int64(rate * step / time.Second)
		if i == 0 {
			want = burst
		}
		if got := admitted.Load(); got != want {
			t.Errorf("step %d: six pods admitted %d of 120, want exactly %d", i, got, want)
		}
		total.Add(admitted.Load())
		clock.Advance(step)
	}
	t.Logf("%d admitted, %d denied in %d steps", total.Load(), denied.Load(), steps)
	if failed.Load() != 0 {
		t.Fatalf("%d decisions failed", failed.Load())
	}
}

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

// Concurrent decisions go to Redis in batches, and each is still exact: 32
// goroutines on a frozen clock admit exactly the burst of every limit of
// the stack, with fewer script calls than decisions; the remaining counts
// reported are each a distinct value (every decision saw the ones before).
func TestBatchedDecisionsAreExact(t *testing.T) {
	srv := startRedis(t)
	client, rt := newClient(t, srv.Addr)
	clock := limitertest.NewClock(time.Now())
	b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(uniquePrefix("batch")), sluiceredis.WithClock(clock),
		sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cfg := stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "per-caller", DimensionKeys: []string{"caller"}, Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"},
			Requests: []stack.Rate{{Rate: 1, Period: stack.Minute, Burst: 300}}}}},
		{RateLimitID: "global", DimensionKeys: []string{"svc"}, Entries: []stack.Entry{{Dimensions: map[string]string{"svc": "api"},
			Requests: []stack.Rate{{Rate: 1, Period: stack.Minute, Burst: 500}}}}},
	}}
	s, err := stack.New(cfg, stack.WithBackend(b), stack.WithClock(clock), stack.WithFailClosed())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted = map[string]int{}
		seen     = map[int64]bool{}
		dup      atomic.Int64
	)
	before := rt.n.Load()
	const goroutines, each = 32, 40
	for g := 0; g < goroutines; g++ {
		caller := []string{"a", "b", "c", "d"}[g%4]
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys := sluice.NewKeys("caller", caller, "svc", "api")
			for i := 0; i < each; i++ {
				d, err := s.Allow(ctx, keys)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					mu.Lock()
					admitted[caller]++
					if d.LimitID == "global" {
						if seen[d.Remaining] {
							dup.Add(1)
						}
						seen[d.Remaining] = true
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for c, n := range admitted {
		if n > 300 {
			t.Errorf("caller %s: %d admitted, burst 300", c, n)
		}
		total += n
	}
	if total != 500 {
		t.Errorf("%d admitted in all, want exactly the global burst of 500 (%v)", total, admitted)
	}
	if dup.Load() != 0 {
		t.Errorf("%d admissions reported a remaining count another one reported", dup.Load())
	}
	calls := rt.n.Load() - before
	t.Logf("%d decisions in %d script calls", goroutines*each, calls)
	if calls >= goroutines*each {
		t.Errorf("%d script calls for %d concurrent decisions: no batching", calls, goroutines*each)
	}
}

package stack_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func maxBucketsConfig() stack.Config {
	return stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "global", DimensionKeys: []string{"service"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"service": "api"}, Requests: []stack.Rate{{Rate: 1000, Period: "minute"}}}}},
		{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 10, Period: "second"}}}}},
		{RateLimitID: "per-model", DimensionKeys: []string{"model"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"model": "*"}, Requests: []stack.Rate{{Rate: 60, Period: "minute"}}}}},
	}}
}

func TestMaxBucketsDeniesWhenFullAndConsumesNothing(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	s, err := stack.New(maxBucketsConfig(), stack.WithClock(clock), stack.WithMaxBuckets(4))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := func(caller string) sluice.Keys {
		return sluice.NewKeys("service", "api", "caller", caller, "model", "m1")
	}
	// a, b, c: three caller buckets plus the model's = 4 buckets.
	for _, c := range []string{"a", "b", "c"} {
		if d, _ := s.Allow(ctx, req(c)); !d.Allowed {
			t.Fatalf("caller %s denied while there is room: %+v", c, d)
		}
	}
	d, err := s.Allow(ctx, req("d"))
	if err != nil || d.Allowed {
		t.Fatalf("a fifth bucket was created beyond WithMaxBuckets(4): %+v %v", d, err)
	}
	if !d.Capacity || d.Permanent || d.LimitID != "per-caller" || d.LimitKey != "per-caller/caller=d" ||
		d.Metric != "requests" || d.Remaining != 0 || d.RetryAfter != time.Minute {
		t.Errorf("capacity denial = %+v; want Capacity, per-caller, RetryAfter 1m (the longest per-value window)", d)
	}
	if d.Err() == nil {
		t.Error("a capacity denial has no error")
	}
	// Callers that have a bucket keep being decided on it.
	if d, _ := s.Allow(ctx, req("a")); !d.Allowed || d.Capacity {
		t.Errorf("caller a, which has a bucket, was refused: %+v", d)
	}
	// After RetryAfter every bucket has refilled and is reclaimed: d gets in.
	clock.Advance(time.Minute)
	d, _ = s.Allow(ctx, req("d"))
	if !d.Allowed {
		t.Fatalf("after RetryAfter the new caller is still refused: %+v", d)
	}
}

// The global exact bucket counts only admitted requests: capacity denials
// give back what they took.
func TestMaxBucketsDenialIsAllOrNothing(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	cfg := stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "global", DimensionKeys: []string{"service"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"service": "api"}, Requests: []stack.Rate{{Rate: 5, Period: "minute"}}}}},
		{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 1, Period: "minute"}}}}},
	}}
	s, err := stack.New(cfg, stack.WithClock(clock), stack.WithMaxBuckets(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, _ := s.Allow(ctx, sluice.NewKeys("service", "api", "caller", "a")); !d.Allowed {
		t.Fatal(d)
	}
	for i := 0; i < 10; i++ {
		if d, _ := s.Allow(ctx, sluice.NewKeys("service", "api", "caller", fmt.Sprint("new-", i))); d.Allowed || !d.Capacity {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	// The global bucket still has 4 of 5: the ten denials took nothing.
	allowed := 0
	for i := 0; i < 10; i++ {
		if d, _ := s.Allow(ctx, sluice.NewKeys("service", "api")); d.Allowed {
			allowed++
		}
	}
	if allowed != 4 {
		t.Errorf("global bucket admitted %d after the capacity denials, want the 4 left", allowed)
	}
}

// Under concurrency the bound holds exactly: at one instant no bucket can
// be reclaimed, so exactly n of many new callers get one.
func TestMaxBucketsConcurrent(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 10, Period: "minute"}}}}}}}
	const n = 100
	s, err := stack.New(cfg, stack.WithClock(clock), stack.WithMaxBuckets(n))
	if err != nil {
		t.Fatal(err)
	}
	var allowed, capacity atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				d, _ := s.Allow(context.Background(), sluice.NewKeys("caller", fmt.Sprint(g, "-", i)))
				switch {
				case d.Allowed:
					allowed.Add(1)
				case d.Capacity:
					capacity.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if allowed.Load() != n || capacity.Load() != 800-n {
		t.Errorf("%d allowed, %d capacity denials of 800 new callers with room for %d", allowed.Load(), capacity.Load(), n)
	}
}

// Many goroutines on shared per-caller buckets while time moves and
// refilled buckets are reclaimed and re-created: in every window of
// instants, no caller is admitted more than burst + rate·Δt.
func TestConcurrentWindowsHoldAcrossReclaims(t *testing.T) {
	for _, opts := range [][]stack.Option{nil, {stack.WithMaxBuckets(8)}} {
		clock := limitertest.NewClock(limitertest.Start)
		const burst, perSecond = 5, 20
		cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: perSecond, Period: "second", Burst: burst}}}}}}}
		s, err := stack.New(cfg, append([]stack.Option{stack.WithClock(clock)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		admitted := map[string][]time.Duration{}
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 2000; i++ {
					if i%8 == 0 {
						clock.Advance(10 * time.Millisecond)
					}
					// Groups of four callers take turns: a group is busy for
					// about 125 ms, then idle long enough to refill, be
					// reclaimed and come back to a new bucket.
					caller := fmt.Sprint("c", (i/100)%8*4+(i+g)%4)
					at := clock.Now()
					d, err := s.AllowAt(context.Background(), at, sluice.NewKeys("caller", caller), 0)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						mu.Lock()
						admitted[caller] = append(admitted[caller], at.Sub(limitertest.Start))
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		total := 0
		for caller, ts := range admitted {
			slices.Sort(ts)
			total += len(ts)
			for i := range ts {
				for j := i; j < len(ts); j++ {
					allowed := burst + int(int64(perSecond)*int64(ts[j]-ts[i])/int64(time.Second))
					if n := j - i + 1; n > allowed {
						t.Fatalf("%s admitted %d in [%v, %v], more than %d", caller, n, ts[i], ts[j], allowed)
					}
				}
			}
		}
		if total < 32*burst {
			t.Fatalf("only %d requests admitted: the test exercised nothing", total)
		}
	}
}

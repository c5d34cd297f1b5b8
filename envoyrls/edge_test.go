package envoyrls_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/envoyrls"
)

// requests_per_unit 0 blocks: every request is over, a check (hits 0)
// included, and the answer does not pretend a wait would cure it.
func TestZeroRequestsPerUnitBlocks(t *testing.T) {
	_, c, clock := newServer(t, load(t, "z.yaml", "domain: z\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 0}\n"))
	for _, d := range []uint64{1, 0} {
		r := ask(t, c, "z", hits(desc("k", "v"), d))
		if r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || r.Statuses[0].LimitRemaining != 0 {
			t.Errorf("hits %d: %v", d, r)
		}
		if _, ok := meta(r, "retry_after_ms").(float64); ok {
			t.Errorf("hits %d: a retry delay for a limit no wait cures: %v", d, r)
		}
	}
	clock.Advance(1 << 40)
	if r := ask(t, c, "z", desc("k", "v")); r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("much later: %v", r)
	}
}

// Concurrent requests over gRPC, some with one descriptor and some with
// two, on a clock that stands still: the shared tenant bucket admits exactly
// its 5 and the route exactly its 2, whatever the interleaving, and a
// request the route denies never takes a tenant unit.
func TestConcurrentRequestsAreExact(t *testing.T) {
	_, c, _ := newServer(t, load(t, "api.yaml", twoLimits))
	const workers, each = 8, 20
	var mu sync.Mutex
	tenantOnly, both := 0, 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				two := (w+i)%2 == 0
				req := &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "c")}}
				if two {
					req.Descriptors = append(req.Descriptors, desc("route", "/c"))
				}
				r, err := c.ShouldRateLimit(context.Background(), req) // not ask: no t.Fatal off the test goroutine
				if err != nil {
					t.Error(err)
					return
				}
				if r.OverallCode == rlsv3.RateLimitResponse_OK {
					mu.Lock()
					if two {
						both++
					} else {
						tenantOnly++
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if both > 2 || tenantOnly+both != 5 {
		t.Fatalf("admitted %d with the route and %d without: want at most 2 with it and 5 in all", both, tenantOnly)
	}
	r := ask(t, c, "api", hits(desc("tenant", "c"), 0), hits(desc("route", "/c"), 0))
	if r.Statuses[0].LimitRemaining != 0 || int(r.Statuses[1].LimitRemaining) != 2-both {
		t.Fatalf("buckets afterwards: %v (both %d)", r, both)
	}
}

// WithMaxBuckets bounds the in-memory buckets: once 100 callers hold units,
// a new value is denied (never admitted beyond a limit), and the callers
// that have a bucket keep deciding as before.
func TestMaxBucketsBoundsMemory(t *testing.T) {
	_, c, clock := newServer(t, load(t, "api.yaml", twoLimits), envoyrls.WithMaxBuckets(100))
	okCount := 0
	for i := range 150 {
		if ask(t, c, "api", desc("tenant", fmt.Sprint("caller-", i))).OverallCode == rlsv3.RateLimitResponse_OK {
			okCount++
		}
	}
	if okCount != 100 {
		t.Fatalf("%d new callers admitted with room for 100 buckets", okCount)
	}
	if r := ask(t, c, "api", desc("tenant", "caller-7")); r.OverallCode != rlsv3.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != 3 {
		t.Fatalf("a caller with a bucket: %v", r)
	}
	// Once the buckets have refilled (12 s a unit, 5 units: a minute), they
	// are reclaimed and new callers get room.
	clock.Advance(2 * time.Minute)
	if r := ask(t, c, "api", desc("tenant", "caller-new")); r.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("after the buckets refilled: %v", r)
	}
}

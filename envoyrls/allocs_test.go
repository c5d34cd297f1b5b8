package envoyrls_test

import (
	"context"
	"strconv"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/internal/racecheck"
)

// shouldRateLimitAllocs returns the allocations of one allowed
// ShouldRateLimit with n descriptors on the in-memory backend.
func shouldRateLimitAllocs(t *testing.T, n int) float64 {
	cfg, err := envoyrls.Parse(map[string][]byte{"load.yaml": []byte(loadConfig)})
	if err != nil {
		t.Fatal(err)
	}
	rls := envoyrls.New(cfg)
	reqs := make([]*rlsv3.RateLimitRequest, 100)
	for i := range reqs {
		req := &rlsv3.RateLimitRequest{Domain: "load"}
		for k := range n {
			req.Descriptors = append(req.Descriptors, &ratelimitv3.RateLimitDescriptor{
				Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k" + strconv.Itoa(k), Value: "v" + strconv.Itoa(i)}}})
		}
		reqs[i] = req
	}
	ctx := context.Background()
	i := 0
	return testing.AllocsPerRun(1000, func() {
		resp, err := rls.ShouldRateLimit(ctx, reqs[i%len(reqs)])
		if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Fatal(resp, err)
		}
		i++
	})
}

// TestShouldRateLimitAllocations pins what a descriptor adds to an allowed
// request's allocations on the in-memory backend: its bucket key, one
// allocation; its status, current_limit and duration_until_reset share the
// request's (before 2026-12-06 a descriptor added 5: 23 allocations with
// 1, 33 with 3).
func TestShouldRateLimitAllocations(t *testing.T) {
	if racecheck.Enabled || testing.CoverMode() != "" {
		t.Skip("allocation counts differ under -race and -cover")
	}
	one, three := shouldRateLimitAllocs(t, 1), shouldRateLimitAllocs(t, 3)
	t.Logf("allocations: %.0f with 1 descriptor, %.0f with 3", one, three)
	if per := (three - one) / 2; per > 1 {
		t.Errorf("a descriptor adds %.1f allocations, want at most 1", per)
	}
}

package stack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/racecheck"
)

// The direct path allocates nothing with digest keys (two "*" values, a
// value beyond 32 and 128 bytes), exact entries, tokens, shadow and service
// limits.
func TestDirectDoesNotAllocate(t *testing.T) {
	if racecheck.Enabled {
		t.Skip("allocation counts differ under -race")
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	long := strings.Repeat("v", 300)
	s, err := New(Config{RateLimits: []RateLimit{
		{RateLimitID: "pair", DimensionKeys: []string{"org", "caller"}, Entries: []Entry{
			{Dimensions: map[string]string{"org": "*", "caller": "*"}, Requests: []Rate{{Rate: 1000, Period: Second}}},
			{Dimensions: map[string]string{"org": long, "caller": long}, Tokens: []Rate{{Rate: 1000, Period: Second}}},
		}},
		{RateLimitID: "sh", DimensionKeys: []string{"org"}, Shadow: true, Entries: []Entry{
			{Dimensions: map[string]string{"org": "*"}, Requests: []Rate{{Rate: 1000, Period: Second}}},
		}},
	}, ServiceLimits: []RateLimit{
		{RateLimitID: "svc", DimensionKeys: []string{"caller"}, Entries: []Entry{
			{Dimensions: map[string]string{"caller": "*"}, Tokens: []Rate{{Rate: 1000, Period: Second}}},
		}},
	}}, WithClock(sluice.ClockFunc(func() time.Time { return at })))
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Load().big {
		t.Fatal("not a configuration the stack's buffers hold")
	}
	for _, kv := range [][]string{{"org", long, "caller", long}, {"org", "o", "caller", strings.Repeat("c", 40)}} {
		allocs := testing.AllocsPerRun(500, func() {
			at = at.Add(time.Second)
			d, _ := s.AllowN(context.Background(), sluice.NewKeys(kv...), 1)
			if !d.Allowed {
				t.Fatalf("%+v", d)
			}
		})
		if allocs != 0 {
			t.Errorf("%v allocations per decision", allocs)
		}
	}
}

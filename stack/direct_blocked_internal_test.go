package stack

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// A request a stricter limit denies permanently (rate 0: a blocked org)
// consumes nothing on the general path: the denial is permanent, so the
// buckets ranked after it are not even probed, and no per-value bucket is
// created for it. The direct path must do the same: it visits the limits
// in configuration order (c.order), so it takes its buckets only once it
// has listed them in rank order; taken as visited, each such request would
// create its per-caller bucket before meeting the block.
func TestBlockedRequestsCreateNoBuckets(t *testing.T) {
	// As it is, the configuration is an ordered plan (evaluate's ordered plan);
	// with a looser "*" org entry, whose rank falls after per-caller's,
	// the two limits' ranks interleave and the general plan decides.
	for _, ordered := range []bool{true, false} {
		t.Run(map[bool]string{true: "ordered", false: "direct"}[ordered], func(t *testing.T) { blockedRequestsCreateNoBuckets(t, ordered) })
	}
}

func blockedRequestsCreateNoBuckets(t *testing.T, ordered bool) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := Config{RateLimits: []RateLimit{
		{RateLimitID: "per-caller", DimensionKeys: []string{"caller"}, Entries: []Entry{
			{Dimensions: map[string]string{"caller": "*"}, Requests: []Rate{{Rate: 10, Period: Second}}},
		}},
		{RateLimitID: "blocked-org", DimensionKeys: []string{"org"}, Entries: []Entry{
			{Dimensions: map[string]string{"org": "bad"}, Requests: []Rate{{Rate: 0, Period: Second}}},
		}},
	}}
	if !ordered {
		cfg.RateLimits[1].Entries = append(cfg.RateLimits[1].Entries,
			Entry{Dimensions: map[string]string{"org": "*"}, Requests: []Rate{{Rate: 1000, Period: Second}}})
	}
	for _, general := range []bool{true, false} {
		s, err := New(cfg, WithClock(sluice.ClockFunc(func() time.Time { return at })), WithMaxBuckets(100))
		if err != nil {
			t.Fatal(err)
		}
		if c := s.cfg.Load(); c.big || (c.ordered != nil) != ordered {
			t.Fatalf("not the plan this test is about: big %v, ordered %v", c.big, c.ordered != nil)
		}
		ctx := context.Background()
		if general {
			ctx = sluice.WithEvaluated(ctx) // the general path
		}
		for i := range 100 {
			d, _ := s.Allow(ctx, sluice.NewKeys("org", "bad", "caller", fmt.Sprint("c", i)))
			if d.Allowed || !d.Permanent || d.LimitID != "blocked-org" {
				t.Fatalf("request %d: %+v", i, d)
			}
		}
		if n := s.budget.Len(); n != 0 {
			t.Errorf("general path %v: %d blocked requests hold %d per-caller buckets, want 0", general, 100, n)
		}
	}
}

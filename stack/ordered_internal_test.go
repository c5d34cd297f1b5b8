package stack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/racecheck"
)

// The ordered plan takes each bucket as it reaches it; a refusal gives back
// what the earlier limits took, whether the refusing limit is a single
// limit (taken without its entry) or a matched one. Requests without a
// caller skip the per-caller limit and show what is left in the per-tool
// bucket: one per admitted request, nothing for the refused ones.
func TestOrderedGivesBackOnRefusal(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hourly := func(burst int64) []Rate { return []Rate{{Rate: 1, Period: Hour, Burst: burst}} }
	for _, refuser := range []string{"single", "matched"} {
		callerEntry := Entry{Dimensions: map[string]string{"caller": "*"}, Requests: hourly(1)}
		if refuser == "matched" { // an exact entry, found by the matcher
			callerEntry.Dimensions["caller"] = "c1"
		}
		cfg := Config{RateLimits: []RateLimit{
			{RateLimitID: "per-tool", DimensionKeys: []string{"targetName", "toolName"}, Entries: []Entry{
				{Dimensions: map[string]string{"targetName": "t", "toolName": "*"}, Requests: hourly(10)},
			}},
			{RateLimitID: "per-caller", DimensionKeys: []string{"caller"}, Entries: []Entry{callerEntry}},
		}}
		s, err := New(cfg, WithClock(sluice.ClockFunc(func() time.Time { return at })))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.cfg.Load().ordered) != 2 || (refuser == "single") != (s.cfg.Load().ordered[1].rb != nil) {
			t.Fatalf("%s: not the ordered plan this test is about: %+v", refuser, s.cfg.Load().ordered)
		}
		ctx := context.Background()
		for i := range 4 { // the first admitted, three refused by per-caller
			d, _ := s.Allow(ctx, sluice.NewKeys("targetName", "t", "toolName", "x", "caller", "c1"))
			if d.Allowed != (i == 0) {
				t.Fatalf("%s: request %d: %+v", refuser, i, d)
			}
		}
		d, _ := s.Allow(ctx, sluice.NewKeys("targetName", "t", "toolName", "x"))
		if !d.Allowed || d.LimitID != "per-tool" || d.Remaining != 8 {
			t.Errorf("%s: per-tool after 1 admitted and 3 refused requests: %+v, want 8 remaining", refuser, d)
		}
	}
}

// A single limit taken before another single limit that refuses gives its
// token back too: only the last step of a plan is taken without a grant
// (nothing after it can refuse).
func TestOrderedGivesBackSingleBeforeSingle(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hourly := func(burst int64) []Rate { return []Rate{{Rate: 1, Period: Hour, Burst: burst}} }
	s, err := New(Config{RateLimits: []RateLimit{
		// A matched limit no request here matches: the plan is ordered, not
		// a singles plan.
		{RateLimitID: "per-tool", DimensionKeys: []string{"targetName", "toolName"}, Entries: []Entry{
			{Dimensions: map[string]string{"targetName": "t", "toolName": "other"}, Requests: hourly(10)},
		}},
		{RateLimitID: "per-target", DimensionKeys: []string{"targetName"}, Entries: []Entry{
			{Dimensions: map[string]string{"targetName": "*"}, Requests: hourly(10)},
		}},
		{RateLimitID: "per-caller", DimensionKeys: []string{"caller"}, Entries: []Entry{
			{Dimensions: map[string]string{"caller": "*"}, Requests: hourly(1)},
		}},
	}}, WithClock(sluice.ClockFunc(func() time.Time { return at })))
	if err != nil {
		t.Fatal(err)
	}
	if o := s.cfg.Load().ordered; len(o) != 3 || o[1].rb == nil || o[2].rb == nil || o[1].l.id != "per-target" {
		t.Fatalf("not the ordered plan this test is about: %+v", o)
	}
	ctx := context.Background()
	for i := range 4 { // the first admitted, three refused by per-caller
		d, _ := s.Allow(ctx, sluice.NewKeys("targetName", "t", "toolName", "x", "caller", "c1"))
		if d.Allowed != (i == 0) {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	d, _ := s.Allow(ctx, sluice.NewKeys("targetName", "t", "toolName", "x"))
	if !d.Allowed || d.LimitID != "per-target" || d.Remaining != 8 {
		t.Errorf("per-target after 1 admitted and 3 refused requests: %+v, want 8 remaining", d)
	}
}

// Two limits whose buckets interleave in rank (the same number of keys,
// one with entries both stricter and looser than the other) make no
// ordered plan: taken limit by limit, the looser entry's bucket would come
// before the other limit's, and an admitted request would report the
// wrong one of two buckets left equally full (the general path reports
// the first in rank order).
func TestOrderedPlanNeedsRankOrder(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rate := func(r int64) []Rate { return []Rate{{Rate: r, Period: Second, Burst: 5}} }
	cfg := Config{RateLimits: []RateLimit{
		{RateLimitID: "by-org", DimensionKeys: []string{"org"}, Entries: []Entry{
			{Dimensions: map[string]string{"org": "small"}, Requests: rate(1)},
			{Dimensions: map[string]string{"org": "*"}, Requests: rate(100)},
		}},
		{RateLimitID: "by-caller", DimensionKeys: []string{"caller"}, Entries: []Entry{
			{Dimensions: map[string]string{"caller": "*"}, Requests: rate(10)},
		}},
	}}
	s, err := New(cfg, WithClock(sluice.ClockFunc(func() time.Time { return at })))
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Load().big || s.cfg.Load().ordered != nil {
		t.Fatal("want a plan that is neither big nor ordered")
	}
	for i, ctx := range []context.Context{context.Background(), sluice.WithEvaluated(context.Background())} {
		org, caller := fmt.Sprint("org-", i), fmt.Sprint("caller-", i) // buckets of their own
		d, _ := s.Allow(ctx, sluice.NewKeys("org", org, "caller", caller))
		// Both buckets have 4 of 5 left: the first in rank order is
		// by-caller's (10/s is stricter than by-org's 100/s entry).
		if !d.Allowed || d.LimitID != "by-caller" || d.Remaining != 4 {
			t.Errorf("evaluated list asked %v: %+v, want by-caller with 4 left", i == 1, d)
		}
	}
}

// The ordered path allocates nothing, for a caller seen before or new, and
// nor does a request it hands to the general plan (a value beyond rawMax).
func TestOrderedDoesNotAllocate(t *testing.T) {
	if racecheck.Enabled {
		t.Skip("allocation counts differ under -race")
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rate := []Rate{{Rate: 1_000_000, Period: Second}}
	s, err := New(Config{RateLimits: []RateLimit{
		{RateLimitID: "per-tool", DimensionKeys: []string{"targetName", "toolName"}, Entries: []Entry{
			{Dimensions: map[string]string{"targetName": "t", "toolName": "exact"}, Requests: rate},
			{Dimensions: map[string]string{"targetName": "t", "toolName": "*"}, Requests: rate, Tokens: rate},
		}},
		{RateLimitID: "per-target", DimensionKeys: []string{"targetName"}, Entries: []Entry{
			{Dimensions: map[string]string{"targetName": "*"}, Requests: rate},
		}},
		{RateLimitID: "per-caller", DimensionKeys: []string{"caller"}, Entries: []Entry{
			{Dimensions: map[string]string{"caller": "*"}, Requests: rate},
		}},
	}}, WithClock(sluice.ClockFunc(func() time.Time { return at })))
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Load().ordered == nil {
		t.Fatal("not an ordered plan")
	}
	long := strings.Repeat("c", 40)
	callers := make([]string, 1000)
	for i := range callers {
		callers[i] = fmt.Sprint("caller-", i)
	}
	for _, tc := range []struct {
		tool   string
		caller func(i int) string
	}{
		{"exact", func(i int) string { return callers[i%len(callers)] }},
		{"other", func(i int) string { return callers[i%len(callers)] }},
		{"other", func(int) string { return long }}, // the general plan
	} {
		i := 0
		allocs := testing.AllocsPerRun(2*len(callers), func() { // new callers, then seen ones
			i++
			d, _ := s.AllowN(context.Background(), sluice.NewKeys("targetName", "t", "toolName", tc.tool, "caller", tc.caller(i)), 1)
			if !d.Allowed {
				t.Fatalf("%+v", d)
			}
		})
		if allocs != 0 {
			t.Errorf("tool %s, caller %s: %v allocations per decision", tc.tool, tc.caller(0), allocs)
		}
	}
}

package stack

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/racecheck"
)

// The allowed path allocates nothing in steady state, including for a
// returning caller whose bucket was reclaimed after it refilled (the
// re-insert path), with the time moving as it does in production.
func TestAllowDoesNotAllocateAcrossReclaims(t *testing.T) {
	if racecheck.Enabled {
		t.Skip("allocation counts differ under -race")
	}
	var ns atomic.Int64
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return base.Add(time.Duration(ns.Load())) }
	perSecond := func(r int64) []Rate { return []Rate{{Rate: r, Period: Second}} }
	var tools []Entry
	for i := 0; i < 100; i++ {
		tools = append(tools, Entry{Dimensions: map[string]string{"targetName": fmt.Sprint("target-", i%10), "toolName": fmt.Sprint("tool-", i/10)}, Requests: perSecond(1_000_000)})
	}
	s, err := New(Config{RateLimits: []RateLimit{
		{RateLimitID: "per-tool", DimensionKeys: []string{"targetName", "toolName"}, Entries: tools},
		{RateLimitID: "per-target", DimensionKeys: []string{"targetName"},
			Entries: []Entry{{Dimensions: map[string]string{"targetName": "*"}, Requests: perSecond(1_000_000)}}},
		{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
			Entries: []Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: perSecond(100)}}},
	}}, WithClock(sluice.ClockFunc(now)))
	if err != nil {
		t.Fatal(err)
	}
	if c := s.cfg.Load(); c.big || c.ordered == nil {
		t.Fatal("this configuration should be decided by evaluate's ordered plan, on the stack's buffers")
	}
	const callers = 2000
	names := make([]string, callers)
	for i := range names {
		names[i] = fmt.Sprint("caller-", i)
	}
	var l sluice.Limiter = s
	ctx := context.Background()
	i := 0
	step := func() {
		i++
		// Each step is 10 ms: a caller's bucket (100/s) refills from one
		// take before the caller returns, so the sweep reclaims it and the
		// caller's next request re-inserts it.
		ns.Add(int64(10 * time.Millisecond))
		keys := sluice.NewKeys("targetName", targets[i%10], "toolName", toolNames[i%12], "caller", names[(i*7919)%callers])
		if d, err := l.Allow(ctx, keys); err != nil || !d.Allowed {
			t.Fatalf("denied: %+v %v", d, err)
		}
	}
	for range 4 * callers { // warm: the tables reach their steady size
		step()
	}
	table := s.cfg.Load().limits[2].entries[0].rates[0].table.get()
	before := table.Len()
	allocs := testing.AllocsPerRun(4*callers, step)
	t.Logf("per-caller table: %d live buckets before, %d after; %.2f allocs/op", before, table.Len(), allocs)
	if allocs != 0 {
		t.Errorf("Allow allocates %.2f times per call in steady state with reclaims; want 0", allocs)
	}
	// Every caller came back during the run, and the table holds far fewer
	// live buckets than callers: returning callers were re-inserted.
	if after := table.Len(); before >= callers/2 || after >= callers/2 {
		t.Errorf("per-caller table holds %d then %d live buckets for %d callers: nothing was reclaimed", before, after, callers)
	}
}

var (
	targets = func() (s []string) {
		for i := range 10 {
			s = append(s, fmt.Sprint("target-", i))
		}
		return
	}()
	toolNames = func() (s []string) {
		for i := range 12 {
			s = append(s, fmt.Sprint("tool-", i))
		}
		return
	}()
)

// Which configurations evaluate decides on an ordered plan (one-limit ones
// too, which it decides on the one-limit plan first): none big, the limits with only
// connections buckets left out.
func TestOrderedPlan(t *testing.T) {
	perSecond := func(r int64) []Rate { return []Rate{{Rate: r, Period: Second}} }
	star := func(keys ...string) map[string]string {
		m := map[string]string{}
		for _, k := range keys {
			m[k] = "*"
		}
		return m
	}
	conc := RateLimit{RateLimitID: "conc", DimensionKeys: []string{"caller"},
		Entries: []Entry{{Dimensions: star("caller"), Connections: perSecond(2)}}}
	pair := RateLimit{RateLimitID: "pair", DimensionKeys: []string{"org", "caller"},
		Entries: []Entry{{Dimensions: map[string]string{"org": "o", "caller": "*"}, Requests: perSecond(5)}}}
	single := func(id string) RateLimit {
		return RateLimit{RateLimitID: id, DimensionKeys: []string{"caller"}, Entries: []Entry{{Dimensions: star("caller"), Requests: perSecond(5)}}}
	}
	for _, c := range []struct {
		name   string
		limits []RateLimit
		want   []string // the ids the ordered plan visits; nil: not an ordered plan
	}{
		{"matched and connections", []RateLimit{conc, pair, single("aa")}, []string{"pair", "aa"}},
		{"singles", []RateLimit{single("aa"), single("bb")}, []string{"aa", "bb"}},
		{"big", []RateLimit{pair, single("aa"), single("bb"), single("cc"), single("dd")}, nil},
	} {
		s, err := New(Config{RateLimits: c.limits})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, st := range s.cfg.Load().ordered {
			got = append(got, st.l.id)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s: ordered plan %q, want %q", c.name, got, c.want)
		}
	}
}

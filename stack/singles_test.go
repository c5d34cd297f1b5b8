package stack_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/racecheck"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// A configuration of per-value limits only takes a shortcut when a request
// is admitted (evaluate's ordered plan: each bucket taken directly); the general
// plan decides only after a refusal. A context asking for the evaluated
// list takes the general path at once: two Stacks on one clock, one asked
// each way, must decide a random mix of callers, tokens, shadow limits,
// missing keys and values too long to be their own key identically, allowed
// or denied, down to the tightest limit reported. The same comparison on a
// configuration with matched limits (general path both ways) checks the
// comparison itself.
func TestShortcutsDecideAsTheGeneralPath(t *testing.T) {
	t.Run("singles", func(t *testing.T) { compareWithGeneral(t, singlesConfig(), callerOrgKeys) })
	// matched limits, entries with two rates out of rank
	// order, a two-"*" entry (a digest key), tokens and a shadow limit.
	t.Run("direct", func(t *testing.T) {
		compareWithGeneral(t, stack.Config{RateLimits: []stack.RateLimit{
			{RateLimitID: "per-org-caller", DimensionKeys: []string{"org", "caller"},
				Entries: []stack.Entry{
					{Dimensions: map[string]string{"org": "org-0", "caller": "caller-1"}, Requests: []stack.Rate{{Rate: 3, Period: "second"}, {Rate: 20, Period: "minute"}}},
					{Dimensions: map[string]string{"org": "org-1", "caller": "*"}, Requests: []stack.Rate{{Rate: 6, Period: "second"}}},
					{Dimensions: map[string]string{"org": "*", "caller": "*"}, Requests: []stack.Rate{{Rate: 5, Period: "second", Burst: 8}}},
				}},
			{RateLimitID: "caller-tokens", DimensionKeys: []string{"caller"},
				Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Tokens: []stack.Rate{{Rate: 400, Period: "second", Burst: 1000}}}}},
			{RateLimitID: "shadow-org", DimensionKeys: []string{"org"}, Shadow: true,
				Entries: []stack.Entry{{Dimensions: map[string]string{"org": "org-1"}, Requests: []stack.Rate{{Rate: 2, Period: "second"}}}}},
		}}, callerOrgKeys)
	})
	// exact entries (shared buckets), a limit no entry of
	// which may match, a connections limit (which Allow leaves out) and
	// values equal in their tallies (the two "*" values of a digest key).
	t.Run("direct-exact", func(t *testing.T) {
		compareWithGeneral(t, stack.Config{RateLimits: []stack.RateLimit{
			{RateLimitID: "conc", DimensionKeys: []string{"caller"},
				Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Connections: []stack.Rate{{Rate: 1, Period: "second"}}}}},
			{RateLimitID: "per-tool", DimensionKeys: []string{"target", "tool"},
				Entries: []stack.Entry{
					{Dimensions: map[string]string{"target": "t0", "tool": "x"}, Requests: []stack.Rate{{Rate: 4, Period: "second"}}},
					{Dimensions: map[string]string{"target": "t0", "tool": "y"}, Requests: []stack.Rate{{Rate: 4, Period: "second"}}},
					{Dimensions: map[string]string{"target": "t1", "tool": "*"}, Requests: []stack.Rate{{Rate: 6, Period: "second", Burst: 2}}},
				}},
			{RateLimitID: "per-target-caller", DimensionKeys: []string{"target", "caller"},
				Entries: []stack.Entry{{Dimensions: map[string]string{"target": "*", "caller": "*"}, Requests: []stack.Rate{{Rate: 10, Period: "second", Burst: 3}}}}},
		}}, func(rng *rand.Rand) []string {
			var kv []string
			if rng.IntN(10) > 0 {
				kv = append(kv, "target", fmt.Sprint("t", rng.IntN(3)))
			}
			if rng.IntN(10) > 0 {
				kv = append(kv, "tool", []string{"x", "y", "z"}[rng.IntN(3)])
			}
			if rng.IntN(10) > 0 {
				c := fmt.Sprint("caller-", rng.IntN(4))
				if rng.IntN(8) == 0 {
					c = strings.Repeat(c, 8)
				}
				kv = append(kv, "caller", c)
			}
			return kv
		})
	})
	t.Run("matched", func(t *testing.T) {
		cfg := singlesConfig()
		cfg.RateLimits = append(cfg.RateLimits,
			stack.RateLimit{RateLimitID: "per-org-caller", DimensionKeys: []string{"org", "caller"},
				Entries: []stack.Entry{
					{Dimensions: map[string]string{"org": "org-0", "caller": "caller-1"}, Requests: []stack.Rate{{Rate: 3, Period: "second"}, {Rate: 20, Period: "minute"}}},
					{Dimensions: map[string]string{"org": "org-1", "caller": "*"}, Requests: []stack.Rate{{Rate: 6, Period: "second"}}},
					{Dimensions: map[string]string{"org": "*", "caller": "*"}, Requests: []stack.Rate{{Rate: 5, Period: "second", Burst: 8}}},
				}},
			stack.RateLimit{RateLimitID: "per-org-exact", DimensionKeys: []string{"org"},
				Entries: []stack.Entry{{Dimensions: map[string]string{"org": "org-1"}, Requests: []stack.Rate{{Rate: 12, Period: "second"}}}}},
		)
		compareWithGeneral(t, cfg, callerOrgKeys)
	})
}

// callerOrgKeys draws a request's keys: a caller (now and then beyond 32
// bytes: a digest key) and an org, each missing one time in ten.
func callerOrgKeys(rng *rand.Rand) []string {
	var kv []string
	if rng.IntN(10) > 0 {
		c := fmt.Sprint("caller-", rng.IntN(6))
		if rng.IntN(8) == 0 {
			c = strings.Repeat(c, 8) // beyond 32 bytes: a digest key
		}
		kv = append(kv, "caller", c)
	}
	if rng.IntN(10) > 0 {
		kv = append(kv, "org", fmt.Sprint("org-", rng.IntN(2)))
	}
	return kv
}

func singlesConfig() stack.Config {
	return stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 5, Period: "second", Burst: 8}}}}},
		{RateLimitID: "per-org", DimensionKeys: []string{"org"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"org": "*"}, Requests: []stack.Rate{{Rate: 12, Period: "second"}}}}},
		{RateLimitID: "org-tokens", DimensionKeys: []string{"org"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"org": "*"}, Tokens: []stack.Rate{{Rate: 400, Period: "second", Burst: 1000}}}}},
		{RateLimitID: "shadow-caller", DimensionKeys: []string{"caller"}, Shadow: true,
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 2, Period: "second"}}}}},
	}}
}

func compareWithGeneral(t *testing.T, cfg stack.Config, draw func(*rand.Rand) []string) {
	clock := limitertest.NewClock(limitertest.Start)
	fast, err := stack.New(cfg, stack.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	general, err := stack.New(cfg, stack.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	gctx := sluice.WithEvaluated(context.Background())
	allowed, denied := 0, 0
	for i := 0; i < 20_000; i++ {
		clock.Advance(time.Duration(rng.IntN(40)) * time.Millisecond)
		kv := draw(rng)
		tokens := rng.IntN(120)
		a, err := fast.AllowN(context.Background(), sluice.NewKeys(kv...), tokens)
		if err != nil {
			t.Fatal(err)
		}
		b, err := general.AllowN(gctx, sluice.NewKeys(kv...), tokens)
		if err != nil {
			t.Fatal(err)
		}
		b.Evaluated = nil
		if fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", b) {
			t.Fatalf("request %d %v tokens %d:\nshortcut %+v\ngeneral  %+v", i, kv, tokens, a, b)
		}
		if a.Allowed {
			allowed++
		} else {
			denied++
		}
	}
	if allowed < 1000 || denied < 1000 {
		t.Fatalf("the mix is too one-sided to compare the paths: %d allowed, %d denied", allowed, denied)
	}
}

// The shortcut allocates nothing, for a caller seen before or new.
func TestSinglesShortcutDoesNotAllocate(t *testing.T) {
	if racecheck.Enabled {
		t.Skip("allocation counts differ under -race")
	}
	clock := limitertest.NewClock(limitertest.Start)
	s, err := stack.New(singlesConfig(), stack.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 4096)
	for i := range names {
		names[i] = fmt.Sprint("caller-", i)
	}
	ctx := context.Background()
	i := 0
	allocs := testing.AllocsPerRun(2000, func() {
		clock.Advance(time.Second) // every caller's bucket admits
		d, _ := s.AllowN(ctx, sluice.NewKeys("caller", names[i%len(names)], "org", "org-0"), 1)
		if !d.Allowed || d.LimitID == "" {
			t.Fatalf("request %d: %+v", i, d)
		}
		i++
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per decision, want 0", allocs)
	}
}

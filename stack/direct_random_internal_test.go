package stack

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Random direct-plan configurations (up to four keys, exact and wildcard
// entries, every other configuration with at most one "*" per entry so
// that many are ordered plans, decided on evaluate's ordered plan; several rates,
// tokens, connections, rate 0, shadow and service limits, values beyond
// 32 and 128 bytes, "*" and "" as request values, token debt left by
// reservations) decide every request as the general
// path does, with and without a bucket budget. With a budget, reservations
// are left out: a charge beyond the bound makes the two Stacks' reclaims
// (paced by each shard's operation count, which the shortcut changes)
// drop different full buckets, a difference in memory, not in limits.
func TestDirectRandomConfigsDecideAsTheGeneralPath(t *testing.T) {
	// Names of one length that differ in their last byte (5 bytes) or
	// their first (13 bytes): the ordered plan compares such names by words.
	dims := []string{"org-a", "org-b", "target-name-x", "uarget-name-x"}
	long := strings.Repeat("L", 40)
	huge := strings.Repeat("H", 200)
	vals := []string{"x", "y", long, huge, strings.Repeat("y", 128)}
	rng := rand.New(rand.NewPCG(7, 9))
	tested, ordered, allowedN, deniedN := 0, 0, 0, 0
	for cfgN := 0; tested < 300 && cfgN < 20000; cfgN++ {
		var cfg Config
		nl := 1 + rng.IntN(4)
		for li := range nl {
			nk := 1 + rng.IntN(4)
			perm := rng.Perm(len(dims))[:nk]
			keys := make([]string, nk)
			for k, p := range perm {
				keys[k] = dims[p]
			}
			rl := RateLimit{RateLimitID: fmt.Sprint("l", li), DimensionKeys: keys, Shadow: rng.IntN(6) == 0}
			seen := map[string]bool{}
			for range 1 + rng.IntN(4) {
				ex := rng.IntN(nk + 1)
				if cfgN%2 == 1 {
					// Every other configuration has at most one "*" per
					// entry, which the ordered plan may decide.
					ex = nk - rng.IntN(2)
				}
				m := map[string]string{}
				for k, name := range keys {
					if k < ex {
						m[name] = vals[rng.IntN(len(vals))]
					} else {
						m[name] = "*"
					}
				}
				if s := fmt.Sprint(m); seen[s] {
					continue
				} else {
					seen[s] = true
				}
				e := Entry{Dimensions: m}
				for range 1 + rng.IntN(2) {
					r := Rate{Rate: int64(rng.IntN(8)), Period: Second}
					if rng.IntN(6) == 0 {
						r.Rate = 0
					}
					if rng.IntN(3) == 0 {
						r.Burst = int64(1 + rng.IntN(5))
					}
					switch rng.IntN(4) {
					case 0:
						e.Tokens = append(e.Tokens, r)
					case 1:
						r.Rate = max(r.Rate, 1)
						e.Connections = append(e.Connections, r)
					default:
						e.Requests = append(e.Requests, r)
					}
				}
				rl.Entries = append(rl.Entries, e)
			}
			if rng.IntN(3) == 0 {
				cfg.ServiceLimits = append(cfg.ServiceLimits, rl)
			} else {
				cfg.RateLimits = append(cfg.RateLimits, rl)
			}
		}
		if cfg.Validate() != nil {
			continue
		}
		for _, budget := range []int{0, 3} {
			var opts []Option
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			now := base
			opts = append(opts, WithClock(sluice.ClockFunc(func() time.Time { return now })))
			if budget > 0 {
				opts = append(opts, WithMaxBuckets(budget))
			}
			fast, err := New(cfg, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if fast.cfg.Load().big {
				continue
			}
			general, _ := New(cfg, opts...)
			tested++
			if fast.cfg.Load().ordered != nil {
				ordered++
			}
			gctx := sluice.WithEvaluated(context.Background())
			// Mostly time enough to refill a token or two between
			// requests; in every third configuration hardly any, so that
			// a take not given back stays visible in later decisions.
			step := 300
			if cfgN%3 == 2 {
				step = 5
			}
			for i := range 300 {
				now = now.Add(time.Duration(rng.IntN(step)) * time.Millisecond)
				var kv []string
				for _, dn := range dims {
					if rng.IntN(8) > 0 {
						rv := append(vals[:len(vals):len(vals)], "*", "", "x,y", strings.Repeat("y", 127), strings.Repeat("y", 128))
						kv = append(kv, dn, rv[rng.IntN(len(rv))])
					}
				}
				tokens := rng.IntN(4)
				if budget == 0 && rng.IntN(5) == 0 { // a reservation settled above its estimate: token debt
					ra, _, _ := fast.Reserve(context.Background(), sluice.NewKeys(kv...), tokens)
					rb, _, _ := general.Reserve(context.Background(), sluice.NewKeys(kv...), tokens)
					act := rng.IntN(12)
					_ = ra.Reconcile(act)
					_ = rb.Reconcile(act)
					continue
				}
				var a sluice.Decision
				var err error
				if tokens == 0 { // Allow has its own way into the shortcuts
					a, err = fast.Allow(context.Background(), sluice.NewKeys(kv...))
				} else {
					a, err = fast.AllowN(context.Background(), sluice.NewKeys(kv...), tokens)
				}
				if err != nil {
					t.Fatal(err)
				}
				b, _ := general.AllowN(gctx, sluice.NewKeys(kv...), tokens)
				b.Evaluated = nil
				if a.Allowed {
					allowedN++
				} else {
					deniedN++
				}
				if fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", b) {
					t.Fatalf("config %d budget %d request %d %q tokens %d:\n%+v\nshortcut %+v\ngeneral  %+v", cfgN, budget, i, kv, tokens, cfg, a, b)
				}
			}
		}
	}
	t.Logf("%d configurations (%d ordered), %d allowed, %d denied", tested, ordered, allowedN, deniedN)
	if tested < 100 || ordered < 100 {
		t.Fatalf("only %d direct configurations tested, %d of them ordered", tested, ordered)
	}
}

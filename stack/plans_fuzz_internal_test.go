package stack

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// FuzzPlansDecideAsTheGeneralPath is the differential test of evaluate's
// specialised plans (one limit, ordered) against the general plan: the
// input seeds a configuration (one to four limits of one to three keys,
// exact and "*" entries, one or two rates of requests, tokens or
// connections, rate 0, bursts, shadow and service limits, a bucket budget
// or none) and a run of requests (values short, long, beyond 32 bytes,
// missing; costs 0 to 3; time steps small and large). Two Stacks of that
// configuration decide every request, one through Allow or AllowN (the
// plan compile chose), the other through the general plan (a context
// asking for the evaluated list); after each request the two Decisions
// must be equal (Evaluated aside) and so must every bucket either Stack
// holds (the tokens of each shared bucket and of each per-value bucket any
// request has keyed). The seed corpus (f.Add and testdata/fuzz) runs in
// every go test; go test -fuzz FuzzPlansDecideAsTheGeneralPath explores.
func FuzzPlansDecideAsTheGeneralPath(f *testing.F) {
	for seed := range uint64(40) {
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:8], seed)
		binary.LittleEndian.PutUint64(b[8:], seed*0x9e3779b97f4a7c15)
		f.Add(b[:], uint16(120))
	}
	f.Fuzz(func(t *testing.T, data []byte, nreq uint16) {
		var s1, s2 uint64
		var b [16]byte
		copy(b[:], data)
		s1, s2 = binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])
		for i := 16; i < len(data); i++ { // any longer input still counts
			s1 = s1*31 + uint64(data[i])
		}
		rng := rand.New(rand.NewPCG(s1, s2))
		cfg, budget := fuzzConfig(rng)
		if cfg.Validate() != nil {
			return
		}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		opts := []Option{WithClock(sluice.ClockFunc(func() time.Time { return now }))}
		if budget > 0 {
			opts = append(opts, WithMaxBuckets(budget))
		}
		plan, err := New(cfg, opts...)
		if err != nil {
			t.Fatal(err)
		}
		general, _ := New(cfg, opts...)
		gctx := sluice.WithEvaluated(context.Background())
		dims := []string{"org", "caller", "target-name-x"}
		vals := []string{"a", "b", "", "*", strings.Repeat("L", 32), strings.Repeat("L", 33), strings.Repeat("H", 200)}
		seen := map[string]bool{}
		var requests []sluice.Keys
		for i := range int(nreq % 400) {
			now = now.Add(time.Duration(rng.IntN([]int{5, 300, 3000}[rng.IntN(3)])) * time.Millisecond)
			var kv []string
			for _, dn := range rng.Perm(len(dims)) { // any order: the plans read pairs in order first
				if rng.IntN(6) > 0 {
					kv = append(kv, dims[dn], vals[rng.IntN(len(vals))])
				}
			}
			keys := sluice.NewKeys(kv...)
			if k := fmt.Sprint(kv); !seen[k] {
				seen[k] = true
				requests = append(requests, keys)
			}
			tokens := rng.IntN(4)
			var a sluice.Decision
			if tokens == 0 && rng.IntN(2) == 0 {
				a, err = plan.Allow(context.Background(), keys)
			} else {
				a, err = plan.AllowN(context.Background(), keys, tokens)
			}
			if err != nil {
				t.Fatal(err)
			}
			g, err := general.AllowN(gctx, keys, tokens)
			if err != nil {
				t.Fatal(err)
			}
			g.Evaluated = nil
			if fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", g) {
				t.Fatalf("request %d %q tokens %d (single %v, ordered %v):\n%+v\nplan    %+v\ngeneral %+v",
					i, kv, tokens, plan.cfg.Load().single != nil, plan.cfg.Load().ordered != nil, cfg, a, g)
			}
			if sa, sg := bucketStates(plan, requests, now), bucketStates(general, requests, now); sa != sg {
				t.Fatalf("request %d %q tokens %d: bucket states differ:\nplan    %s\ngeneral %s", i, kv, tokens, sa, sg)
			}
		}
	})
}

// fuzzConfig draws a configuration of the shapes evaluate's plans decide
// (and some they leave to the general plan), and a bucket budget (0: none).
func fuzzConfig(rng *rand.Rand) (Config, int) {
	dims := []string{"org", "caller", "target-name-x"}
	vals := []string{"a", "b", strings.Repeat("L", 33)}
	var cfg Config
	nl := 1 + rng.IntN(4)
	oneStar := rng.IntN(3) > 0 // most configurations: at most one "*" an entry (ordered plans)
	for li := range nl {
		nk := 1 + rng.IntN(3)
		if rng.IntN(2) == 0 {
			nk = 1 // per-value limits, the one-limit plan's shape
		}
		perm := rng.Perm(len(dims))[:nk]
		keys := make([]string, nk)
		for k, p := range perm {
			keys[k] = dims[p]
		}
		rl := RateLimit{RateLimitID: fmt.Sprint("l", li), DimensionKeys: keys, Shadow: rng.IntN(7) == 0}
		seen := map[string]bool{}
		for range 1 + rng.IntN(3) {
			ex := rng.IntN(nk + 1)
			if oneStar {
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
			if k := fmt.Sprint(m); seen[k] {
				continue
			} else {
				seen[k] = true
			}
			e := Entry{Dimensions: m}
			for range 1 + rng.IntN(2) {
				r := Rate{Rate: int64(1 + rng.IntN(6)), Period: Second}
				if rng.IntN(8) == 0 {
					r.Rate = 0
				}
				if rng.IntN(3) == 0 {
					r.Burst = int64(1 + rng.IntN(4))
				}
				switch rng.IntN(6) {
				case 0, 1:
					e.Tokens = append(e.Tokens, r)
				case 2:
					r.Rate = max(r.Rate, 1)
					e.Connections = append(e.Connections, r)
				default:
					e.Requests = append(e.Requests, r)
				}
			}
			rl.Entries = append(rl.Entries, e)
		}
		if rng.IntN(4) == 0 {
			cfg.ServiceLimits = append(cfg.ServiceLimits, rl)
		} else {
			cfg.RateLimits = append(cfg.RateLimits, rl)
		}
	}
	budget := 0
	if rng.IntN(4) == 0 {
		budget = 1 + rng.IntN(4)
	}
	return cfg, budget
}

// bucketStates renders the tokens at now of every bucket s holds that
// requests can reach: each shared bucket, and each per-value bucket keyed
// by the values of one of requests (a bucket never created reads full).
func bucketStates(s *Stack, requests []sluice.Keys, now time.Time) string {
	var b strings.Builder
	c := s.cfg.Load()
	for _, l := range c.limits {
		for ei, en := range l.entries {
			for ri, rb := range en.rates {
				switch {
				case rb.shared != nil:
					fmt.Fprintf(&b, "%s/%d/%d=%.6f ", l.id, ei, ri, rb.shared.TokensAt(now))
				case rb.table != nil:
					tab := rb.table.get() // created empty if no take reached it: reads full
					done := map[string]bool{}
					for _, keys := range requests {
						vs := make([]string, len(l.keys))
						ok := true
						for k, name := range l.keys {
							vs[k], ok = keys.Get(name)
							if !ok {
								break
							}
						}
						if !ok {
							continue
						}
						key := appendBucketKey(nil, vs[en.exact:])
						if done[string(key)] {
							continue
						}
						done[string(key)] = true
						fmt.Fprintf(&b, "%s/%d/%d/%x=%.6f ", l.id, ei, ri, key, tab.TokensAt(now, string(key)))
					}
				}
			}
		}
	}
	return b.String()
}

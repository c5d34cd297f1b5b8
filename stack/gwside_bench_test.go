package stack_test

import (
	"context"
	"strings"
	"testing"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// BenchmarkGatewaySide runs one side of BenchmarkGatewayGap alone, on a
// frozen clock (no refill, so no bucket is ever reclaimed and every run
// takes the same path): for counting instructions with callgrind, which a
// side that shares its process with the others would blur, and for which
// the real clock is not deterministic (under valgrind a caller returns
// after the Table's reclaim grace). Each sub-benchmark builds only its own
// side and warms it (every caller seen once), so the difference between
// two -benchtime counts, divided by the difference of counts, is one
// decision:
//
//	go test -c ./stack/ -o stack.test
//	GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off GOMAXPROCS=1 valgrind --tool=callgrind \
//	    ./stack.test -test.run '^$' -test.bench 'GatewaySide/sluice$' -test.benchtime 300000x
//
// and the same at 100000x. GOGC=off keeps the collector's work, whose
// share of the run depends on timing, out of the difference; cpu.rdtscp=off
// keeps the runtime from RDTSCP, which valgrind 3.19 does not decode.
// Sides: sluice (Stack.Allow through the sluice.Limiter interface),
// spec-api, spec-match, specialist and xrate-maps, as in
// BenchmarkGatewayGap.
func BenchmarkGatewaySide(b *testing.B) {
	keys := newBenchKeys()
	lim := rate.Limit(10_000_000.0 / 60)
	ctx := context.Background()
	now := limitertest.NewClock(limitertest.Start).Now
	through := func(l sluice.Limiter) func(int) {
		return func(i int) {
			tg, tl, c := keys.at(i)
			if d, _ := l.Allow(ctx, sluice.NewKeys("targetName", tg, "toolName", tl, "caller", c)); !d.Allowed {
				b.Fatal("denied")
			}
		}
	}
	sides := []struct {
		name  string
		build func() func(int)
	}{
		{"sluice", func() func(int) {
			// The configuration's names in memory of their own, as when it
			// is loaded from JSON: the request's names (literals here, as in
			// most middleware) are then compared byte by byte, not found
			// equal by pointer.
			cfg := gatewayConfig()
			for i := range cfg.RateLimits {
				rl := &cfg.RateLimits[i]
				for k := range rl.DimensionKeys {
					rl.DimensionKeys[k] = strings.Clone(rl.DimensionKeys[k])
				}
				for e := range rl.Entries {
					m := map[string]string{}
					for k, v := range rl.Entries[e].Dimensions {
						m[strings.Clone(k)] = v
					}
					rl.Entries[e].Dimensions = m
				}
			}
			s, err := stack.New(cfg, stack.WithClock(sluice.ClockFunc(now)))
			if err != nil {
				b.Fatal(err)
			}
			return through(s)
		}},
		{"spec-match", func() func(int) { return through(newSpecialist(lim, now).withMatcher()) }},
		{"spec-api", func() func(int) { return through(newSpecialist(lim, now)) }},
		{"specialist", func() func(int) {
			spec := newSpecialist(lim, now)
			return func(i int) {
				if !spec.allow(keys.at(i)) {
					b.Fatal("denied")
				}
			}
		}},
		{"xrate-maps", func() func(int) {
			bl := newBaseline(now)
			return func(i int) {
				if !bl.allow(keys.at(i)) {
					b.Fatal("denied")
				}
			}
		}},
	}
	for _, sd := range sides {
		var op func(int)
		b.Run(sd.name, func(b *testing.B) {
			if op == nil { // built and warmed once, not for every b.N tried
				op = sd.build()
				for i := range len(keys.callers) {
					op(i)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				op(i)
			}
		})
	}
}

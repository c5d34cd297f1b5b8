package stack_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// BenchmarkOneLimitSide runs sluice's side of BenchmarkOneLimit alone (one
// per-caller "*" limit, 10,000 callers, through sluice.Limiter) on a
// frozen clock, for instruction counts that no other side blurs:
//
//	GOGC=off bash scripts/cgcount.sh stack 'OneLimitSide$' 200000
func BenchmarkOneLimitSide(b *testing.B) {
	callers := newBenchKeys().callers[:10_000]
	s, err := stack.New(stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 60, Period: "minute", Burst: 1_000_000}}}}}}},
		stack.WithClock(limitertest.NewClock(limitertest.Start)))
	if err != nil {
		b.Fatal(err)
	}
	var l sluice.Limiter = s
	ctx := context.Background()
	op := func(i int) {
		if d, _ := l.Allow(ctx, sluice.NewKeys("caller", callers[(i*7919)%len(callers)])); !d.Allowed {
			b.Fatal("denied")
		}
	}
	for i := range len(callers) {
		op(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		op(i)
	}
}

// BenchmarkOneLimitSideDefault is BenchmarkOneLimitSide on the Stack's
// default clock (no WithClock): the path a real server takes. The limit
// refills a token a second and no caller empties or refills its bucket
// within a run, so every decision takes the same path and the count is
// deterministic but for the clock read itself:
//
//	GOGC=off bash scripts/cgcount.sh stack 'OneLimitSideDefault$' 200000
func BenchmarkOneLimitSideDefault(b *testing.B) {
	callers := newBenchKeys().callers[:10_000]
	s, err := stack.New(stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 60, Period: "minute", Burst: 1_000_000}}}}}}})
	if err != nil {
		b.Fatal(err)
	}
	var l sluice.Limiter = s
	ctx := context.Background()
	op := func(i int) {
		if d, _ := l.Allow(ctx, sluice.NewKeys("caller", callers[(i*7919)%len(callers)])); !d.Allowed {
			b.Fatal("denied")
		}
	}
	for i := range len(callers) {
		op(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		op(i)
	}
}

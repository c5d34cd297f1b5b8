package stack_test

import (
	"context"
	"hash/maphash"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucket"
	"github.com/sluicehq/sluice/stack"
)

// sink keeps the stages' results alive, so the compiler drops none of them.
var sink struct {
	n int64
	s string
	t time.Time
}

// BenchmarkStagesOneLimit splits a decision of one per-caller limit through
// Limiter.Allow (BenchmarkOneLimit's shape: 10,000 callers in a scrambled
// order, the real clock) into cumulative stages, each side doing everything
// the one before it does and one stage more:
//
//	clock    one time.Now
//	keys     + building the request's Keys and reading the caller back
//	digest   + two maphash passes over the caller: the Table's digest of a key
//	         over 15 bytes (a shorter key's bijection costs about half of
//	         that: bucket's BenchmarkDigest)
//	table    the clock, digest and take of bucket.Table.TryTakeN (lock, probe, update)
//	stack    Stack.Allow: Keys by value through the interface, the plan,
//	         the take, the Decision filled and returned
//
// The differences say where the nanoseconds go: table − digest is the
// shard lock, probe and bucket update; stack − table what the engine adds
// around the bucket (Keys, plan, Decision). xrate-map, a mutex map of
// x/time/rate written by hand, is the baseline every ratio is against.
func BenchmarkStagesOneLimit(b *testing.B) {
	keys := newBenchKeys()
	callers := keys.callers[:10_000]
	s, err := stack.New(stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 60, Period: "minute", Burst: 1_000_000}}}}}}},
		stack.WithClock(nil))
	if err != nil {
		b.Fatal(err)
	}
	var l sluice.Limiter = s
	ctx := context.Background()
	caller := func(i int) string { return callers[(i*7919)%len(callers)] }
	seed1, seed2 := maphash.MakeSeed(), maphash.MakeSeed()
	tab := bucket.NewTable(1, 1_000_000)
	sides := []side{
		{"clock", func(i int) { sink.t = time.Now() }},
		{"keys", func(i int) {
			sink.t = time.Now()
			k := sluice.NewKeys("caller", caller(i))
			sink.s, _ = k.Get("caller")
		}},
		{"digest", func(i int) {
			sink.t = time.Now()
			k := sluice.NewKeys("caller", caller(i))
			v, _ := k.Get("caller")
			sink.n += int64(maphash.String(seed1, v) ^ maphash.String(seed2, v))
		}},
		{"table", func(i int) {
			if ok, _ := tab.TryTakeN(time.Now(), caller(i), 1); !ok {
				b.Fatal("denied")
			}
		}},
		{"stack", func(i int) {
			if d, _ := l.Allow(ctx, sluice.NewKeys("caller", caller(i))); !d.Allowed {
				b.Fatal("denied")
			}
		}},
		{"xrate-map", mutexMapSide(b, caller)},
	}
	for i := range 2 * len(callers) { // warm: every caller has its bucket
		for _, sd := range sides {
			sd.op(i)
		}
	}
	b.ReportAllocs()
	interleave(b, 15, sides...)
}

// BenchmarkStagesGateway splits a decision of BenchmarkGateway's stack
// (per-caller "*", 1,000 exact per-tool entries, a per-target limit; 100,000
// callers; the real clock) the same way:
//
//	clock       one time.Now
//	keys        + building the three-pair Keys and reading the values back
//	specialist  the three buckets taken by code written for this
//	            configuration, with a Go map for the exact entries
//	spec-match  the same finding the entry with the stack's match.Matcher
//	spec-api    the specialist as a sluice.Limiter (Keys in, Decision out,
//	            by value through the interface)
//	stack       Stack.Allow: the generic plan
//
// stack − spec-api is the generic plan, spec-api − specialist the API's
// shape, spec-match − specialist the generic matcher against a Go map.
func BenchmarkStagesGateway(b *testing.B) {
	keys := newBenchKeys()
	s, err := stack.New(gatewayConfig(), stack.WithClock(nil))
	if err != nil {
		b.Fatal(err)
	}
	lim := rate.Limit(10_000_000.0 / 60)
	ctx := context.Background()
	through := func(l sluice.Limiter) func(int) {
		return func(i int) {
			tg, tl, c := keys.at(i)
			if d, _ := l.Allow(ctx, sluice.NewKeys("targetName", tg, "toolName", tl, "caller", c)); !d.Allowed {
				b.Fatal("denied")
			}
		}
	}
	spec, specM, bl := newSpecialist(lim, time.Now), newSpecialist(lim, time.Now).withMatcher(), newBaseline(time.Now)
	sides := []side{
		{"clock", func(i int) { sink.t = time.Now() }},
		{"keys", func(i int) {
			sink.t = time.Now()
			tg, tl, c := keys.at(i)
			k := sluice.NewKeys("targetName", tg, "toolName", tl, "caller", c)
			a, _ := k.Get("targetName")
			x, _ := k.Get("toolName")
			y, _ := k.Get("caller")
			sink.n += int64(len(a) + len(x) + len(y))
		}},
		{"specialist", func(i int) {
			if !spec.allow(keys.at(i)) {
				b.Fatal("denied")
			}
		}},
		{"spec-match", func(i int) {
			if !specM.allow(keys.at(i)) {
				b.Fatal("denied")
			}
		}},
		{"spec-api", through(newSpecialist(lim, time.Now))},
		{"stack", through(s)},
		{"xrate-maps", func(i int) {
			if !bl.allow(keys.at(i)) {
				b.Fatal("denied")
			}
		}},
	}
	for i := 0; i < len(keys.callers); i++ { // warm: every caller has been seen
		for _, sd := range sides {
			sd.op(i)
		}
	}
	b.ReportAllocs()
	interleave(b, 15, sides...)
}

package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucket"
	"github.com/sluicehq/sluice/internal/cputime"
	"github.com/sluicehq/sluice/internal/hashmatch"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

var benchCallers = 100_000

// benchKeys cycles through targets, tools and 100,000 distinct callers.
type benchKeys struct {
	targets, tools, callers []string
}

func newBenchKeys() *benchKeys {
	k := &benchKeys{}
	for i := 0; i < 100; i++ {
		k.targets = append(k.targets, fmt.Sprintf("target-%d", i))
	}
	for i := 0; i < 12; i++ { // tools 10 and 11 have no exact entry
		k.tools = append(k.tools, fmt.Sprintf("tool-%d", i))
	}
	for i := 0; i < benchCallers; i++ {
		k.callers = append(k.callers, fmt.Sprintf("caller-%d", i))
	}
	return k
}

func (k *benchKeys) at(i int) (target, tool, caller string) {
	return k.targets[i%len(k.targets)], k.tools[(i/7)%len(k.tools)], k.callers[(i*7919)%len(k.callers)]
}

// side is one contender of an interleaved comparison: op runs request i.
type side struct {
	name string
	op   func(i int)
}

// interleave runs the sides in rounds — A B C, A B C, … — b.N operations
// each per round, and reports each side's median ns/op over the rounds and
// the ratio of every side to the last one (the baseline). On a noisy
// machine, rounds this short see the same noise on every side, which
// back-to-back -count runs do not. Where the OS reports per-thread CPU time
// (Linux), the medians are of CPU time on the benchmark's locked thread, so
// that time spent waiting for a core shared with other processes is not
// counted; wall-time medians are reported too.
func interleave(b *testing.B, rounds int, sides ...side) {
	b.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	runtime.GC()
	cpu := make([][]float64, len(sides))
	wall := make([][]float64, len(sides))
	next := make([]int, len(sides)) // each side continues its own sequence
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		for s, sd := range sides {
			c0, start := cputime.Thread(), time.Now()
			for i := 0; i < b.N; i++ {
				sd.op(next[s])
				next[s]++
			}
			w := time.Since(start)
			c := cputime.Thread() - c0
			if c0 < 0 {
				c = w.Nanoseconds()
			}
			cpu[s] = append(cpu[s], float64(c)/float64(b.N))
			wall[s] = append(wall[s], float64(w.Nanoseconds())/float64(b.N))
		}
	}
	b.StopTimer()
	median := func(x []float64) float64 {
		slices.Sort(x)
		return x[len(x)/2]
	}
	med := make([]float64, len(sides))
	for s := range sides {
		med[s] = median(cpu[s])
		b.ReportMetric(med[s], sides[s].name+"-ns/op")
		b.ReportMetric(median(wall[s]), sides[s].name+"-wall-ns/op")
	}
	base := med[len(med)-1]
	for s := 0; s < len(sides)-1; s++ { // none for a single side
		b.ReportMetric(med[s]/base, sides[s].name+"/"+sides[len(sides)-1].name)
	}
	b.ReportMetric(0, "ns/op") // the total is meaningless across sides
}

// BenchmarkGateway compares the 3-limit stack (per-tool with 1,000 exact
// entries, per-target "*", per-caller "*"; 100,000 callers) through the
// sluice.Limiter interface with the hand-written baseline (three
// rate.Limiter lookups in maps doing the same resolution), sides
// interleaved, on the same clock: the real one, and a frozen one (no refill,
// so no bucket is ever reclaimed); "default" gives the Stack its default
// clock (a monotonic reading, cheaper than time.Now on most machines) while
// the baseline and the floor keep time.Now.
func BenchmarkGateway(b *testing.B) {
	keys := newBenchKeys()
	for _, clk := range []string{"real", "frozen", "default"} {
		// Built once per clock, outside the sub-benchmark that the testing
		// package calls again for every b.N it tries.
		now := time.Now
		if clk == "frozen" {
			now = limitertest.NewClock(limitertest.Start).Now
		}
		opts := []stack.Option{stack.WithClock(sluice.ClockFunc(now))}
		if clk == "default" {
			// Each side reads the system clock its own way: the Stack's
			// default clock (the monotonic reading only), time.Now for
			// x/time/rate (what its Allow calls).
			opts = nil
		}
		s, err := stack.New(gatewayConfig(), opts...)
		if err != nil {
			b.Fatal(err)
		}
		var l sluice.Limiter = s
		bl := newBaseline(now)
		ctx := context.Background()
		sl := func(i int) {
			tg, tl, c := keys.at(i)
			d, _ := l.Allow(ctx, sluice.NewKeys("targetName", tg, "toolName", tl, "caller", c))
			if !d.Allowed {
				b.Fatal("denied")
			}
		}
		hand := func(i int) {
			if !bl.allow(keys.at(i)) {
				b.Fatal("denied")
			}
		}
		// The floor: the same three buckets taken directly from a bucket.Bucket
		// and two bucket.Tables, without resolving, matching, ordering or
		// all-or-nothing — what the stack costs above its buckets.
		lim := rate.Limit(10_000_000.0 / 60)
		exact, targets, callers := bucket.New(lim, 10_000_000), bucket.NewTable(lim, 10_000_000), bucket.NewTable(lim, 10_000_000)
		floor := func(i int) {
			tg, _, c := keys.at(i)
			t := now()
			if !exact.TakeN(t, 1).OK || !targets.TakeN(t, tg, 1).OK || !callers.TakeN(t, c, 1).OK {
				b.Fatal("denied")
			}
		}
		spec := newSpecialist(lim, now)
		special := func(i int) {
			if !spec.allow(keys.at(i)) {
				b.Fatal("denied")
			}
		}
		for i := 0; i < len(keys.callers); i++ { // warm: every caller has been seen
			sl(i)
			floor(i)
			hand(i)
			special(i)
		}
		b.Run(clk, func(b *testing.B) {
			b.ReportAllocs()
			interleave(b, 15, side{"sluice", sl}, side{"specialist", special}, side{"buckets-only", floor}, side{"xrate-maps", hand})
		})
	}
}

// BenchmarkGatewayGap splits the distance between the stack and the
// specialist of BenchmarkGateway (real clock): "spec-api" is the
// specialist called as a sluice.Limiter (Keys in and Decision out by value,
// through the interface, as the stack is called), "spec-match" the same
// finding the per-tool entry with the stack's match.Matcher instead of a
// Go map. sluice − spec-match is what the generic plan costs above
// matching and the API; spec-match − spec-api the matcher against a Go map;
// spec-api − specialist the API's shape.
func BenchmarkGatewayGap(b *testing.B) {
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
	spec, bl := newSpecialist(lim, time.Now), newBaseline(time.Now)
	sides := []side{
		{"sluice", through(s)},
		{"spec-match", through(newSpecialist(lim, time.Now).withMatcher())},
		{"spec-api", through(newSpecialist(lim, time.Now))},
		{"specialist", func(i int) {
			if !spec.allow(keys.at(i)) {
				b.Fatal("denied")
			}
		}},
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

// BenchmarkOneLimit is the common middleware shape: one per-caller "*"
// limit, 10,000 callers, through the sluice.Limiter interface, against the
// same bucket taken directly from a bucket.Table (the floor) and against a
// mutex map of rate.Limiter written by hand; all on time.Now.
func BenchmarkOneLimit(b *testing.B) {
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
	sl := func(i int) {
		if d, _ := l.Allow(ctx, sluice.NewKeys("caller", caller(i))); !d.Allowed {
			b.Fatal("denied")
		}
	}
	tab := bucket.NewTable(1, 1_000_000)
	floor := func(i int) {
		if !tab.TakeN(time.Now(), caller(i), 1).OK {
			b.Fatal("denied")
		}
	}
	hand := mutexMapSide(b, caller)
	for i := range 2 * len(callers) {
		sl(i)
		floor(i)
		hand(i)
	}
	b.ReportAllocs()
	interleave(b, 15, side{"sluice", sl}, side{"table-only", floor}, side{"xrate-map", hand})
}

// mutexMapSide is the per-caller limit a careful user writes by hand: a
// mutex map of x/time/rate limiters (1/s, a burst no benchmark drains), on
// the real clock, for the caller of request i.
func mutexMapSide(b *testing.B, caller func(i int) string) func(i int) {
	var mu sync.Mutex
	m := map[string]*rate.Limiter{}
	return func(i int) {
		c := caller(i)
		mu.Lock()
		lim := m[c]
		if lim == nil {
			lim = rate.NewLimiter(1, 1_000_000)
			m[strings.Clone(c)] = lim
		}
		mu.Unlock()
		if !lim.AllowN(time.Now(), 1) {
			b.Fatal("denied")
		}
	}
}

// specialist is BenchmarkGateway's configuration written by hand on
// sluice's buckets, with everything a stack must do and nothing generic:
// the request's Keys read by name, the (target, tool) entry found in a Go
// map (or the (target, *) entry's per-tool table), the three buckets taken
// in the plan's order and given back on a refusal (all-or-nothing). It is
// what the generic plan could cost at best: the stack's resolving,
// matching and ordering for any configuration, against code that knows
// this one. With a matcher (withMatcher) it finds the per-tool entry with
// the stack's match.Matcher instead of the Go map; as a sluice.Limiter it
// takes its Keys and returns its Decision by value, as the stack does.
type specialist struct {
	now       func() time.Time
	exact     map[[2]string]*bucket.Bucket
	perTarget map[string]*bucket.Table // targets with a (target, *) entry: per-tool buckets
	target    *bucket.Table
	caller    *bucket.Table
	// withMatcher: the per-tool entries in a match.Matcher, their buckets
	// by entry index.
	m        *hashmatch.Matcher
	mExact   []*bucket.Bucket
	mPerTool []*bucket.Table
}

func newSpecialist(lim rate.Limit, now func() time.Time) *specialist {
	sp := &specialist{now: now, exact: map[[2]string]*bucket.Bucket{}, perTarget: map[string]*bucket.Table{},
		target: bucket.NewTable(lim, 10_000_000), caller: bucket.NewTable(lim, 10_000_000)}
	for i := 0; i < 990; i++ {
		sp.exact[[2]string{fmt.Sprintf("target-%d", i%100), fmt.Sprintf("tool-%d", i/100)}] = bucket.New(lim, 10_000_000)
	}
	for i := 0; i < 10; i++ {
		sp.perTarget[fmt.Sprintf("target-%d", i)] = bucket.NewTable(lim, 10_000_000)
	}
	return sp
}

// withMatcher makes sp find the per-tool entry with a match.Matcher.
func (sp *specialist) withMatcher() *specialist {
	var entries [][]string
	for k, b := range sp.exact {
		entries = append(entries, []string{k[0], k[1]})
		sp.mExact, sp.mPerTool = append(sp.mExact, b), append(sp.mPerTool, nil)
	}
	for k, t := range sp.perTarget {
		entries = append(entries, []string{k, hashmatch.Wildcard})
		sp.mExact, sp.mPerTool = append(sp.mExact, nil), append(sp.mPerTool, t)
	}
	sp.m = hashmatch.New([]string{"targetName", "toolName"}, entries) // a fixed, valid configuration
	return sp
}

// decide decides one request: whether it is admitted, and what is left in
// the per-caller bucket.
func (sp *specialist) decide(k *sluice.Keys) (bool, int64) {
	t := sp.now()
	tg, okT := k.Get("targetName")
	tl, okL := k.Get("toolName")
	c, okC := k.Get("caller")
	if !okT || !okL || !okC {
		return false, 0
	}
	var one *bucket.Bucket
	var perTool *bucket.Table
	if sp.m != nil {
		vals, hs := [2]string{tg, tl}, [2]uint64{hashmatch.Hash(tg), hashmatch.Hash(tl)}
		if i, ok := sp.m.MatchHashed(vals[:], hs[:]); ok {
			one, perTool = sp.mExact[i], sp.mPerTool[i]
		}
	} else if one = sp.exact[[2]string{tg, tl}]; one == nil {
		perTool = sp.perTarget[tg]
	}
	var g1 bucket.Grant
	switch {
	case one != nil:
		if ok, _ := one.TryTakeGrant(t, 1, &g1); !ok {
			return false, 0
		}
	case perTool != nil:
		if ok, _ := perTool.TryTakeGrant(t, tl, 1, &g1); !ok {
			return false, 0
		}
	}
	giveBack := func() {
		if one != nil {
			_ = one.GiveBack(&g1, 1)
		} else if perTool != nil {
			_ = perTool.GiveBack(tl, &g1, 1)
		}
	}
	var g2 bucket.Grant
	if ok, _ := sp.target.TryTakeGrant(t, tg, 1, &g2); !ok {
		giveBack()
		return false, 0
	}
	ok, left := sp.caller.TryTakeN(t, c, 1)
	if !ok {
		_ = sp.target.GiveBack(tg, &g2, 1)
		giveBack()
	}
	return ok, left
}

// allow is decide on the three values, the Keys built as the stack's
// callers build them.
func (sp *specialist) allow(target, tool, caller string) bool {
	k := sluice.NewKeys("targetName", target, "toolName", tool, "caller", caller)
	ok, _ := sp.decide(&k)
	return ok
}

// Allow makes the specialist a sluice.Limiter.
func (sp *specialist) Allow(_ context.Context, keys sluice.Keys) (sluice.Decision, error) {
	var d sluice.Decision
	ok, left := sp.decide(&keys)
	d.Allowed, d.LimitID, d.Limit, d.Remaining = ok, "per-caller", 10_000_000, left
	return d, nil
}

// baseline is what a careful user writes by hand with x/time/rate.
type baseline struct {
	now       func() time.Time
	mu        sync.Mutex
	exact     map[[2]string]*rate.Limiter // (target, tool) exact entries
	perTarget map[string]bool             // targets with a (target, *) entry
	perValue  map[[2]string]*rate.Limiter // buckets of the (target, *) entries
	target    map[string]*rate.Limiter
	caller    map[string]*rate.Limiter
}

func newBaseline(now func() time.Time) *baseline {
	lim := rate.Limit(10_000_000.0 / 60)
	bl := &baseline{
		now:   now,
		exact: map[[2]string]*rate.Limiter{}, perTarget: map[string]bool{}, perValue: map[[2]string]*rate.Limiter{},
		target: map[string]*rate.Limiter{}, caller: map[string]*rate.Limiter{},
	}
	for i := 0; i < 990; i++ {
		bl.exact[[2]string{fmt.Sprintf("target-%d", i%100), fmt.Sprintf("tool-%d", i/100)}] = rate.NewLimiter(lim, 10_000_000)
	}
	for i := 0; i < 10; i++ {
		bl.perTarget[fmt.Sprintf("target-%d", i)] = true
	}
	return bl
}

func (bl *baseline) get(m map[string]*rate.Limiter, k string) *rate.Limiter {
	l, ok := m[k]
	if !ok {
		l = rate.NewLimiter(rate.Limit(10_000_000.0/60), 10_000_000)
		// Keys are cloned on insert, as sluice's tables do: in a server the
		// lookup key is a fresh string from each request, so the stored
		// key is never the same memory (without the clone the benchmark's
		// reused strings would let the map skip comparing key bytes).
		m[strings.Clone(k)] = l
	}
	return l
}

func (bl *baseline) allow(target, tool, caller string) bool {
	now := bl.now()
	bl.mu.Lock()
	var l1 *rate.Limiter
	if l, ok := bl.exact[[2]string{target, tool}]; ok {
		l1 = l
	} else if bl.perTarget[target] {
		k := [2]string{target, tool}
		if l1 = bl.perValue[k]; l1 == nil {
			l1 = rate.NewLimiter(rate.Limit(10_000_000.0/60), 10_000_000)
			bl.perValue[[2]string{strings.Clone(target), strings.Clone(tool)}] = l1
		}
	}
	l2 := bl.get(bl.target, target)
	l3 := bl.get(bl.caller, caller)
	bl.mu.Unlock()
	// Not all-or-nothing: a hand-written stack rarely refunds.
	return (l1 == nil || l1.AllowN(now, 1)) && l2.AllowN(now, 1) && l3.AllowN(now, 1)
}

// BenchmarkLargestConfig is the largest valid configuration (50 limits ×
// 1,000 entries, 10 dimension keys, "*" last): /load parses its JSON and
// builds the Stack, reporting the heap it retains; /allow decides a request
// that matches an entry of every limit (50 buckets), rotating 1,000 callers.
func BenchmarkLargestConfig(b *testing.B) {
	data, err := json.Marshal(largestConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("load", func(b *testing.B) {
		b.ReportAllocs()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var retained uint64
		var cpu int64
		for i := 0; i < b.N; i++ {
			before := heapInUse()
			c0 := cputime.Thread()
			b.StartTimer()
			s, err := stack.Load(data)
			b.StopTimer()
			cpu += cputime.Thread() - c0
			if err != nil {
				b.Fatal(err)
			}
			retained = heapInUse() - before
			runtime.KeepAlive(s)
		}
		b.ReportMetric(float64(retained)/(1<<20), "MB-retained")
		// CPU time of the loading thread (the GC's concurrent work on other
		// threads is not in it; ns/op is wall time, which is).
		b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
	})
	s, err := stack.Load(data)
	if err != nil {
		b.Fatal(err)
	}
	// /allow-hot repeats 10 requests (one entry of each limit hot in
	// cache); /allow-spread rotates 1,000 requests that reach every entry
	// of every limit (50,000 buckets, nothing stays in cache).
	for _, c := range []struct {
		name    string
		entries int
	}{{"allow-hot", 10}, {"allow-spread", 1000}} {
		b.Run(c.name, func(b *testing.B) {
			var reqs []sluice.Keys
			for i := 0; i < c.entries; i++ {
				reqs = append(reqs, largestKeys(i, fmt.Sprint("caller-", i)))
			}
			ctx := context.Background()
			for _, k := range reqs {
				s.Allow(ctx, k)
			}
			b.ReportAllocs()
			interleave(b, 9, side{"sluice", func(i int) {
				if d, _ := s.Allow(ctx, reqs[i%len(reqs)]); !d.Allowed {
					b.Fatal("denied")
				}
			}})
		})
	}
}

// BenchmarkTenKBCallers inserts 100,000 callers with distinct 10 KB values
// into a per-caller limit (frozen clock: nothing is reclaimed) and reports
// the heap the Stack retains; the timed part decides requests with 10 KB
// values (1,000 of them, rotating).
func BenchmarkTenKBCallers(b *testing.B) {
	before := heapInUse()
	s := tenKBStack(b)
	ctx := context.Background()
	for i := 0; i < 100_000; i++ {
		s.Allow(ctx, sluice.NewKeys("caller", tenKBValue(i)))
	}
	retained := heapInUse() - before
	vals := make([]string, 1000)
	for i := range vals {
		vals[i] = tenKBValue(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Allow(ctx, sluice.NewKeys("caller", vals[i%len(vals)]))
	}
	b.ReportMetric(float64(retained)/(1<<20), "MB-retained")
	runtime.KeepAlive(s)
}

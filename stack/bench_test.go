package stack_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
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

// BenchmarkGateway/sluice is Allow through the sluice.Limiter interface on
// the gateway-like configuration; /xrate-maps is the hand-written baseline:
// three rate.Limiter lookups in maps doing the same resolution.
func BenchmarkGateway(b *testing.B) {
	keys := newBenchKeys()
	b.Run("sluice", func(b *testing.B) {
		clock := limitertest.NewClock(limitertest.Start)
		var l sluice.Limiter = newStack(b, gatewayConfig(), clock)
		ctx := context.Background()
		for i := 0; i < len(keys.callers); i++ { // warm: every caller's bucket exists
			tg, tl, c := keys.at(i)
			l.Allow(ctx, sluice.NewKeys("targetName", tg, "toolName", tl, "caller", c))
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			tg, tl, c := keys.at(i)
			d, _ := l.Allow(ctx, sluice.NewKeys("targetName", tg, "toolName", tl, "caller", c))
			if !d.Allowed {
				b.Fatal("denied")
			}
		}
	})
	b.Run("xrate-maps", func(b *testing.B) {
		bl := newBaseline()
		for i := 0; i < len(keys.callers); i++ {
			bl.allow(keys.at(i))
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if !bl.allow(keys.at(i)) {
				b.Fatal("denied")
			}
		}
	})
}

// baseline is what a careful user writes by hand with x/time/rate.
type baseline struct {
	mu        sync.Mutex
	exact     map[[2]string]*rate.Limiter // (target, tool) exact entries
	perTarget map[string]bool             // targets with a (target, *) entry
	perValue  map[[2]string]*rate.Limiter // buckets of the (target, *) entries
	target    map[string]*rate.Limiter
	caller    map[string]*rate.Limiter
}

func newBaseline() *baseline {
	lim := rate.Limit(10_000_000.0 / 60)
	bl := &baseline{
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
	now := time.Now()
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

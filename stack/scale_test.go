package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/racecheck"
	"github.com/sluicehq/sluice/stack"
)

// largestConfig is the largest valid gateway configuration: MaxRateLimits
// limits of 1,000 entries each over 10 dimension keys, every entry exact on
// the first nine and "*" on the last (so every entry has per-value
// buckets). Values are short so that its JSON stays under MaxConfigBytes.
func largestConfig() stack.Config {
	var cfg stack.Config
	keys := make([]string, 10)
	for k := range keys {
		keys[k] = fmt.Sprintf("d%d", k)
	}
	for l := 0; l < stack.MaxRateLimits; l++ {
		rl := stack.RateLimit{RateLimitID: fmt.Sprintf("l%d", l), DimensionKeys: keys}
		for e := 0; e < 1000; e++ {
			dims := make(map[string]string, 10)
			for k := 0; k < 9; k++ {
				dims[keys[k]] = largestValue(l, e, k)
			}
			dims[keys[9]] = "*"
			rl.Entries = append(rl.Entries, stack.Entry{Dimensions: dims,
				Requests: []stack.Rate{{Rate: 1_000_000, Period: stack.Minute}}})
		}
		cfg.RateLimits = append(cfg.RateLimits, rl)
	}
	return cfg
}

// largestValue spreads entries over the nine exact positions: entry e has
// value e%10 at positions 0-2, e/10%10 at 3-5, e/100 at 6-8 (distinct
// tuples). Every limit has the same entries, so that one request can match
// an entry of each (the worst case for Allow).
func largestValue(_, e, k int) string {
	d := [3]int{e % 10, e / 10 % 10, e / 100}[k/3]
	return string(rune('a' + d))
}

// largestKeys is a request that matches entry e of every limit, with the
// caller as the value at the "*" position.
func largestKeys(e int, caller string) sluice.Keys {
	var k sluice.Keys
	for i := 0; i < 9; i++ {
		k.Set(fmt.Sprintf("d%d", i), largestValue(0, e, i))
	}
	k.Set("d9", caller)
	return k
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// The largest configuration retains at most 64 MB once loaded (config
// included), whatever GOMAXPROCS, loads within a second, and deciding on
// it stays within microseconds.
func TestLargestConfigMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 50,000 entries")
	}
	// Nothing may scale with the number of CPUs.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))
	before := heapInUse()
	cfg := largestConfig()
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > stack.MaxConfigBytes {
		t.Fatalf("largest config is %d bytes of JSON, over MaxConfigBytes", len(data))
	}
	cfg = stack.Config{}
	start := time.Now()
	s, err := stack.Load(data)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	data = nil
	retained := heapInUse() - before
	t.Logf("JSON load %v, retained %.1f MB at GOMAXPROCS=%d", elapsed, float64(retained)/(1<<20), runtime.GOMAXPROCS(0))
	if retained > 64<<20 {
		t.Errorf("the largest config retains %.1f MB, want ≤ 64 MB", float64(retained)/(1<<20))
	}
	// 1 s is the goal, measured by BenchmarkLargestConfig/load; this only
	// catches a gross regression (the race detector slows loading ~10×).
	if limit := 5 * time.Second; !racecheck.Enabled && elapsed > limit {
		t.Errorf("loading the largest config took %v, more than %v", elapsed, limit)
	}
	// Every limit applies (each with its own bucket for the caller) and
	// the request is allowed.
	d, err := s.Allow(sluice.WithEvaluated(context.Background()), largestKeys(123, "alice"))
	if err != nil || !d.Allowed {
		t.Fatalf("Allow = %+v, %v", d, err)
	}
	if len(d.Evaluated) != stack.MaxRateLimits {
		t.Fatalf("%d limits applied to a request matching an entry of each, want %d", len(d.Evaluated), stack.MaxRateLimits)
	}
	// Requests reaching every entry of every limit (a Table each, with a
	// bucket) keep the Stack within the bound too.
	for e := 0; e < 1000; e++ {
		if d, _ := s.Allow(context.Background(), largestKeys(e, "bob")); !d.Allowed {
			t.Fatalf("entry %d: %+v", e, d)
		}
	}
	touched := heapInUse() - before
	t.Logf("after reaching all 50,000 entries: %.1f MB", float64(touched)/(1<<20))
	if touched > 64<<20 {
		t.Errorf("after requests reaching every entry the largest config holds %.1f MB, want ≤ 64 MB", float64(touched)/(1<<20))
	}
	runtime.KeepAlive(s)
}

// tenKBValue returns a fresh 10 KB value unique to i (as a server would
// get from a request: new memory each time).
func tenKBValue(i int) string {
	b := make([]byte, 10<<10)
	for j := range b {
		b[j] = 'a' + byte(j%26)
	}
	copy(b, fmt.Sprintf("caller-%d-", i))
	return string(b)
}

func tenKBStack(t testing.TB) *stack.Stack {
	s, err := stack.New(stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 1000, Period: stack.Minute}}}}}}},
		stack.WithClock(sluice.ClockFunc(frozenNow)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var frozenNow = func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }

// 100,000 callers with 10 KB values hold at most 64 MB: a bucket's key is
// a fixed-size digest, never the value. The clock is frozen so that no
// bucket refills and none can be reclaimed (the worst case).
func TestTenKBCallersMemory(t *testing.T) {
	callers := 100_000
	if testing.Short() || racecheck.Enabled {
		callers = 10_000 // same bound per caller, less time under -race
	}
	before := heapInUse()
	s := tenKBStack(t)
	for i := 0; i < callers; i++ {
		d, err := s.Allow(context.Background(), sluice.NewKeys("caller", tenKBValue(i)))
		if err != nil || !d.Allowed {
			t.Fatalf("caller %d: %+v %v", i, d, err)
		}
	}
	retained := heapInUse() - before
	t.Logf("%d callers with 10 KB values retain %.1f MB (%d B each)", callers, float64(retained)/(1<<20), retained/uint64(callers))
	if limit := uint64(64<<20) * uint64(callers) / 100_000; retained > limit {
		t.Errorf("%d callers with 10 KB values retain %.1f MB, want ≤ %.1f MB", callers, float64(retained)/(1<<20), float64(limit)/(1<<20))
	}
	// Every caller still has its own bucket: each of the first few has
	// 999 of 1000 left, not a share of someone else's.
	for i := 0; i < 3; i++ {
		d, _ := s.Allow(context.Background(), sluice.NewKeys("caller", tenKBValue(i)))
		if !d.Allowed || d.Remaining != 998 {
			t.Errorf("caller %d's second request: %+v, want 998 left", i, d)
		}
	}
	runtime.KeepAlive(s)
}

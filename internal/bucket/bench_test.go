package bucket_test

import (
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/bucket"
	"golang.org/x/time/rate"
)

// The benchmarks come in pairs, sluice and x/time/rate (xrate), so that
// go test -bench . -benchmem prints them side by side. Rates are finite and
// bursts large, so every call takes the allowed path and really consumes
// (rate.Inf would short-circuit both implementations and measure nothing
// but the clock).

// bigRate and bigBurst make a bucket that never runs dry within a benchmark.
const bigRate, bigBurst = rate.Limit(1e8), 1 << 30

func BenchmarkAllow(b *testing.B) {
	b.Run("sluice", func(b *testing.B) {
		bk := bucket.New(bigRate, bigBurst)
		b.ReportAllocs()
		for b.Loop() {
			bk.Allow()
		}
	})
	b.Run("xrate", func(b *testing.B) {
		l := rate.NewLimiter(bigRate, bigBurst)
		b.ReportAllocs()
		for b.Loop() {
			l.Allow()
		}
	})
}

func BenchmarkAllowN(b *testing.B) {
	b.Run("sluice", func(b *testing.B) {
		bk := bucket.New(bigRate, bigBurst)
		b.ReportAllocs()
		for b.Loop() {
			if !bk.AllowN(t0, 1) {
				b.Fatal("denied")
			}
		}
	})
	b.Run("xrate", func(b *testing.B) {
		l := rate.NewLimiter(bigRate, bigBurst)
		b.ReportAllocs()
		for b.Loop() {
			if !l.AllowN(t0, 1) {
				b.Fatal("denied")
			}
		}
	})
}

func BenchmarkParallel(b *testing.B) {
	b.Run("sluice", func(b *testing.B) {
		bk := bucket.New(bigRate, bigBurst)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bk.Allow()
			}
		})
	})
	b.Run("xrate", func(b *testing.B) {
		l := rate.NewLimiter(bigRate, bigBurst)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Allow()
			}
		})
	})
}

const tableKeys = 100_000

func tableKeyBytes() [][]byte {
	keys := make([][]byte, tableKeys)
	for i := range keys {
		keys[i] = []byte("tenant-" + strconv.Itoa(i))
	}
	return keys
}

// heapAfter returns the live heap after a GC.
func heapAfter() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkTable100k: 100,000 distinct keys, cycled; bytes/key is the heap
// the table holds per key (map included, key strings excluded as the
// baseline holds them too).
func BenchmarkTable100k(b *testing.B) {
	keys := tableKeyBytes()
	b.Run("sluice", func(b *testing.B) {
		before := heapAfter()
		tab := bucket.NewTable(1e6, 100)
		// Keys built from bytes are copied into the table; the baseline's
		// map copies them too.
		for _, k := range keys {
			tab.TakeBytes(t0, k, 1)
		}
		perKey := float64(heapAfter()-before) / tableKeys
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			tab.TakeBytes(t0, keys[i], 1)
			i++
			if i == tableKeys {
				i = 0
			}
		}
		runtime.KeepAlive(tab)
		b.ReportMetric(perKey, "bytes/key")
	})
	b.Run("xrate", func(b *testing.B) {
		before := heapAfter()
		tab := newXrateTable(1e6, 100)
		for _, k := range keys {
			tab.allowN(k, t0, 1)
		}
		perKey := float64(heapAfter()-before) / tableKeys
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			tab.allowN(keys[i], t0, 1)
			i++
			if i == tableKeys {
				i = 0
			}
		}
		runtime.KeepAlive(tab)
		b.ReportMetric(perKey, "bytes/key")
	})
}

// xrateTable is the usual baseline: a mutex-guarded map of *rate.Limiter.
type xrateTable struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
	r  rate.Limit
	b  int
}

func newXrateTable(r rate.Limit, b int) *xrateTable {
	return &xrateTable{m: make(map[string]*rate.Limiter), r: r, b: b}
}

func (t *xrateTable) allowN(key []byte, at time.Time, n int) bool {
	t.mu.Lock()
	l := t.m[string(key)]
	if l == nil {
		l = rate.NewLimiter(t.r, t.b)
		t.m[string(key)] = l
	}
	t.mu.Unlock()
	return l.AllowN(at, n)
}

package bench

import (
	"context"
	"flag"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/sluicehq/sluice/bucket"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	"go.uber.org/ratelimit"
	"golang.org/x/time/rate"
)

// Run the bucket benchmarks with the sides interleaved, round by round, and
// summarise (medians, ratios to the best peer):
//
//	go test ./bench -run '^$' -bench 'Table|OneBucket' -benchmem -benchtime 200ms -rounds 7 | go run ./bench/cmd/benchtab
//
// -count would repeat each side back to back; -rounds runs every side once
// per round instead (sub-benchmarks named side#01, side#02, …), so that the
// drift of a noisy machine hits every side alike. Every side reads the real
// clock.

var rounds = flag.Int("rounds", 1, "interleaved rounds of every side per benchmark case")

const tableKeys = 100_000

// A regime fixes the limit so that keys are either still limited when they
// come back (live: a huge burst spent slowly) or have refilled to full
// (refill: 1e8 tokens/s, so a bucket is full again 100 ns after a take and
// a table that reclaims full buckets drops it and re-creates it).
type regime struct {
	name  string
	rate  rate.Limit
	burst int
}

var regimes = []regime{
	{"live", 1, 1 << 30},
	{"refill", 1e8, 10},
}

// keySeq is a sequence of key indices, uniform or Zipf (s = 1.1: the
// hottest key is about 9% of the traffic), cycled by the benchmarks.
func keySeq(dist string) []int32 {
	const n = 1 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	seq := make([]int32, n)
	switch dist {
	case "uniform":
		for i := range seq {
			seq[i] = int32(rng.IntN(tableKeys))
		}
	case "zipf":
		z := rand.NewZipf(rng, 1.1, 1, tableKeys-1)
		for i := range seq {
			seq[i] = int32(z.Uint64())
		}
	}
	return seq
}

func tableKeyStrings() []string {
	keys := make([]string, tableKeys)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(i) + "-key"
	}
	return keys
}

// heapNow is the live heap after a GC.
func heapNow() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// side is one keyed limiter under test: allow takes one token for key.
type side struct {
	name string
	make func(r regime) (allow func(key string) bool, close func())
}

var sides = []side{
	{"sluice", func(r regime) (func(string) bool, func()) {
		t := bucket.NewTable(r.rate, r.burst)
		return t.Allow, func() {}
	}},
	{"mutexmap", func(r regime) (func(string) bool, func()) {
		m := newMutexMap(r.rate, r.burst)
		return m.allow, func() {}
	}},
	{"golimiter", func(r regime) (func(string) bool, func()) {
		// go-limiter counts tokens per interval: burst tokens per
		// burst/rate.
		interval := time.Duration(float64(r.burst) / float64(r.rate) * 1e9)
		st, err := memorystore.New(&memorystore.Config{Tokens: uint64(r.burst), Interval: interval})
		if err != nil {
			panic(err)
		}
		ctx := context.Background()
		return func(key string) bool {
				_, _, _, ok, _ := st.Take(ctx, key)
				return ok
			}, func() {
				_ = st.Close(ctx)
			}
	}},
	{"throttled", func(r regime) (func(string) bool, func()) {
		st, err := memstore.NewCtx(0) // no LRU bound: its fastest form
		if err != nil {
			panic(err)
		}
		period := time.Duration(1e9 / float64(r.rate))
		q := throttled.RateQuota{MaxRate: throttled.PerDuration(1, period), MaxBurst: r.burst - 1}
		l, err := throttled.NewGCRARateLimiterCtx(st, q)
		if err != nil {
			panic(err)
		}
		ctx := context.Background()
		return func(key string) bool {
			limited, _, _ := l.RateLimitCtx(ctx, key, 1)
			return !limited
		}, func() {}
	}},
}

// BenchmarkTable: 100,000 keys, each side a keyed limiter, per regime and
// key distribution. bytes/key is the heap each side holds per key after
// every key has been used once.
func BenchmarkTable(b *testing.B) {
	keys := tableKeyStrings()
	for _, dist := range []string{"uniform", "zipf"} {
		seq := keySeq(dist)
		for _, r := range regimes {
			b.Run(r.name+"-"+dist, func(b *testing.B) {
				for round := range *rounds {
					for j := range sides {
						// Rotate the order each round, so that no side
						// always runs first (right after another's GC).
						s := sides[(round+j)%len(sides)]
						b.Run(s.name, func(b *testing.B) {
							before := heapNow()
							allow, done := s.make(r)
							defer done()
							for _, k := range keys {
								allow(k)
							}
							perKey := float64(int64(heapNow())-int64(before)) / tableKeys
							b.ReportAllocs()
							i := 0
							for b.Loop() {
								allow(keys[seq[i]])
								i = (i + 1) & (len(seq) - 1)
							}
							b.ReportMetric(perKey, "bytes/key")
						})
					}
				}
			})
		}
	}
}

// mutexMap is the baseline a user writes by hand: a mutex-guarded map of
// *rate.Limiter, created on first use and never dropped.
type mutexMap struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
	r  rate.Limit
	b  int
}

func newMutexMap(r rate.Limit, b int) *mutexMap {
	return &mutexMap{m: make(map[string]*rate.Limiter), r: r, b: b}
}

func (t *mutexMap) allow(key string) bool {
	t.mu.Lock()
	l := t.m[key]
	if l == nil {
		l = rate.NewLimiter(t.r, t.b)
		t.m[key] = l
	}
	t.mu.Unlock()
	return l.Allow()
}

// BenchmarkKeyedTakeAt is BenchmarkTable's sluice side alone on a virtual
// clock (AllowAt, 40 ns a take), for counting a take's instructions:
//
//	bash scripts/cgcount.sh bench 'KeyedTakeAt/live-zipf$' 100000
//
// On the real clock valgrind runs slowly enough that buckets refill and
// are reclaimed during the count, so the count would follow the machine's
// speed. Its name avoids "Table", so that BenchmarkTable's -bench pattern
// leaves it out.
func BenchmarkKeyedTakeAt(b *testing.B) {
	keys := tableKeyStrings()
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	for _, dist := range []string{"uniform", "zipf"} {
		seq := keySeq(dist)
		for _, r := range regimes {
			b.Run(r.name+"-"+dist, func(b *testing.B) {
				t := bucket.NewTable(r.rate, r.burst)
				at := t0
				for _, k := range keys {
					t.AllowAt(at, k, 1)
					at = at.Add(40)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					t.AllowAt(at, keys[seq[i]], 1)
					at = at.Add(40)
					i = (i + 1) & (len(seq) - 1)
				}
			})
		}
	}
}

// BenchmarkOneBucketParallel: one bucket taken by every goroutine at once.
// Rates are high enough that no side ever waits (uber's Take would sleep).
func BenchmarkOneBucketParallel(b *testing.B) {
	for round := range *rounds {
		for j := range 3 {
			[]func(*testing.B){parallelSluice, parallelUber, parallelXrate}[(round+j)%3](b)
		}
	}
}

func parallelSluice(b *testing.B) {
	b.Run("sluice", func(b *testing.B) {
		bk := bucket.New(5e8, 1<<30)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bk.Allow()
			}
		})
	})
}

func parallelUber(b *testing.B) {
	b.Run("uber", func(b *testing.B) {
		l := ratelimit.New(1e9, ratelimit.WithoutSlack)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Take()
			}
		})
	})
}

func parallelXrate(b *testing.B) {
	b.Run("xrate", func(b *testing.B) {
		l := rate.NewLimiter(5e8, 1<<30)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Allow()
			}
		})
	})
}

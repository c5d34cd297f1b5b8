package bench

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/memorystore"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/bucket"
	"github.com/sluicehq/sluice/internal/cputime"
	"github.com/sluicehq/sluice/stack"
)

// The commonest shape: one per-caller limit, decided through
// sluice.Limiter.Allow as a middleware would, against what a Go service
// owner would write instead (issue 25's first two rows):
//
//	go test ./bench -run '^$' -bench 'OneLimit' -benchmem -benchtime 200000x -count 3
//
// Every side reads the real clock, every request is admitted (a burst no
// run drains), and the callers are visited in a scrambled order (a stride
// coprime with their number), every one of them seen before the timed part.
//
// Each library reads its default clock: sluice one monotonic reading
// (time.Since, the "clock" side), go-limiter and x/time/rate time.Now's wall
// and monotonic pair ("clock-now", nearly twice the cost on this machine).
// "sluice-now" is sluice on time.Now, the two compared on one clock; "floor"
// (clock, map lookup, GCRA step, no lock), "api-only" and "table-only" split
// the decision into what no limiter avoids, the API's shape and the bucket.

// oneLimitJSON is the per-caller limit as a gateway definition: 600 a
// minute, burst 10⁸.
const oneLimitJSON = `{"rateLimits": [{"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
  {"dimensions": {"caller": "*"}, "requests": [{"rate": 600, "period": "minute", "burst": 100000000}]}]}]}`

// oneLimitSide is one way to limit per caller: allow decides a request of
// the caller.
type oneLimitSide struct {
	name string
	make func() (allow func(caller string) bool, close func())
}

var oneLimitSides = []oneLimitSide{
	{"sluice", func() (func(string) bool, func()) { return stackSide() }},
	// sluice on go-limiter's and x/time/rate's clock (time.Now, a wall and a
	// monotonic reading) instead of its default (one monotonic reading):
	// the two limiters compared on one clock.
	{"sluice-now", func() (func(string) bool, func()) { return stackSide(stack.WithClock(wallClock{})) }},
	{"golimiter", func() (func(string) bool, func()) {
		st, err := memorystore.New(&memorystore.Config{Tokens: 100_000_000, Interval: time.Hour})
		if err != nil {
			panic(err)
		}
		ctx := context.Background()
		return func(c string) bool {
			_, _, _, ok, err := st.Take(ctx, c)
			return err == nil && ok
		}, func() { _ = st.Close(ctx) }
	}},
	{"mutexmap", func() (func(string) bool, func()) {
		// As a careful user writes it: the stored key is cloned, since in a
		// server the lookup key is a fresh string from each request.
		var mu sync.Mutex
		m := map[string]*rate.Limiter{}
		return func(c string) bool {
			mu.Lock()
			l := m[c]
			if l == nil {
				l = rate.NewLimiter(10, 100_000_000)
				m[strings.Clone(c)] = l
			}
			mu.Unlock()
			return l.Allow()
		}, func() {}
	}},
	{"api-only", func() (func(string) bool, func()) {
		// The API's shape alone: Keys built and passed by value through
		// the sluice.Limiter interface, a Decision returned by value, no
		// limiting (what sluice − table-only − api-only leaves is the
		// engine's own plumbing).
		var l sluice.Limiter = sluice.LimiterFunc(func(_ context.Context, k sluice.Keys) (sluice.Decision, error) {
			c, _ := k.Get("caller")
			return sluice.Decision{Allowed: c != "", LimitID: "per-caller"}, nil
		})
		ctx := context.Background()
		return func(c string) bool {
			d, err := l.Allow(ctx, sluice.NewKeys("caller", c))
			return err == nil && d.Allowed
		}, func() {}
	}},
	{"floor", func() (func(string) bool, func()) {
		// What any per-caller limiter must do, with nothing around it: one
		// monotonic clock read (sluice's default clock, the cheaper of the
		// two here), one Go map lookup of the caller, and one GCRA step on
		// its state, on one goroutine with no lock. Not a usable limiter
		// (it is not safe for concurrent use and never forgets a caller):
		// the cost below which no correct one can go, which BENCHMARKS.md
		// ("Stack: one limit") sets against issue 25's goals.
		base := time.Now()
		const interval = int64(time.Second / 10) // 10 a second,
		const tolerance = 100_000_000 * interval // burst 10⁸
		m := map[string]*int64{}
		return func(c string) bool {
			now := int64(time.Since(base))
			tat := m[c]
			if tat == nil {
				tat = new(int64)
				*tat = now
				m[strings.Clone(c)] = tat
			}
			t := max(*tat, now) + interval
			if t-now > tolerance {
				return false
			}
			*tat = t
			return true
		}, func() {}
	}},
	{"clock", func() (func(string) bool, func()) {
		// The clock read alone (the floor's first step), for the
		// breakdown: sluice's default clock, one monotonic read.
		base := time.Now()
		var last time.Duration
		return func(c string) bool {
			d := time.Since(base)
			ok := d >= last && c != ""
			last = d
			return ok
		}, func() {}
	}},
	{"clock-now", func() (func(string) bool, func()) {
		// time.Now alone: the wall and the monotonic reading, the clock
		// x/time/rate's Allow reads and go-limiter reads (it links
		// time.now, time.Now's core). "golimiter − clock-now" against
		// "sluice − clock" compares the two limiters without their clocks.
		var sum int64
		return func(c string) bool {
			sum += time.Now().UnixNano() // kept, so the read is not dropped
			return c != "" && sum != 0
		}, func() {}
	}},
	{"table-only", func() (func(string) bool, func()) {
		// The floor under the engine: the same bucket, taken from a
		// bucket.Table directly.
		t := bucket.NewTable(10, 100_000_000)
		return t.Allow, func() {}
	}},
}

// stackSide is sluice's side: a Stack loaded from oneLimitJSON with opts,
// deciding through sluice.Limiter.Allow as a middleware would.
func stackSide(opts ...stack.Option) (func(string) bool, func()) {
	s, err := stack.Load([]byte(oneLimitJSON), opts...)
	if err != nil {
		panic(err)
	}
	var l sluice.Limiter = s
	ctx := context.Background()
	return func(c string) bool {
		d, err := l.Allow(ctx, sluice.NewKeys("caller", c))
		return err == nil && d.Allowed
	}, func() {}
}

// BenchmarkOneLimit: one per-caller limit, 10,000 and 100,000 callers.
// Each side runs b.N requests per round, 15 rounds in turn (A B C D, A B C
// D, …) on one locked OS thread, and reports the median of its CPU time
// per request (CLOCK_THREAD_CPUTIME_ID: on a shared machine, what the side
// used, not the time it waited for a core), the median wall time, and its
// ratio to golimiter.
func BenchmarkOneLimit(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		callers := make([]string, n)
		for i := range callers {
			callers[i] = "caller-" + strconv.Itoa(i*7+13)
		}
		const stride = 7919 // a prime: every caller in turn, scrambled
		b.Run(strconv.Itoa(n)+"-callers", func(b *testing.B) {
			allows := make([]func(string) bool, len(oneLimitSides))
			for j, sd := range oneLimitSides {
				allow, done := sd.make()
				defer done()
				for i := range 2 * n {
					if !allow(callers[(i*stride)%n]) {
						b.Fatal("denied while warming")
					}
				}
				allows[j] = allow
			}
			b.ReportAllocs()
			interleave(b, 15, "golimiter", func(j int, k int) {
				if !allows[j](callers[(k*stride)%n]) {
					b.Fatal("denied")
				}
			}, sideNames(oneLimitSides))
		})
	}
}

func sideNames(sides []oneLimitSide) []string {
	names := make([]string, len(sides))
	for i, s := range sides {
		names[i] = s.name
	}
	return names
}

// interleave runs op(side, k) for every side, b.N calls a round, rounds
// times, the sides in turn, k counting each side's own calls; it reports
// each side's median CPU and wall time per call and its ratio (of the CPU
// medians) to the side named peer.
func interleave(b *testing.B, rounds int, peer string, op func(side, k int), names []string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	runtime.GC()
	cpu := make([][]float64, len(names))
	wall := make([][]float64, len(names))
	next := make([]int, len(names))
	b.ResetTimer()
	for range rounds {
		for s := range names {
			c0, start := cputime.Thread(), time.Now()
			for range b.N {
				op(s, next[s])
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
	med := make([]float64, len(names))
	p := -1
	for s, name := range names {
		med[s] = median(cpu[s])
		b.ReportMetric(med[s], name+"-ns/op")
		b.ReportMetric(median(wall[s]), name+"-wall-ns/op")
		if name == peer {
			p = s
		}
	}
	for s, name := range names {
		if s != p && p >= 0 {
			b.ReportMetric(med[s]/med[p], name+"/"+peer)
		}
	}
	b.ReportMetric(0, "ns/op") // the total is meaningless across sides
}

func median(x []float64) float64 {
	x = slices.Clone(x)
	slices.Sort(x)
	return x[len(x)/2]
}

// BenchmarkOneLimitSide runs one side of BenchmarkOneLimit alone, for
// counting one decision's instructions with callgrind (a side sharing its
// process with the others would blur the count):
//
//	bash scripts/cgcount.sh bench 'OneLimitSide/10000-callers/sluice$' 100000
//
// Each sub-benchmark builds and warms only its own side (every caller seen
// twice), so setup cancels out of cgcount's difference of two runs.
func BenchmarkOneLimitSide(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		callers := make([]string, n)
		for i := range callers {
			callers[i] = "caller-" + strconv.Itoa(i*7+13)
		}
		const stride = 7919
		b.Run(strconv.Itoa(n)+"-callers", func(b *testing.B) {
			for _, sd := range oneLimitSides {
				b.Run(sd.name, func(b *testing.B) {
					allow, done := sd.make()
					defer done()
					for i := range 2 * n {
						if !allow(callers[(i*stride)%n]) {
							b.Fatal("denied while warming")
						}
					}
					b.ReportAllocs()
					b.ResetTimer()
					for k := range b.N {
						if !allow(callers[(k*stride)%n]) {
							b.Fatal("denied")
						}
					}
				})
			}
		})
	}
}

// BenchmarkOneLimitParallel is BenchmarkOneLimit's 10,000 callers decided
// by 16 goroutines on 2 Ps (GOMAXPROCS 2), as a server's handlers do: each
// goroutine visits the callers in its own scrambled order. The sides run
// in turn, b.N decisions a round shared among the goroutines, 15 rounds;
// the figures are medians of the wall time per decision and their ratio
// to golimiter:
//
//	go test ./bench -run '^$' -bench 'OneLimitParallel$' -benchtime 200000x -count 3
func BenchmarkOneLimitParallel(b *testing.B) {
	const n, goroutines = 10_000, 16
	callers := make([]string, n)
	for i := range callers {
		callers[i] = "caller-" + strconv.Itoa(i*7+13)
	}
	const stride = 7919
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	sides := []oneLimitSide{}
	for _, sd := range oneLimitSides {
		switch sd.name {
		case "sluice", "sluice-now", "golimiter", "mutexmap", "table-only":
			sides = append(sides, sd) // the sides safe for concurrent use
		}
	}
	allows := make([]func(string) bool, len(sides))
	for j, sd := range sides {
		allow, done := sd.make()
		defer done()
		for i := range 2 * n {
			if !allow(callers[(i*stride)%n]) {
				b.Fatal("denied while warming")
			}
		}
		allows[j] = allow
	}
	b.ReportAllocs()
	runtime.GC()
	wall := make([][]float64, len(sides))
	var denied atomic.Bool
	b.ResetTimer()
	for round := range 15 {
		for s := range sides {
			allow := allows[s]
			per := (b.N + goroutines - 1) / goroutines
			var wg sync.WaitGroup
			start := time.Now()
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					k := g*per*stride + round*131
					for range per {
						if !allow(callers[k%n]) {
							denied.Store(true)
						}
						k += stride
					}
				}()
			}
			wg.Wait()
			wall[s] = append(wall[s], float64(time.Since(start).Nanoseconds())/float64(per*goroutines))
		}
	}
	b.StopTimer()
	if denied.Load() {
		b.Fatal("denied")
	}
	p := 0
	med := make([]float64, len(sides))
	for s, sd := range sides {
		med[s] = median(wall[s])
		b.ReportMetric(med[s], sd.name+"-ns/op")
		if sd.name == "golimiter" {
			p = s
		}
	}
	for s, sd := range sides {
		if s != p {
			b.ReportMetric(med[s]/med[p], sd.name+"/golimiter")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// wallClock is a sluice.Clock on time.Now, the clock go-limiter and
// x/time/rate read (a wall and a monotonic reading).
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

package middleware

import (
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/cputime"
)

var rounds = flag.Int("rounds", 5, "interleaved rounds per comparison benchmark")

// floorSide names the side of a comparison, if any, that does only what
// every limiter in it does alike (read the caller's key): compare then also
// reports each side's cost over it against the peer's.
const floorSide = "keyfunc"

// side is one contestant of a comparison: fn runs b.N requests, warm
// (optional) makes its state what a long run would find (every caller's
// bucket created).
type side struct {
	name string
	fn   func(b *testing.B)
	warm func()
}

// compare runs every side once per round, round after round (A B C, B C A,
// C A B, …), each for -benchtime, so that the sides share the machine's noise; it
// then reports, per side, the median ns/op, process CPU time per op and
// allocs/op over the rounds, and for every side after the first two, its
// ratio to the second (the peer): of the medians, and the median (and
// range) of the ratios within each round. The first side is the baseline (the bare handler): the
// "added" columns subtract it.
func compare(b *testing.B, title string, sides []side) {
	for _, s := range sides {
		if s.warm != nil {
			s.warm()
		}
	}
	ns := make([][]float64, len(sides))
	cpu := make([][]float64, len(sides)) // process CPU time per op; -1 where unknown
	allocs := make([][]float64, len(sides))
	ran := make([]bool, len(sides)) // false: -bench filtered the side out
	for r := range *rounds {
		for k := range sides {
			// Each round starts one side later, so that no side always
			// runs first (after the previous round's garbage) or last.
			i := (k + r) % len(sides)
			s := sides[i]
			var perOp, cpuPerOp, allocsPerOp float64
			b.Run(fmt.Sprintf("round=%d/side=%s", r+1, s.name), func(b *testing.B) {
				ran[i] = true
				b.ReportAllocs()
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				c0 := cputime.Process()
				s.fn(b)
				c1 := cputime.Process()
				runtime.ReadMemStats(&m1)
				// The last call of this function is the measured one.
				perOp = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				allocsPerOp = float64(m1.Mallocs-m0.Mallocs) / float64(b.N)
				cpuPerOp = -1
				if c0 >= 0 && c1 >= 0 {
					cpuPerOp = float64(c1-c0) / float64(b.N)
				}
			})
			ns[i] = append(ns[i], perOp)
			cpu[i] = append(cpu[i], cpuPerOp)
			allocs[i] = append(allocs[i], allocsPerOp)
		}
	}
	if slices.Contains(ran, false) {
		// A side run alone (to profile it, say) has nothing to compare.
		fmt.Printf("\n%s: some sides filtered out by -bench, no comparison\n", title)
		return
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n%s: %d rounds, medians\n%-12s %10s %10s %8s %12s %12s\n", title, *rounds, "side", "ns/op", "cpu ns/op", "allocs", "added ns", "added allocs")
	base, baseA := median(ns[0]), median(allocs[0])
	for i, s := range sides {
		m, a := median(ns[i]), median(allocs[i])
		fmt.Fprintf(&out, "%-12s %10.0f %10.0f %8.1f %12.0f %12.1f\n", s.name, m, median(cpu[i]), a, m-base, a-baseA)
	}
	if len(sides) > 2 {
		peer := median(ns[1])
		for i := 2; i < len(sides); i++ {
			ratio := median(ns[i]) / peer
			added := (median(ns[i]) - base) / (peer - base)
			// Per round, the side against the peer of the same round:
			// load that drifts between rounds weighs on both alike.
			perRound, cpuRound := roundRatios(ns[i], ns[1]), roundRatios(cpu[i], cpu[1])
			fmt.Fprintf(&out, "%s ÷ %s: %.2f× per request, %.2f× of the cost added to the bare handler; per round %.2f× (%.2f–%.2f)",
				sides[i].name, sides[1].name, ratio, added, median(perRound), slices.Min(perRound), slices.Max(perRound))
			if cpuRound != nil {
				// CPU time leaves out the waits for a core on a busy
				// machine (and counts the collector's workers).
				fmt.Fprintf(&out, "; CPU time %.2f× (per round %.2f–%.2f)", median(cpu[i])/median(cpu[1]), slices.Min(cpuRound), slices.Max(cpuRound))
			}
			out.WriteString("\n")
		}
	}
	if f := slices.IndexFunc(sides, func(s side) bool { return s.name == floorSide }); f > 1 {
		// The costs over the floor: what each limiter adds to the work
		// every limiter of the comparison does alike.
		for i := 2; i < len(sides); i++ {
			if i == f {
				continue
			}
			over := func(xs []float64) float64 { return median(xs) - median(ns[f]) }
			perRound := make([]float64, len(ns[i]))
			for r := range perRound {
				perRound[r] = (ns[i][r] - ns[f][r]) / (ns[1][r] - ns[f][r])
			}
			fmt.Fprintf(&out, "%s − %s ÷ %s − %s: %.0f / %.0f ns = %.2f× (per round %.2f×, %.2f–%.2f)\n",
				sides[i].name, floorSide, sides[1].name, floorSide, over(ns[i]), over(ns[1]), over(ns[i])/over(ns[1]),
				median(perRound), slices.Min(perRound), slices.Max(perRound))
		}
	}
	fmt.Print(out.String())
}

// runAlone runs each side on its own as a sub-benchmark named after it,
// warmed first (when it has a warm-up), without the rounds of compare.
func runAlone(b *testing.B, sides []side) {
	for _, s := range sides {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			if s.warm != nil {
				s.warm()
			}
			b.ResetTimer()
			s.fn(b)
		})
	}
}

// roundRatios returns xs[r]/ys[r] for every round r; nil when a value is
// unknown (negative).
func roundRatios(xs, ys []float64) []float64 {
	out := make([]float64, len(xs))
	for r := range xs {
		if xs[r] < 0 || ys[r] <= 0 {
			return nil
		}
		out[r] = xs[r] / ys[r]
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

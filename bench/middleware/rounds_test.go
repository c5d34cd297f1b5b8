package middleware

import (
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
)

var rounds = flag.Int("rounds", 5, "interleaved rounds per comparison benchmark")

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
// then reports, per side, the median ns/op and allocs/op over the rounds,
// and for every side after the first two, its ratio to the second (the
// peer): of the medians, and the median (and range) of the ratios within
// each round. The first side is the baseline (the bare handler): the
// "added" columns subtract it.
func compare(b *testing.B, title string, sides []side) {
	for _, s := range sides {
		if s.warm != nil {
			s.warm()
		}
	}
	ns := make([][]float64, len(sides))
	allocs := make([][]float64, len(sides))
	for r := range *rounds {
		for k := range sides {
			// Each round starts one side later, so that no side always
			// runs first (after the previous round's garbage) or last.
			i := (k + r) % len(sides)
			s := sides[i]
			var perOp, allocsPerOp float64
			b.Run(fmt.Sprintf("round=%d/side=%s", r+1, s.name), func(b *testing.B) {
				b.ReportAllocs()
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				s.fn(b)
				runtime.ReadMemStats(&m1)
				// The last call of this function is the measured one.
				perOp = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				allocsPerOp = float64(m1.Mallocs-m0.Mallocs) / float64(b.N)
			})
			ns[i] = append(ns[i], perOp)
			allocs[i] = append(allocs[i], allocsPerOp)
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n%s: %d rounds, medians\n%-12s %10s %8s %12s %12s\n", title, *rounds, "side", "ns/op", "allocs", "added ns", "added allocs")
	base, baseA := median(ns[0]), median(allocs[0])
	for i, s := range sides {
		m, a := median(ns[i]), median(allocs[i])
		fmt.Fprintf(&out, "%-12s %10.0f %8.1f %12.0f %12.1f\n", s.name, m, a, m-base, a-baseA)
	}
	if len(sides) > 2 {
		peer := median(ns[1])
		for i := 2; i < len(sides); i++ {
			ratio := median(ns[i]) / peer
			added := (median(ns[i]) - base) / (peer - base)
			// Per round, the side against the peer of the same round:
			// load that drifts between rounds weighs on both alike.
			perRound := make([]float64, len(ns[i]))
			for r := range perRound {
				perRound[r] = ns[i][r] / ns[1][r]
			}
			fmt.Fprintf(&out, "%s ÷ %s: %.2f× per request, %.2f× of the cost added to the bare handler; per round %.2f× (%.2f–%.2f)\n",
				sides[i].name, sides[1].name, ratio, added, median(perRound), slices.Min(perRound), slices.Max(perRound))
		}
	}
	fmt.Print(out.String())
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

// Command benchtab summarises interleaved benchmark rounds read from
// standard input (the output of go test -bench with -rounds): for every
// benchmark case it prints each side's median ns/op, allocs/op and extra
// metrics, and the ratio of sluice's median to the best peer's, as a
// Markdown table.
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// line matches "BenchmarkX/case/side#03-2   N   12.3 ns/op   4 B/op ...".
var line = regexp.MustCompile(`^(Benchmark\S+?)(?:#\d+)?(?:-\d+)?\s+\d+\s+(.*)$`)

type sample map[string][]float64 // unit → values

func main() {
	order := []string{}
	cases := map[string]map[string]sample{} // case → side → samples
	sidesOf := map[string][]string{}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		name := m[1]
		i := strings.LastIndex(name, "/")
		if i < 0 {
			continue
		}
		c, side := name[:i], name[i+1:]
		if cases[c] == nil {
			cases[c] = map[string]sample{}
			order = append(order, c)
		}
		if cases[c][side] == nil {
			cases[c][side] = sample{}
			sidesOf[c] = append(sidesOf[c], side)
		}
		f := strings.Fields(m[2])
		for j := 0; j+1 < len(f); j += 2 {
			v, err := strconv.ParseFloat(f[j], 64)
			if err == nil {
				cases[c][side][f[j+1]] = append(cases[c][side][f[j+1]], v)
			}
		}
	}
	fmt.Println("| case | side | ns/op (median) | rounds | allocs/op | bytes/key | sluice ÷ side |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, c := range order {
		own := median(cases[c]["sluice"]["ns/op"])
		best, bestSide := 0.0, ""
		for _, side := range sidesOf[c] {
			s := cases[c][side]
			ns := median(s["ns/op"])
			ratio := ""
			if side != "sluice" && ns > 0 {
				ratio = fmt.Sprintf("%.2f", own/ns)
				if best == 0 || ns < best {
					best, bestSide = ns, side
				}
			}
			bk := ""
			if v, ok := s["bytes/key"]; ok {
				bk = fmt.Sprintf("%.0f", median(v))
			}
			fmt.Printf("| %s | %s | %.1f | %d | %.0f | %s | %s |\n", strings.TrimPrefix(c, "Benchmark"), side, ns, len(s["ns/op"]), median(s["allocs/op"]), bk, ratio)
		}
		if best > 0 {
			fmt.Printf("| %s | **best peer: %s** | | | | | **%.2f** |\n", strings.TrimPrefix(c, "Benchmark"), bestSide, own/best)
		}
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

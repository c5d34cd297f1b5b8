// Command benchtab summarises interleaved benchmark rounds read from
// standard input (the output of go test -bench with -rounds): for every
// benchmark case it prints each side's median ns/op and the ratio of
// sluice's median to each peer's and to the best peer's, and the median
// bytes/key where reported, as Markdown tables.
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
	// One table per top-level benchmark: a row per case, a column per side.
	groups := []string{}
	casesOf := map[string][]string{}
	for _, c := range order {
		g, _, _ := strings.Cut(c, "/")
		if casesOf[g] == nil {
			groups = append(groups, g)
		}
		casesOf[g] = append(casesOf[g], c)
	}
	for _, g := range groups {
		cs := casesOf[g]
		sides := sidesOf[cs[0]]
		fmt.Printf("%s — median ns/op over %d rounds (sluice ÷ side)\n\n", g, len(cases[cs[0]]["sluice"]["ns/op"]))
		fmt.Print("| case |")
		for _, side := range sides {
			fmt.Printf(" %s |", side)
		}
		fmt.Println(" sluice ÷ best peer | allocs/op (sluice) |")
		fmt.Print("|---|")
		for range sides {
			fmt.Print("---|")
		}
		fmt.Println("---|---|")
		hasBytes := false
		for _, c := range cs {
			name := strings.TrimPrefix(strings.TrimPrefix(c, g), "/")
			if name == "" {
				name = "—"
			}
			own := median(cases[c]["sluice"]["ns/op"])
			best := 0.0
			fmt.Printf("| %s |", name)
			for _, side := range sides {
				ns := median(cases[c][side]["ns/op"])
				if _, ok := cases[c][side]["bytes/key"]; ok {
					hasBytes = true
				}
				if side == "sluice" {
					fmt.Printf(" %.0f |", ns)
					continue
				}
				fmt.Printf(" %.0f (%.2f) |", ns, own/ns)
				if ns > 0 && (best == 0 || ns < best) {
					best = ns
				}
			}
			fmt.Printf(" **%.2f** | %.0f |\n", own/best, median(cases[c]["sluice"]["allocs/op"]))
		}
		fmt.Println()
		if !hasBytes {
			continue
		}
		fmt.Printf("%s — heap held per key after every key was used once (bytes, median)\n\n", g)
		fmt.Print("| case |")
		for _, side := range sides {
			fmt.Printf(" %s |", side)
		}
		fmt.Println()
		fmt.Print("|---|")
		for range sides {
			fmt.Print("---|")
		}
		fmt.Println()
		for _, c := range cs {
			fmt.Printf("| %s |", strings.TrimPrefix(strings.TrimPrefix(c, g), "/"))
			for _, side := range sides {
				fmt.Printf(" %.0f |", median(cases[c][side]["bytes/key"]))
			}
			fmt.Println()
		}
		fmt.Println()
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

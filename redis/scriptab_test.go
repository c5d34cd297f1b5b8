package redis_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/redis/redistest"
)

// TestScriptAB compares script variants side by side on one redis-server,
// interleaved (the order rotates each round), by the server time INFO
// commandstats gives EVALSHA per call: each variant is a file of
// SLUICE_SCRIPT_AB (space-separated paths), run with the arguments sluice's
// script takes for one bucket, three buckets, and a batch of four
// one-bucket decisions, every decision admitted. It prints the median per
// case and variant, and its ratio to the first variant. Skipped unless
// SLUICE_SCRIPT_AB is set.
//
//	SLUICE_SCRIPT_AB="gcra.lua /tmp/new.lua" go test -run ScriptAB -v -count=1
func TestScriptAB(t *testing.T) {
	files := strings.Fields(os.Getenv("SLUICE_SCRIPT_AB"))
	if len(files) == 0 {
		t.Skip("SLUICE_SCRIPT_AB is not set")
	}
	rounds, calls := 9, 3000
	if r, err := strconv.Atoi(os.Getenv("SLUICE_AB_ROUNDS")); err == nil {
		rounds = r
	}
	if c, err := strconv.Atoi(os.Getenv("SLUICE_AB_CALLS")); err == nil {
		calls = c
	}
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 32})
	defer client.Close()
	ctx := context.Background()
	shas := make([]string, len(files))
	for i, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		shas[i], err = client.ScriptLoad(ctx, string(src)).Result()
		if err != nil {
			t.Fatal(err)
		}
	}
	op := []any{"1", "1", "1", "1000000", "1", "0"}
	type kase struct {
		name string
		keys func(v, i int) []string
		args []any
	}
	key := func(v, d, i int) string { return fmt.Sprintf("ab%d_d%d_%d", v, d, i%1000) }
	cases := []kase{
		{"one", func(v, i int) []string { return []string{key(v, 0, i)} }, append([]any{"t", ""}, op...)},
		{"three", func(v, i int) []string { return []string{key(v, 0, i), key(v, 1, i), key(v, 2, i)} },
			append(append(append([]any{"t", ""}, op...), op...), op...)},
		{"batch4", func(v, i int) []string {
			return []string{key(v, 0, 4*i), key(v, 0, 4*i+1), key(v, 0, 4*i+2), key(v, 0, 4*i+3)}
		}, func() []any {
			a := []any{"m", "", "4"}
			for range 4 {
				a = append(a, "1")
				a = append(a, op...)
			}
			return a
		}()},
	}
	res := map[string][][]float64{}
	for _, c := range cases {
		res[c.name] = make([][]float64, len(files))
	}
	for r := range rounds {
		for _, c := range cases {
			for k := range files {
				v := (k + r) % len(files)
				if err := client.ConfigResetStat(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				for range 16 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							i := int(next.Add(1)) - 1
							if i >= calls {
								return
							}
							if err := client.EvalSha(ctx, shas[v], c.keys(v, i), c.args...).Err(); err != nil {
								t.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				st, err := commandStats(ctx, client)
				if err != nil {
					t.Fatal(err)
				}
				e := st["evalsha"]
				res[c.name][v] = append(res[c.name][v], float64(e.Usec)/float64(e.Calls))
			}
		}
	}
	for _, c := range cases {
		base := median(res[c.name][0])
		for v, f := range files {
			m := median(res[c.name][v])
			fmt.Printf("%-7s %-28s %6.2f µs/call  %.2fx\n", c.name, filepath.Base(f), m, m/base)
		}
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

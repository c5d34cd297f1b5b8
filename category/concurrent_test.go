package category_test

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/category"
)

// Many goroutines, some with stale instants, on an action whose resource
// bucket often denies after its request bucket admitted: each such denial
// gives the request token back. Over the kept decisions, no window of
// instants [t1, t2] may hold more than burst + rate·(t2 − t1) of either
// bucket, whatever the interleaving of takes and give-backs.
func TestConcurrentGiveBacksKeepBothBounds(t *testing.T) {
	const (
		reqBurst, reqRate = 5, 200.0
		resBurst, resRate = 12, 600.0
	)
	run := category.Category{Name: "Mutating", Burst: reqBurst, Refill: reqRate, Actions: []string{"RunInstances"}}
	s, err := category.New([]category.Category{run}, category.WithPerAction(),
		category.WithResourceBucket("RunInstances", resBurst, resRate))
	if err != nil {
		t.Fatal(err)
	}
	type kept struct {
		at time.Duration
		n  int
	}
	var (
		clock  atomic.Int64
		mu     sync.Mutex
		all    []kept
		denied atomic.Int64
		wg     sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 21))
			var local []kept
			for range 1500 {
				ns := clock.Add(int64(rng.IntN(int(20 * time.Millisecond))))
				if rng.IntN(4) == 0 {
					ns -= int64(rng.IntN(int(40 * time.Millisecond))) // stale
				}
				n := 1 + rng.IntN(6)
				d, err := s.AllowActionAt(t0.Add(time.Duration(ns)), "RunInstances", n)
				if err != nil {
					t.Error(err)
					return
				}
				if !d.Allowed {
					if d.Metric == category.MetricResources {
						denied.Add(1)
					}
					continue
				}
				local = append(local, kept{time.Duration(ns), n})
			}
			mu.Lock()
			all = append(all, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if denied.Load() < 500 {
		t.Fatalf("only %d resource denials: the give-backs were hardly exercised", denied.Load())
	}
	t.Logf("%d kept, %d resource denials", len(all), denied.Load())
	slices.SortFunc(all, func(a, b kept) int { return int(a.at - b.at) })
	const tick = 1e-6 // a bucket's rounding, generously
	for i := range all {
		reqs, res := 0, 0
		for j := i; j < len(all); j++ {
			reqs++
			res += all[j].n
			dt := (all[j].at - all[i].at).Seconds()
			if float64(reqs) > reqBurst+reqRate*dt+tick*reqRate {
				t.Fatalf("window [%v, %v]: %d requests kept > %d + %.0f/s·Δt", all[i].at, all[j].at, reqs, reqBurst, reqRate)
			}
			if float64(res) > resBurst+resRate*dt+tick*resRate {
				t.Fatalf("window [%v, %v]: %d resources kept > %d + %.0f/s·Δt", all[i].at, all[j].at, res, resBurst, resRate)
			}
			if dt > 1 {
				break
			}
		}
	}
}

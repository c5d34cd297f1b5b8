package bucket_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/bucket"
)

// A take on a new key that fits the burst set by a concurrent Reconfigure
// but not the burst before it: it is either refused (over the old burst)
// or takes its tokens from a new bucket, never admitted without taking
// anything. All at one instant, so nothing refills: each key admits at
// most its burst.
func TestTableTakeRacingReconfigureNeverAdmitsFree(t *testing.T) {
	tab := bucket.NewTable(1, 2, bucket.WithShards(1))
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			tab.Reconfigure(t0, 1, 2+2*(i%2)) // burst 2, 4, 2, 4, …
		}
	}()
	const workers, keys = 4, 20000
	var bad atomic.Int64
	var takers sync.WaitGroup
	for w := range workers {
		takers.Add(1)
		go func() {
			defer takers.Done()
			for i := range keys {
				k := strconv.Itoa(w) + "-" + strconv.Itoa(i)
				var ok bool
				if i%2 == 0 {
					ok = tab.TakeN(t0, k, 3).OK
				} else {
					ok = tab.AllowN(t0, k, 3)
				}
				// A take of 3 that was admitted (burst 4) left 1 token,
				// and 1 token is never a full bucket under burst 2 or 4,
				// so conversions keep it and nothing refills at t0.
				if ok && tab.TokensAt(t0, k) > 1 {
					bad.Add(1)
				}
			}
		}()
	}
	takers.Wait()
	stop.Store(true)
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d takes of 3 admitted on new keys without taking anything", n)
	}
}

package bucket_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/bucket"
)

// A take on a new key that fits the burst set by a concurrent Reconfigure
// but not the burst before it: it is either refused (over the old burst)
// or takes its tokens from a new bucket, never admitted without taking
// anything. All at one instant, so nothing refills: each key admits at
// most its burst.
func TestTableTakeRacingReconfigureNeverAdmitsFree(t *testing.T) {
	// Bounded work: a Reconfigure walks every bucket of the shard, so a
	// reconfiguring goroutine that looped until the takers finished did
	// work quadratic in the keys (8 to 71 s under load), and one that does
	// a fixed number alone can finish before the takers start. The first
	// taker reconfigures before each of its takes instead: a fixed number
	// of Reconfigures, each racing the other takers' takes.
	const workers, keys = 4, 2500
	tab := bucket.NewTable(1, 2, bucket.WithShards(1))
	start := make(chan struct{})
	var bad, admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range keys {
				if w == 0 {
					tab.Reconfigure(t0, 1, 2+2*(i%2)) // burst 2, 4, 2, 4, …
				}
				k := strconv.Itoa(w) + "-" + strconv.Itoa(i)
				var ok bool
				if i%2 == 0 {
					ok = tab.TakeN(t0, k, 3).OK
				} else {
					ok = tab.AllowN(t0, k, 3)
				}
				if ok {
					admitted.Add(1)
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
	close(start)
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d takes of 3 admitted on new keys without taking anything", n)
	}
	t.Logf("%d of %d takes of 3 admitted (under burst 4)", admitted.Load(), workers*keys)
}

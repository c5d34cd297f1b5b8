package bucket_test

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/bucket"
)

// One take at an instant far ahead of everyone else's (a what-if, a wrong
// clock, an instant past the representable range) must cost only that key
// its tokens, as it would with independent Buckets: keys that never had a
// bucket start full for callers at the present, in every shard.
func TestTableFutureTakeDoesNotStarveNewKeys(t *testing.T) {
	for _, future := range []time.Time{at(24 * time.Hour), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)} {
		tab := bucket.NewTable(1, 2) // 16 shards once split
		for i := range 2000 {
			if !tab.TakeN(t0, "k"+strconv.Itoa(i), 1).OK {
				t.Fatalf("key %d denied at t0", i)
			}
		}
		tab.TakeN(future, "x", 1)
		// Traffic at the present on existing keys drives the sweeps of
		// every shard; the buckets taken at t0 are full again at t0+1s.
		for round := range 20 {
			now := at(10*time.Second + time.Duration(round)*time.Second)
			for i := range 2000 {
				tab.TakeN(now, "k"+strconv.Itoa(i), 1)
			}
		}
		now := at(40 * time.Second)
		denied := 0
		for i := range 1000 {
			if r := tab.TakeN(now, "new"+strconv.Itoa(i), 2); !r.OK {
				denied++
			}
		}
		if denied > 0 {
			t.Errorf("after one take at %v: %d of 1000 new keys denied their full burst at t0+40s", future, denied)
		}
		if got := tab.TokensAt(now, "x"); got > 1 {
			t.Errorf("x after its take at %v: %v tokens at t0+40s, want at most 1", future, got)
		}
	}
}

// Stale and far-future instants mixed on many keys, sequentially, with
// sweeps dropping and re-creating buckets throughout: no key's window
// admits more than burst + rate·Δt.
func TestTableWildInstantsWindowBound(t *testing.T) {
	const r, burst, nkeys = 10, 3, 400
	for _, shards := range []int{1, 16} {
		tab := bucket.NewTable(r, burst, bucket.WithShards(shards))
		rng := rand.New(rand.NewPCG(uint64(shards), 11))
		grants := map[int][]grant{}
		base := int64(0)
		for i := range 60000 {
			base += rng.Int64N(int64(20 * time.Millisecond))
			ns := base - rng.Int64N(int64(2*time.Second)) // stale
			if rng.IntN(500) == 0 {
				// Far ahead, by up to 10 s (500 steps). Further ahead only
				// lengthens the time new keys start empty after a sweep at
				// such an instant (conservative; see the Table doc), which
				// with unlucky hash seeds left too few grants to check.
				ns = base + rng.Int64N(int64(10*time.Second))
			}
			now := t0.Add(time.Duration(ns))
			k := rng.IntN(nkeys)
			if i%4 == 0 {
				k = rng.IntN(4) // hot keys
			}
			key := "k" + strconv.Itoa(k)
			n := 1 + rng.IntN(2)
			switch rng.IntN(4) {
			case 0:
				tab.ChargeN(now, key, n) // only ever restricts
			case 1:
				if tab.AllowN(now, key, n) {
					grants[k] = append(grants[k], grant{now, n})
				}
			default:
				res := tab.TakeN(now, key, n)
				if res.OK && rng.IntN(4) == 0 {
					_ = tab.GiveBackBytes([]byte(key), &res.Grant, n) // given back at once
				} else if res.OK {
					grants[k] = append(grants[k], grant{now, n})
				}
			}
		}
		total := 0
		for _, g := range grants {
			total += len(g)
			checkWindows(t, g, r, burst, 0)
		}
		if total < 1000 {
			t.Fatalf("shards %d: only %d grants", shards, total)
		}
		t.Logf("shards %d: %d grants on %d keys", shards, total, len(grants))
	}
}

package bucket

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// checkTable verifies the structure of every shard of t: each live slot is
// reachable from its home without crossing an empty slot (so no lookup can
// miss it and re-create a full bucket), no digest is stored twice, live
// counts match, and the Budget account matches the live total.
func checkTable(tb testing.TB, t *Table) {
	tb.Helper()
	set := t.set.Load()
	if set == nil {
		return
	}
	total := 0
	for si := range set.shards {
		s := &set.shards[si]
		s.mu.Lock()
		n := len(s.slots)
		live := 0
		seen := map[digest]bool{}
		for j := range s.slots {
			sl := &s.slots[j]
			if sl.hi|sl.lo == 0 {
				continue
			}
			live++
			d := digest{sl.hi, sl.lo}
			if seen[d] {
				tb.Fatalf("shard %d: digest %v stored twice", si, d)
			}
			seen[d] = true
			if d.lo&set.mask != uint64(si) {
				tb.Fatalf("shard %d holds a digest of shard %d", si, d.lo&set.mask)
			}
			for k := home(sl.hi, n); k != j; k = (k + 1) % n {
				if o := &s.slots[k]; o.hi|o.lo == 0 {
					tb.Fatalf("shard %d: slot %d unreachable from its home %d (empty %d)", si, j, home(sl.hi, n), k)
				}
			}
		}
		if live != s.live {
			tb.Fatalf("shard %d: live = %d, %d slots used", si, s.live, live)
		}
		if n > 0 && live*4 > n*3+4 {
			tb.Fatalf("shard %d: %d live in %d slots", si, live, n)
		}
		total += live
		s.mu.Unlock()
	}
	if t.acct != nil && t.acct.n.Load() != int64(total) {
		tb.Fatalf("budget account %d, live %d", t.acct.n.Load(), total)
	}
}

var diffT0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

type diffParams struct {
	r rate.Limit
	b int
}

// runTableDiff drives a Table and a map of independent Buckets with the same
// random operations at non-decreasing instants. With instants that never go
// back, dropping a full bucket and re-creating it in the shard's floor state
// changes nothing, so every decision and every reading must be identical.
func runTableDiff(tb testing.TB, seed uint64, nkeys, ops, shards int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	choices := []diffParams{{1, 2}, {10, 5}, {0.5, 1}, {1000, 100}, {0, 3}, {3, 0}, {200, 1}, {1e6, 7}}
	cur := choices[rng.IntN(len(choices))]
	tab := NewTable(cur.r, cur.b, WithShards(shards))
	ref := map[string]*Bucket{}
	tres := map[string]Result{}
	bres := map[string]Result{}
	get := func(k string) *Bucket {
		b := ref[k]
		if b == nil {
			b = New(cur.r, cur.b)
			ref[k] = b
		}
		return b
	}
	ns := int64(0)
	for i := range ops {
		switch x := rng.IntN(100); {
		case x < 60:
		case x < 90:
			ns += rng.Int64N(int64(5 * time.Millisecond))
		case x < 98:
			ns += rng.Int64N(int64(2 * time.Second))
		default:
			ns += rng.Int64N(int64(time.Minute))
		}
		now := diffT0.Add(time.Duration(ns))
		k := "k" + strconv.Itoa(rng.IntN(nkeys))
		n := rng.IntN(cur.b+3) - 1
		switch op := rng.IntN(20); {
		case op < 9:
			got, want := tab.TakeN(now, k, n), get(k).TakeN(now, n)
			if got.OK != want.OK || got.Remaining != want.Remaining || got.RetryAfter != want.RetryAfter ||
				got.OverBurst != want.OverBurst || got.Permanent != want.Permanent {
				tb.Fatalf("seed %d op %d: TakeN(%s, +%v, %d) = %+v, bucket %+v", seed, i, k, time.Duration(ns), n, got, want)
			}
			tres[k], bres[k] = got, want
		case op < 12:
			got, want := tab.AllowN(now, k, n), get(k).AllowN(now, n)
			if got != want {
				tb.Fatalf("seed %d op %d: AllowN(%s, +%v, %d) = %v, bucket %v", seed, i, k, time.Duration(ns), n, got, want)
			}
		case op < 14:
			tab.ChargeN(now, k, n)
			get(k).ChargeN(now, n)
		case op < 18:
			// A take given back (in part) at once: the Table bounds a
			// give-back by its shard's latest take, a Bucket by its own, and
			// with instants that never go back both are this take's.
			got, want := tab.TakeN(now, k, n), get(k).TakeN(now, n)
			if got.OK != want.OK || got.Remaining != want.Remaining {
				tb.Fatalf("seed %d op %d: TakeN(%s, +%v, %d) = %+v, bucket %+v", seed, i, k, time.Duration(ns), n, got, want)
			}
			if got.OK && n > 0 {
				back := 1 + rng.IntN(n)
				e1, e2 := tab.GiveBack(k, &got.Grant, back), get(k).GiveBack(&want.Grant, back)
				if e1 != nil || e2 != nil {
					tb.Fatalf("seed %d op %d: GiveBack(%s, %d): table %v, bucket %v", seed, i, k, back, e1, e2)
				}
			}
		case op < 19:
			got, want := tab.TokensAt(now, k), get(k).TokensAt(now)
			if got != want {
				tb.Fatalf("seed %d op %d: TokensAt(%s, +%v) = %v, bucket %v", seed, i, k, time.Duration(ns), got, want)
			}
		default:
			if rng.IntN(10) == 0 {
				cur = choices[rng.IntN(len(choices))]
				tab.Reconfigure(now, cur.r, cur.b)
				for _, b := range ref {
					b.Reconfigure(now, cur.r, cur.b)
				}
			}
		}
		if i%97 == 0 {
			checkTable(tb, tab)
		}
	}
	checkTable(tb, tab)
	// Everything the Table still holds, and everything it dropped, reads
	// the same.
	now := diffT0.Add(time.Duration(ns))
	for k, b := range ref {
		if got, want := tab.TokensAt(now, k), b.TokensAt(now); got != want {
			tb.Fatalf("seed %d end: TokensAt(%s) = %v, bucket %v", seed, k, got, want)
		}
	}
}

func TestTableMatchesIndependentBuckets(t *testing.T) {
	ops := 20000
	if testing.Short() {
		ops = 4000
	}
	for seed := range uint64(12) {
		nkeys := []int{3, 40, 700}[seed%3]
		shards := []int{1, 16, 4, 1}[seed%4]
		runTableDiff(t, seed, nkeys, ops, shards)
	}
}

func FuzzTableMatchesIndependentBuckets(f *testing.F) {
	f.Add(uint64(1), uint16(5), uint8(1))
	f.Add(uint64(7), uint16(600), uint8(16))
	f.Fuzz(func(t *testing.T, seed uint64, nkeys uint16, shards uint8) {
		runTableDiff(t, seed, 1+int(nkeys%1000), 3000, int(shards%17))
	})
}

// Odd parameters, costs and instants, and Reconfigure between any two
// parameter sets: nothing panics, the structure stays sound, and no key
// ever holds more than the burst.
func TestTableOddInputs(t *testing.T) {
	rates := []rate.Limit{0, -1, rate.Limit(math.NaN()), rate.Inf, rate.Limit(math.Inf(-1)), 1e-300, 1e300, MaxRate, 1}
	bursts := []int{-1, 0, 1, 5, math.MaxInt}
	ns := []int{math.MinInt, -1, 0, 1, 3, math.MaxInt}
	instants := []time.Time{{}, diffT0.AddDate(-400, 0, 0), diffT0, diffT0.Add(time.Second), diffT0.AddDate(400, 0, 0), time.Unix(1<<62, 0)}
	for _, r := range rates {
		for _, b := range bursts {
			bud := NewBudget(3)
			tab := NewTable(r, b, WithShards(1), WithBudget(bud))
			for i, at := range instants {
				for j, n := range ns {
					k := strconv.Itoa((i + j) % 5)
					tab.TakeN(at, k, n)
					tab.AllowN(at, k, n)
					tab.ChargeN(at, k, n)
					res := tab.TakeBytes(at, []byte(k), n)
					_ = tab.GiveBackBytes([]byte(k), &res.Grant, n)
					_ = tab.GiveBackBytes([]byte(k), &res.Grant, n) // refused: nothing left
					if got := tab.TokensAt(at, k); got > float64(max(0, min(b, MaxBurst)))+1e-9 && r != rate.Inf {
						t.Fatalf("rate %v burst %d: key %s holds %v tokens at %v", r, b, k, got, at)
					}
				}
				r2 := rates[(i*7+len(ns))%len(rates)]
				b2 := bursts[i%len(bursts)]
				tab.Reconfigure(at, r2, b2)
				checkTable(t, tab)
				tab.Reconfigure(at, r, b)
			}
			checkTable(t, tab)
			if bud.Len() != tab.Len() {
				t.Fatalf("rate %v burst %d: Budget counts %d, Table holds %d", r, b, bud.Len(), tab.Len())
			}
		}
	}
}

// New keys arriving at the pace at which old ones are reclaimed, with the
// live count just under the point where an insert grows the array: the
// full sweep that an insert runs before growing must not recur at every
// insert (it examined the whole array per insert, thousands of slots under
// the shard's lock, at some arrival rates).
func TestTableSweepCostPerInsertBounded(t *testing.T) {
	for gap := 88 * time.Microsecond; gap <= 100*time.Microsecond; gap += 500 * time.Nanosecond {
		tab := NewTable(10, 1, WithShards(1)) // a key is full 100 ms after its take
		const n = 25_000                      // ≥ 20 times the live count (~1,100): the average is the steady state's
		buf := make([]byte, 0, 16)
		for i := range n {
			buf = strconv.AppendInt(append(buf[:0], 'u'), int64(i), 10)
			if !tab.TakeBytes(diffT0.Add(time.Duration(i)*gap), buf, 1).OK {
				t.Fatalf("gap %v: new key %d denied", gap, i)
			}
		}
		s := &tab.set.Load().shards[0]
		if per := float64(s.swept) / n; per > 16 {
			t.Errorf("gap %v: sweeps examined %.0f slots per insert (array of %d, %d live), want a bounded few", gap, per, len(s.slots), s.live)
		}
		checkTable(t, tab)
	}
}

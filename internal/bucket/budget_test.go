package bucket_test

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/bucket"
	"golang.org/x/time/rate"
)

// Two Tables share a Budget of 100 live buckets. When it is full a new key
// is denied (BudgetFull, RetryAfter = burst/rate, nothing created), keys
// with a bucket keep working, and no bucket that is not full is evicted.
func TestBudgetFullDeniesNewKeys(t *testing.T) {
	bud := bucket.NewBudget(100)
	a := bucket.NewTable(10, 5, bucket.WithBudget(bud)) // full 100 ms after a take of 1
	b := bucket.NewTable(2, 4, bucket.WithBudget(bud))  // full 2 s after a take of 4
	for i := range 100 {
		if !a.TakeN(t0, "a"+strconv.Itoa(i), 1).OK {
			t.Fatalf("key %d denied below the bound", i)
		}
	}
	if bud.Len() != 100 || bud.Max() != 100 {
		t.Fatalf("Budget Len, Max = %d, %d, want 100, 100", bud.Len(), bud.Max())
	}
	r := b.TakeN(t0, "new", 1)
	if r.OK || !r.BudgetFull || r.Permanent || r.Remaining != 0 {
		t.Fatalf("new key with the Budget full: %+v", r)
	}
	if r.RetryAfter != 2*time.Second {
		t.Fatalf("RetryAfter = %v, want burst/rate = 2s", r.RetryAfter)
	}
	if b.AllowN(t0, "new", 1) || b.Len() != 0 {
		t.Fatalf("AllowN on a new key with the Budget full: allowed, or created (Len %d)", b.Len())
	}
	// A key that has a bucket is never denied for lack of room.
	if !a.TakeN(t0, "a7", 1).OK {
		t.Fatal("an existing key was denied because the Budget is full")
	}
	// Nothing in a has refilled at t0+50ms: nothing may be evicted, b is
	// still denied, and every bucket of a keeps what it holds.
	if r := b.TakeN(at(50*time.Millisecond), "new", 1); r.OK || !r.BudgetFull {
		t.Fatalf("before any refill: %+v, want a BudgetFull denial", r)
	}
	if got := a.TokensAt(at(50*time.Millisecond), "a7"); got != 3.5 {
		t.Fatalf("a7: %v tokens, want 3.5 (5 - 2 + 0.5 refilled)", got)
	}
	if a.Len() != 100 {
		t.Fatalf("a.Len = %d, want 100: a bucket that was not full was evicted", a.Len())
	}
}

// Once buckets have refilled, a new key reclaims one, even from another
// Table that sees no traffic.
func TestBudgetReclaimsRefilledBuckets(t *testing.T) {
	bud := bucket.NewBudget(64)
	idle := bucket.NewTable(10, 5, bucket.WithBudget(bud))
	busy := bucket.NewTable(10, 5, bucket.WithBudget(bud))
	for i := range 64 {
		idle.TakeN(t0, "i"+strconv.Itoa(i), 1)
	}
	// One second later every bucket of idle is full (for longer than the
	// reclaim grace): busy's new keys take their room.
	later := at(time.Second)
	granted := 0
	for i := range 64 {
		if busy.TakeN(later, "b"+strconv.Itoa(i), 1).OK {
			granted++
		}
	}
	if granted < 60 {
		t.Fatalf("only %d of 64 new keys admitted with 64 refilled buckets to reclaim", granted)
	}
	if bud.Len() > 64 || idle.Len()+busy.Len() != bud.Len() {
		t.Fatalf("Budget Len %d, tables %d + %d", bud.Len(), idle.Len(), busy.Len())
	}
	// A reclaimed key of idle is full, as it would have been.
	if got := idle.TokensAt(later, "i3"); got != 5 {
		t.Fatalf("a reclaimed key: %v tokens, want 5", got)
	}
}

// Buckets in debt, or partly spent, are never evicted to make room.
func TestBudgetNeverEvictsDebt(t *testing.T) {
	bud := bucket.NewBudget(10)
	tab := bucket.NewTable(1, 5, bucket.WithBudget(bud))
	for i := range 10 {
		tab.ChargeN(t0, "d"+strconv.Itoa(i), 50) // 45 in debt: 50 s to refill
	}
	for i := range 1000 {
		if r := tab.TakeN(at(10*time.Second), "n"+strconv.Itoa(i), 1); r.OK || !r.BudgetFull {
			t.Fatalf("new key %d with every bucket in debt: %+v", i, r)
		}
	}
	for i := range 10 {
		if got := tab.TokensAt(at(10*time.Second), "d"+strconv.Itoa(i)); got != -35 {
			t.Fatalf("d%d: %v tokens, want -35: its debt was forgotten", i, got)
		}
	}
	// A charge always records its debt, beyond the bound if need be.
	tab.ChargeN(at(10*time.Second), "extra", 7)
	if got := tab.TokensAt(at(10*time.Second), "extra"); got != -2 {
		t.Fatalf("charge beyond the Budget: %v tokens, want -2", got)
	}
	if bud.Len() != 11 {
		t.Fatalf("Budget Len = %d, want 11 (over its bound by the charge)", bud.Len())
	}
	// After the debts are repaid, the room comes back.
	if !tab.TakeN(at(2*time.Minute), "late", 1).OK {
		t.Fatal("a new key after every debt was repaid was denied")
	}
}

func TestBudgetZeroIsPermanent(t *testing.T) {
	tab := bucket.NewTable(10, 5, bucket.WithBudget(bucket.NewBudget(0)))
	if r := tab.TakeN(t0, "k", 1); r.OK || !r.BudgetFull || !r.Permanent {
		t.Fatalf("Budget 0: %+v, want a permanent BudgetFull denial", r)
	}
	// A take that creates nothing is not refused for room.
	if r := tab.TakeN(t0, "k", 0); !r.OK || r.Remaining != 5 {
		t.Fatalf("n=0 with Budget 0: %+v", r)
	}
}

// Reconfiguring to rate.Inf drops every bucket: nothing is left to count.
func TestTableReconfigureInfDropsBuckets(t *testing.T) {
	bud := bucket.NewBudget(10)
	tab := bucket.NewTable(1, 5, bucket.WithBudget(bud))
	for i := range 10 {
		tab.TakeN(t0, strconv.Itoa(i), 1)
	}
	tab.Reconfigure(t0, 1e9, 5)
	if tab.Len() != 10 {
		t.Fatalf("Len = %d after a finite Reconfigure, want 10", tab.Len())
	}
	tab.Reconfigure(t0, rate.Inf, 5)
	if tab.Len() != 0 || bud.Len() != 0 {
		t.Fatalf("after Reconfigure to Inf: Len %d, Budget Len %d, want 0, 0", tab.Len(), bud.Len())
	}
	tab.Reconfigure(t0, 1, 5)
	if got := tab.TokensAt(t0, "3"); got != 5 {
		t.Fatalf("after Inf and back: %v tokens, want full 5", got)
	}
}

// Registering many Tables with one Budget stays cheap (collected Tables are
// pruned in amortised passes, not on every registration).
func TestBudgetManyTables(t *testing.T) {
	bud := bucket.NewBudget(1 << 20)
	keep := make([]*bucket.Table, 0, 1000)
	for i := range 50_000 {
		tab := bucket.NewTable(1, 5, bucket.WithBudget(bud))
		if i%50 == 0 {
			tab.TakeN(t0, "k", 1)
			keep = append(keep, tab)
		}
	}
	if bud.Len() != len(keep) {
		t.Fatalf("Budget Len = %d, want %d", bud.Len(), len(keep))
	}
	runtime.KeepAlive(keep)
}

// Goroutines on two Tables sharing a small Budget, with new keys arriving
// all the time and buckets refilling: the Budget is never exceeded, and no
// key's window admits more than burst + rate·Δt.
func TestBudgetConcurrent(t *testing.T) {
	const r, burst, max = 1000, 2, 50
	bud := bucket.NewBudget(max)
	tabs := []*bucket.Table{
		bucket.NewTable(r, burst, bucket.WithBudget(bud)),
		bucket.NewTable(r, burst, bucket.WithBudget(bud)),
	}
	type key struct{ tab, k int }
	var mu sync.Mutex
	grants := map[key][]grant{}
	denied := 0
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			local := map[key][]grant{}
			full := 0
			ns := int64(0)
			for range 3000 {
				ns += int64(rng.IntN(int(40 * time.Microsecond)))
				now := t0.Add(time.Duration(ns))
				k := key{rng.IntN(2), rng.IntN(400)}
				res := tabs[k.tab].TakeN(now, "k"+strconv.Itoa(k.k), 1)
				if res.OK {
					local[k] = append(local[k], grant{now, 1})
				} else if res.BudgetFull {
					full++
				}
				if l := bud.Len(); l > max {
					t.Errorf("Budget Len %d > %d", l, max)
					return
				}
			}
			mu.Lock()
			for k, g := range local {
				grants[k] = append(grants[k], g...)
			}
			denied += full
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, g := range grants {
		checkWindows(t, g, r, burst, 0)
	}
	if tabs[0].Len()+tabs[1].Len() != bud.Len() {
		t.Fatalf("tables hold %d + %d buckets, Budget counts %d", tabs[0].Len(), tabs[1].Len(), bud.Len())
	}
	t.Logf("%d keys granted, %d BudgetFull denials", len(grants), denied)
	if denied == 0 || len(grants) < 200 {
		t.Fatalf("%d denials for lack of room, %d keys granted: the test did not exercise the bound", denied, len(grants))
	}
}

// The zero Budget is NewBudget(0): a Table under it creates no bucket, and
// says why.
func TestZeroBudgetAdmitsNoNewBucket(t *testing.T) {
	var zero bucket.Budget
	tab := bucket.NewTable(10, 5, bucket.WithBudget(&zero))
	if r := tab.TakeN(t0, "k", 1); r.OK || !r.BudgetFull {
		t.Fatalf("TakeN under the zero Budget = %+v, want a BudgetFull denial", r)
	}
}

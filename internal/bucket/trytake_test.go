package bucket_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/internal/bucket"
)

// TestTryTakeAgreesWithTake runs the same random takes on two Buckets and
// two pairs of Tables, one side through TakeN/TakeBytes and the other
// through TryTakeN/TryTakeBytes (keys as bytes, then as strings): OK and
// Remaining must agree on every call, so the states stay equal too.
func TestTryTakeAgreesWithTake(t *testing.T) {
	for _, c := range []struct {
		r rate.Limit
		b int
	}{{10, 5}, {0, 3}, {rate.Inf, 0}, {1e6, 100}, {0.5, 1}} {
		t.Run(fmt.Sprint(c.r, "/", c.b), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(3, 4))
			full, try := bucket.New(c.r, c.b), bucket.New(c.r, c.b)
			tfull, ttry := bucket.NewTable(c.r, c.b, bucket.WithBudget(bucket.NewBudget(3))), bucket.NewTable(c.r, c.b, bucket.WithBudget(bucket.NewBudget(3)))
			sfull, stry := bucket.NewTable(c.r, c.b, bucket.WithBudget(bucket.NewBudget(3))), bucket.NewTable(c.r, c.b, bucket.WithBudget(bucket.NewBudget(3)))
			at := time.Unix(1_000_000, 0)
			for i := range 5000 {
				at = at.Add(time.Duration(rnd.IntN(300)) * time.Millisecond)
				n := rnd.IntN(c.b+3) - 1
				want := full.TakeN(at, n)
				ok, left := try.TryTakeN(at, n)
				if ok != want.OK || left != want.Remaining {
					t.Fatalf("call %d, n=%d: TryTakeN = %v, %d; TakeN = %+v", i, n, ok, left, want)
				}
				key := []byte(fmt.Sprint("k", rnd.IntN(5)))
				wantT := tfull.TakeBytes(at, key, n)
				ok, left = ttry.TryTakeBytes(at, key, n)
				if ok != wantT.OK || left != wantT.Remaining {
					t.Fatalf("call %d, key %s, n=%d: TryTakeBytes = %v, %d; TakeBytes = %+v", i, key, n, ok, left, wantT)
				}
				wantS := sfull.TakeN(at, string(key), n)
				ok, left = stry.TryTakeN(at, string(key), n)
				if ok != wantS.OK || left != wantS.Remaining {
					t.Fatalf("call %d, key %s, n=%d: Table.TryTakeN = %v, %d; TakeN = %+v", i, key, n, ok, left, wantS)
				}
			}
		})
	}
}

func TestTryTakeDoesNotAllocate(t *testing.T) {
	b := bucket.New(1e9, 1e9)
	tb := bucket.NewTable(1e9, 1e9)
	key := []byte("caller-1")
	at := time.Now()
	tb.TryTakeBytes(at, key, 1)
	if n := testing.AllocsPerRun(1000, func() {
		b.TryTakeN(at, 1)
		tb.TryTakeBytes(at, key, 1)
	}); n != 0 {
		t.Fatalf("%v allocations per TryTakeN + TryTakeBytes, want 0", n)
	}
}

// TestTryTakeNsReportsTheRefusal runs the same random takes on a Bucket
// and two Tables through TakeNs/TakeBytesNs on one side and
// TryTakeGrantNs/TryTakeGrantBytesNs on the other: a refused try's
// why.Result(remaining) must be the whole Result the take gives (RetryAfter,
// Permanent, OverBurst, BudgetFull included), so that an engine asks a
// refusing bucket once; an admitted try's Grant gives back like the take's.
func TestTryTakeNsReportsTheRefusal(t *testing.T) {
	for _, c := range []struct {
		r rate.Limit
		b int
	}{{10, 5}, {0, 3}, {rate.Inf, 0}, {1e6, 100}, {0.5, 1}, {3, 0}} {
		t.Run(fmt.Sprint(c.r, "/", c.b), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(5, 6))
			full, try := bucket.New(c.r, c.b), bucket.New(c.r, c.b)
			tfull, ttry := bucket.NewTable(c.r, c.b, bucket.WithBudget(bucket.NewBudget(3))), bucket.NewTable(c.r, c.b, bucket.WithBudget(bucket.NewBudget(3)))
			ns := bucket.NsOf(time.Unix(1_000_000, 0))
			refusals := 0
			for i := range 5000 {
				ns += int64(rnd.IntN(300)) * int64(time.Millisecond)
				n := rnd.IntN(c.b+3) - 1
				want := full.TakeNs(ns, n)
				var g bucket.Grant
				ok, left, why := try.TryTakeGrantNs(ns, n, &g)
				got := why.Result(left)
				got.OK = ok
				got.Grant, want.Grant = bucket.Grant{}, bucket.Grant{} // compared by giving back below
				if got != want {
					t.Fatalf("call %d, n=%d: TryTakeGrantNs reports %+v; TakeNs = %+v", i, n, got, want)
				}
				if !ok {
					refusals++
				}
				key := []byte(fmt.Sprint("k", rnd.IntN(5)))
				wantT := tfull.TakeBytesNs(ns, key, n)
				var tg bucket.Grant
				ok, left, why = ttry.TryTakeGrantBytesNs(ns, key, n, &tg)
				if i%2 == 1 {
					ok, left, why = ttry.TryTakeGrantNs(ns, string(key), n, &tg)
					wantT = tfull.TakeNs(ns, string(key), n) // the same take again on both sides
				}
				gotT := why.Result(left)
				gotT.OK = ok
				wg := wantT.Grant
				gotT.Grant, wantT.Grant = bucket.Grant{}, bucket.Grant{}
				if gotT != wantT {
					t.Fatalf("call %d, key %s, n=%d: Table's try reports %+v; take = %+v", i, key, n, gotT, wantT)
				}
				if ok && rnd.IntN(4) == 0 && tg.Outstanding() > 0 { // give back on both sides
					if err, werr := ttry.GiveBackBytes(key, &tg, 1), tfull.GiveBackBytes(key, &wg, 1); (err == nil) != (werr == nil) {
						t.Fatalf("call %d: give-back %v, the take's %v", i, err, werr)
					}
				}
			}
			if c.b > 0 && refusals == 0 {
				t.Fatal("no refusal was tried")
			}
		})
	}
}

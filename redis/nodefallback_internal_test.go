package redis

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/stack"
)

// A local part given back after its master's fallback was left and entered
// again (a probe succeeded, then a call failed, while the decision's other
// parts were in flight) gives its units back to the buckets it took them
// from, which were dropped, not to the new ones: those start empty, and a
// refund there would admit what nothing took. Only the local bookkeeping is
// involved (no call reaches Redis), so it is driven step by step here.
func TestNodeGiveBackAfterReentry(t *testing.T) {
	b, clock := unreachableBackend(t, WithSpread())
	ctx := context.Background()
	fail := errors.New("master failed")
	op := stack.Op{Key: "k", Rate: 100, Period: time.Second, Burst: 100, Cost: 1}
	enter := func() *nodeFB {
		b.fb.mu.Lock()
		defer b.fb.mu.Unlock()
		return b.enterNode("m", "", fail)
	}
	take := func(nf *nodeFB) *partResult {
		r := &partResult{ops: []stack.Op{op}, at: clock.Now()}
		b.takeLocalPart(ctx, nf, r)
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r
	}

	nf := enter()
	if r := take(nf); r.out.Denied != 0 {
		t.Fatalf("a new local bucket admitted: %+v", r.out)
	}
	clock.Advance(time.Second)
	r := take(nf) // admitted: the bucket got its share of a second
	if r.out.Denied >= 0 {
		t.Fatalf("local bucket after a second: %+v", r.out)
	}
	// The master's probe takes the debt and succeeds; then it fails again.
	b.fb.mu.Lock()
	nf.takeOwed()
	b.fb.mu.Unlock()
	b.rejoinNode(nf)
	if nf2 := enter(); nf2 != nf || !nf.down {
		t.Fatal("the master's fallback was not entered again")
	}
	if r := take(nf); r.out.Denied != 0 { // a decision meanwhile makes the new bucket
		t.Fatalf("a new local bucket admitted: %+v", r.out)
	}
	// Another part denied: the local part is given back.
	b.giveBackMixed(ctx, []partResult{*r}, clock.Now())
	// The new local bucket is empty: the clock stands still.
	if r := take(nf); r.out.Denied != 0 {
		t.Errorf("the new local bucket admitted a unit given back to it: %+v", r.out)
	}
}

// A probe reads its master's probe key under the lock that guards it: a
// decision may set it meanwhile (the master's fallback was entered by a
// failed batch, which knows no key of its own). The race detector checks.
func TestNodeProbeKeyRead(t *testing.T) {
	b, _ := unreachableBackend(t, WithSpread())
	fail := errors.New("master failed")
	b.fb.mu.Lock()
	nf := b.enterNode("m", "", fail)
	b.fb.mu.Unlock()
	done := make(chan error)
	go func() { done <- b.payParts(context.Background(), nf, nil) }() // an idle master's probe
	b.fb.mu.Lock()
	b.downNode("m", "sluice:{x}:k", fail) // a decision's part on the master
	b.fb.mu.Unlock()
	<-done
}

// A master that keeps failing again within its rejoin period keeps its
// fallback, whose local buckets start empty at each entry: the buckets of
// earlier entries that owe nothing are gone, and do not count against
// maxLocalKeys (or a long-flapping master would fail every decision on a
// new bucket, which the Stack then fails open).
func TestNodeFlappingBucketsBounded(t *testing.T) {
	b, clock := unreachableBackend(t, WithSpread())
	ctx := context.Background()
	fail := errors.New("master failed")
	enter := func() *nodeFB {
		b.fb.mu.Lock()
		defer b.fb.mu.Unlock()
		return b.enterNode("m", "", fail)
	}
	nf := enter()
	const perEntry = 4096
	for i := 0; i < maxLocalKeys+perEntry; i++ {
		if i > 0 && i%perEntry == 0 {
			b.rejoinNode(nf) // a probe succeeded (nothing owed: every decision was denied)
			enter()          // and the master failed again
		}
		r := &partResult{ops: []stack.Op{{Key: fmt.Sprint("k", i), Rate: 100, Period: time.Second, Burst: 100, Cost: 1}},
			at: clock.Now()}
		b.takeLocalPart(ctx, nf, r)
		if r.err != nil {
			t.Fatalf("bucket %d, entry %d: %v", i, i/perEntry+1, r.err)
		}
		if r.out.Denied != 0 {
			t.Fatalf("bucket %d: a new local bucket admitted: %+v", i, r.out)
		}
	}
	if n := len(nf.owed); n > perEntry {
		t.Errorf("the fallback keeps %d local buckets, want at most the %d of its latest entry", n, perEntry)
	}
}

// A local part given back while a probe's payment of its master's debts is
// in flight (the probe took the debt, takeOwed, after the part took and
// before the decision's other part denied) is no longer owed: when the
// payment fails and the debt is owed again, Redis is charged with the units
// admitted locally, not with the one given back as well. So too when a
// second probe, an interval later, takes the debts while the first is still
// in flight (a probe may take the backend's timeout, longer than the
// interval). TestClusterNodeFallback charged one unit too many when this
// happened under load.
func TestNodeGiveBackDuringProbe(t *testing.T) {
	for _, overlap := range []bool{false, true} {
		t.Run(fmt.Sprint("overlap=", overlap), func(t *testing.T) {
			b, clock := unreachableBackend(t, WithSpread())
			ctx := context.Background()
			op := stack.Op{Key: "k", Rate: 100, Period: time.Second, Burst: 100, Cost: 1}
			b.fb.mu.Lock()
			nf := b.enterNode("m", "", errors.New("master failed"))
			b.fb.mu.Unlock()
			take := func() *partResult {
				r := &partResult{ops: []stack.Op{op}, at: clock.Now()}
				b.takeLocalPart(ctx, nf, r)
				if r.err != nil || r.out.Denied >= 0 {
					t.Fatalf("a local take after a second: %+v, %v", r.out, r.err)
				}
				return r
			}
			owedCost := func(ops []stack.Op) (n int64) {
				for _, o := range ops {
					n += o.Cost
				}
				return n
			}
			b.fb.mu.Lock()
			err := b.ensureIn(&nf.localBuckets, ctx, clock.Now(), []stack.Op{op}) // empty at this instant
			b.fb.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Second)
			take()
			r := take()
			// A probe takes the debts and pays them, through the cluster.
			b.fb.mu.Lock()
			paying := nf.takeOwed()
			b.fb.mu.Unlock()
			if n := owedCost(paying); n != 2 {
				t.Fatalf("the probe pays %d, want the 2 taken", n)
			}
			// The decision's other part denied: r is given back.
			b.giveBackMixed(ctx, []partResult{*r}, clock.Now())
			var second []stack.Op
			if overlap {
				b.fb.mu.Lock()
				second = nf.takeOwed()
				b.fb.mu.Unlock()
			}
			take() // the unit given back, taken again
			// The master cannot be reached: the payments fail, and what they
			// carried is owed again (as payParts does).
			b.fb.mu.Lock()
			nf.reowe(paying)
			nf.reowe(second)
			owed := owedCost(nf.takeOwed())
			b.fb.mu.Unlock()
			if owed != 2 {
				t.Errorf("owes %d after 2 local admissions (3 takes, one given back), want 2", owed)
			}
		})
	}
}

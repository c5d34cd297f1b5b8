package bucket_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/bucket"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// TestMethodsWithoutAtReadTheClock: every method whose name does not end
// in At decides at the clock's instant, and its At form at the instant
// given (the naming rule), for a Bucket and a Table.
func TestMethodsWithoutAtReadTheClock(t *testing.T) {
	clk := limitertest.NewClock(t0)
	b := bucket.New(1, 3, bucket.WithClock(clk))
	if !b.AllowN(3) || b.Allow() {
		t.Fatal("AllowN(3) then Allow on a bucket of 3: want true, false")
	}
	// At the clock's instant the bucket is empty; an hour earlier too
	// (time never moves backwards), an hour later it is full.
	if r := b.TakeN(1); r.OK || r.RetryAfter != time.Second {
		t.Fatalf("TakeN(1) at the clock: %+v, want a 1s RetryAfter", r)
	}
	if b.Tokens() != 0 || b.TokensAt(t0.Add(time.Hour)) != 3 {
		t.Fatalf("Tokens %v, TokensAt(+1h) %v; want 0 and 3", b.Tokens(), b.TokensAt(t0.Add(time.Hour)))
	}
	if !b.AllowAt(t0.Add(time.Hour), 3) {
		t.Fatal("AllowAt(+1h, 3) refused")
	}
	clk.Advance(time.Hour + 2*time.Second)
	if r := b.TakeN(2); !r.OK || r.Remaining != 0 {
		t.Fatalf("TakeN(2) two seconds after: %+v, want OK with 0 left", r)
	}
	b.SetLimit(2) // at the clock's now
	b.SetBurst(4)
	if b.Limit() != 2 || b.Burst() != 4 || b.Tokens() != 0 {
		t.Fatalf("after the setters: limit %v burst %d tokens %v", b.Limit(), b.Burst(), b.Tokens())
	}

	tab := bucket.NewTable(1, 2, bucket.WithClock(clk), nil)
	if !tab.AllowN("k", 2) || tab.Allow("k") {
		t.Fatal("Table AllowN(2) then Allow: want true, false")
	}
	if r := tab.TakeN("k", 1); r.OK || r.RetryAfter != time.Second {
		t.Fatalf("Table TakeN at the clock: %+v, want a 1s RetryAfter", r)
	}
	if !tab.AllowAt(clk.Now().Add(time.Second), "k", 1) {
		t.Fatal("Table AllowAt(+1s) refused")
	}
	if r := tab.TakeAt(clk.Now().Add(3*time.Second), "k", 2); !r.OK {
		t.Fatalf("Table TakeAt(+3s, 2): %+v", r)
	}
	if got := tab.TokensAt(clk.Now().Add(4*time.Second), "k"); got != 1 {
		t.Fatalf("Table TokensAt(+4s) = %v, want 1", got)
	}
	if tab.Len() != 1 || tab.Limit() != 1 || tab.Burst() != 2 {
		t.Fatalf("Len %d Limit %v Burst %d", tab.Len(), tab.Limit(), tab.Burst())
	}
}

// TestWaitSleepsOnTheClock: WaitN sleeps on the Bucket's clock (a manual
// clock's Sleep advances it), and a cancelled wait gives its tokens back.
func TestWaitSleepsOnTheClock(t *testing.T) {
	clk := limitertest.NewClock(t0)
	b := bucket.New(10, 1, bucket.WithClock(clk))
	b.Allow()
	if err := b.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := clk.Now().Sub(t0); w != 100*time.Millisecond {
		t.Fatalf("waited %v on the clock, want 100ms", w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.WaitN(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitN on a cancelled ctx: %v", err)
	}
	if tok := b.Tokens(); tok != 0 {
		t.Fatalf("tokens after the cancelled WaitN: %v, want 0", tok)
	}
}

// TestDefaultClock: a nil clock and a nil Option mean the default, which
// decides on the real time (a bucket of 1 refilled once an hour admits one
// token now and no more).
func TestDefaultClock(t *testing.T) {
	for _, opts := range [][]bucket.Option{nil, {nil}, {bucket.WithClock(nil)}} {
		b := bucket.New(1.0/3600, 1, opts...)
		if !b.Allow() || b.AllowN(1) {
			t.Fatalf("opts %v: want one token then a denial", opts)
		}
		tab := bucket.NewTable(1.0/3600, 1, opts...)
		if !tab.Allow("k") || tab.Allow("k") {
			t.Fatalf("Table, opts %v: want one token then a denial", opts)
		}
	}
}

// TestGiveBackThroughGrant: a take's Grant gives its tokens back exactly,
// counts them off, and refuses what it does not hold or another bucket's.
func TestGiveBackThroughGrant(t *testing.T) {
	b := bucket.New(1, 10)
	r := b.TakeAt(t0, 6)
	if err := b.GiveBack(&r.Grant, 4); err != nil {
		t.Fatal(err)
	}
	if tok, out := b.TokensAt(t0), r.Grant.Outstanding(); tok != 8 || out != 2 {
		t.Fatalf("after giving back 4 of 6: tokens %v outstanding %d, want 8 and 2", tok, out)
	}
	if err := b.GiveBack(&r.Grant, 3); !errors.Is(err, bucket.ErrGiveBack) {
		t.Fatalf("giving back 3 of 2 outstanding: %v, want ErrGiveBack", err)
	}
	if err := bucket.New(1, 10).GiveBack(&r.Grant, 1); !errors.Is(err, bucket.ErrGiveBack) {
		t.Fatalf("another bucket's grant: %v, want ErrGiveBack", err)
	}
	var zero bucket.Grant
	if err := b.GiveBack(&zero, 1); !errors.Is(err, bucket.ErrGiveBack) {
		t.Fatalf("the zero grant: %v, want ErrGiveBack", err)
	}

	tab := bucket.NewTable(1, 10)
	tr := tab.TakeAt(t0, "k", 5)
	if err := tab.GiveBack("k", &tr.Grant, 5); err != nil {
		t.Fatal(err)
	}
	if tok := tab.TokensAt(t0, "k"); tok != 10 {
		t.Fatalf("Table after giving all back: %v tokens, want 10", tok)
	}
	if err := tab.GiveBack("k", &tr.Grant, 0); err != nil {
		t.Fatalf("n = 0 does nothing: %v", err)
	}
}

// TestBudgetPublic: the zero Budget holds no bucket (Permanent), NewBudget
// bounds several Tables together, and a denial says when to retry.
func TestBudgetPublic(t *testing.T) {
	var zero bucket.Budget
	r := bucket.NewTable(1, 5, bucket.WithBudget(&zero)).TakeAt(t0, "k", 1)
	if r.OK || !r.BudgetFull || !r.Permanent {
		t.Fatalf("zero Budget: %+v, want BudgetFull and Permanent", r)
	}
	bud := bucket.NewBudget(1)
	a, b := bucket.NewTable(1, 5, bucket.WithBudget(bud)), bucket.NewTable(1, 5, bucket.WithBudget(bud), bucket.WithBudget(nil))
	if !a.AllowAt(t0, "x", 1) {
		t.Fatal("first key refused")
	}
	r = b.TakeAt(t0, "y", 1)
	if r.OK || !r.BudgetFull || r.Permanent || r.RetryAfter != 5*time.Second {
		t.Fatalf("second key over a Budget of 1: %+v, want BudgetFull with RetryAfter 5s", r)
	}
	if bud.Len() != 1 {
		t.Fatalf("Budget.Len = %d, want 1", bud.Len())
	}
	if !b.AllowAt(t0.Add(r.RetryAfter+time.Second), "y", 1) {
		t.Fatal("refused after RetryAfter, when x's bucket had refilled")
	}
}

// TestBudgetReleasedWhenTableDropped: a public Table that is dropped gives
// its live buckets back to the Budget (the internal Table's cleanup, on
// the public Table's allocation).
func TestBudgetReleasedWhenTableDropped(t *testing.T) {
	bud := bucket.NewBudget(1000)
	func() {
		tab := bucket.NewTable(1, 5, bucket.WithBudget(bud))
		for i := range 300 {
			tab.TakeAt(t0, string(rune('a'+i%26))+string(rune('A'+i/26)), 1)
		}
		if bud.Len() != 300 {
			t.Fatalf("Budget Len = %d, want 300", bud.Len())
		}
	}()
	deadline := time.Now().Add(time.Minute) // a deadline for a hang, not a wait for time
	for bud.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Budget Len = %d a minute after its only Table was dropped, want 0", bud.Len())
		}
		runtime.GC()
		runtime.Gosched()
	}
}

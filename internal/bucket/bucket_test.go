package bucket_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucket"
	"golang.org/x/time/rate"
)

var t0 = time.Date(2036, time.March, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

const (
	d = 100 * time.Millisecond
)

type allowCase struct {
	t  time.Time
	n  int
	ok bool
}

func runAllow(t *testing.T, b *bucket.Bucket, cases []allowCase) {
	t.Helper()
	for i, c := range cases {
		if got := b.AllowN(c.t, c.n); got != c.ok {
			t.Fatalf("step %d: AllowN(t0+%v, %d) = %v, want %v", i, c.t.Sub(t0), c.n, got, c.ok)
		}
	}
}

// The x/time/rate table tests, over synthetic instants.
func TestAllowSequences(t *testing.T) {
	tests := []struct {
		name  string
		r     rate.Limit
		b     int
		cases []allowCase
	}{
		{"simple", 10, 2, []allowCase{{at(0), 1, true}, {at(0), 1, true}, {at(0), 1, false}, {at(d), 1, true}, {at(d), 1, false}}},
		{"burst 3 over time", 10, 3, []allowCase{
			{at(0), 2, true}, {at(0), 2, false}, {at(0), 1, true}, {at(0), 1, false},
			{at(d), 1, true}, {at(2 * d), 1, true}, {at(2 * d), 1, false},
			{at(5 * d), 3, true}, {at(5 * d), 1, false},
		}},
		{"refill caps at burst", 10, 2, []allowCase{{at(10 * time.Second), 2, true}, {at(10 * time.Second), 1, false}}},
		{"n over burst", 10, 3, []allowCase{{at(0), 4, false}, {at(0), 3, true}}},
		{"n zero and negative check for a whole token", 10, 1, []allowCase{{at(0), 0, true}, {at(0), -5, true}, {at(0), 1, true}, {at(0), 0, false}, {at(0), -1, false}, {at(0), 1, false}, {at(100 * time.Millisecond), 0, true}}},
		{"rate 0 admits burst then nothing", 0, 3, []allowCase{{at(0), 3, true}, {at(0), 1, false}, {at(1000 * time.Hour), 1, false}}},
		{"negative rate like zero", -5, 1, []allowCase{{at(0), 1, true}, {at(time.Hour), 1, false}}},
		{"NaN rate like zero", rate.Limit(math.NaN()), 1, []allowCase{{at(0), 1, true}, {at(time.Hour), 1, false}}},
		{"burst 0 admits nothing", 10, 0, []allowCase{{at(0), 1, false}, {at(time.Hour), 1, false}}},
		{"negative burst admits nothing", 10, -3, []allowCase{{at(0), 1, false}}},
		{"Inf admits all", rate.Inf, 0, []allowCase{{at(0), 1, true}, {at(0), 1000000, true}, {at(-time.Hour), 1, true}}},
		{"year 1 and year 9999 saturate without panic", 1, 1, []allowCase{{time.Time{}, 1, true}, {time.Time{}.Add(time.Hour), 1, false}, {time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), 1, true}, {time.Date(9999, 6, 1, 0, 0, 0, 0, time.UTC), 1, false}}},
		{"full when first used long before creation", 1, 2, []allowCase{{t0.AddDate(-40, 0, 0), 2, true}, {t0.AddDate(-40, 0, 0), 1, false}}},
		{"full when first used long after creation", 1, 2, []allowCase{{t0.AddDate(60, 0, 0), 2, true}, {t0.AddDate(60, 0, 0), 1, false}}},
		{"stale caller gets nothing spent", 10, 5, []allowCase{{at(time.Second), 5, true}, {at(500 * time.Millisecond), 1, false}, {at(time.Second), 1, false}, {at(time.Second + d), 1, true}}},
		{"rate above MaxRate", 1e12, 1, []allowCase{{at(0), 1, true}, {at(0), 1, false}, {at(2), 1, true}}},
		{"huge burst", 1, math.MaxInt, []allowCase{{at(0), 1 << 30, true}, {at(0), math.MaxInt, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runAllow(t, bucket.New(tt.r, tt.b), tt.cases)
		})
	}
}

// golang/go#56287: one caller is 500 ms stale. x/time/rate moves its clock
// back and hands out tokens already spent; a Bucket does not.
func TestStaleCallerIssue56287(t *testing.T) {
	const (
		r     = 10
		burst = 10
	)
	count := func(allow func(time.Time) bool) int {
		n := 0
		for ms := 0; ms < 10000; ms++ {
			now := at(time.Duration(ms) * time.Millisecond)
			for i := 0; i < 10; i++ {
				if allow(now) {
					n++
				}
				if allow(now.Add(-500 * time.Millisecond)) {
					n++
				}
			}
		}
		return n
	}
	xl := rate.NewLimiter(r, burst)
	xr := count(func(t time.Time) bool { return xl.AllowN(t, 1) })
	b := bucket.New(r, burst)
	br := count(func(t time.Time) bool { return b.AllowN(t, 1) })
	const bound = burst + r*10
	if xr <= 10*bound {
		t.Errorf("x/time/rate granted %d in 10s; expected the bug (≫ %d) to show", xr, bound)
	}
	if br > bound {
		t.Errorf("Bucket granted %d in 10s, more than burst + rate·10s = %d", br, bound)
	}
	if br < bound-1 {
		t.Errorf("Bucket granted %d in 10s, want about %d", br, bound)
	}
	t.Logf("x/time/rate: %d grants, Bucket: %d (bound %d)", xr, br, bound)
}

func TestRetryAfterExactAndNeverEarly(t *testing.T) {
	for _, r := range []rate.Limit{0.001, 0.3, 1, 3, 7, 20, 1000, 7e6 / 60, 1e7 / 60, 123456.789} {
		for _, burst := range []int{1, 5} {
			b := bucket.New(r, burst)
			now := at(0)
			for i := 0; i < 50; i++ {
				n := 1 + i%burst
				res := b.TakeN(now, n)
				if res.OK {
					continue
				}
				if res.RetryAfter <= 0 || res.Permanent || res.OverBurst {
					t.Fatalf("r=%v: denial without a positive RetryAfter: %+v", r, res)
				}
				if got := b.TokensAt(now.Add(res.RetryAfter - 1)); got >= float64(n) {
					t.Fatalf("r=%v: RetryAfter %v is not the shortest wait: %v tokens 1ns earlier", r, res.RetryAfter, got)
				}
				now = now.Add(res.RetryAfter)
				if !b.TakeN(now, n).OK {
					t.Fatalf("r=%v n=%d: TakeN after RetryAfter %v denied (early)", r, n, res.RetryAfter)
				}
			}
		}
	}
}

func TestRemaining(t *testing.T) {
	b := bucket.New(1, 5)
	if r := b.TakeN(at(0), 2); !r.OK || r.Remaining != 3 {
		t.Fatalf("TakeN 2 of 5: %+v, want OK with 3 remaining", r)
	}
	if r := b.TakeN(at(0), 4); r.OK || r.Remaining != 3 || r.RetryAfter != time.Second {
		t.Fatalf("TakeN 4 of 3: %+v, want denied, 3 remaining, retry after 1s", r)
	}
	b.ChargeN(at(0), 7)
	if r := b.TakeN(at(0), 1); r.OK || r.Remaining != -4 || r.RetryAfter != 5*time.Second {
		t.Fatalf("in debt of 4: %+v, want Remaining -4, RetryAfter 5s", r)
	}
	if r := b.TakeN(at(0), 6); !r.OverBurst || !r.Permanent || r.RetryAfter != 0 || r.OK {
		t.Fatalf("over burst: %+v", r)
	}
	z := bucket.New(0, 1)
	z.AllowN(at(0), 1)
	if r := z.TakeN(at(time.Hour), 1); r.OK || !r.Permanent || r.OverBurst || r.RetryAfter != 0 {
		t.Fatalf("rate 0 exhausted: %+v, want Permanent", r)
	}
}

func TestChargeSaturates(t *testing.T) {
	for _, r := range []rate.Limit{0.001, 1, 7, 1e7 / 60} {
		b := bucket.New(r, 10)
		now := at(123 * time.Millisecond)
		b.ChargeN(now, math.MaxInt) // saturates, no overflow
		b.ChargeN(now, math.MaxInt)
		if got := b.TokensAt(now); got >= 0 {
			t.Fatalf("r=%v: tokens %v after a huge charge, want debt", r, got)
		}
	}
}

func TestChargeIntoDebtThenWait(t *testing.T) {
	clk := newFakeClock()
	b := bucket.New(10, 10, fakeClockOpts(clk)...)
	start := clk.Now()
	b.ChargeN(start, 30) // 20 in debt
	if got := b.TokensAt(start); got != -20 {
		t.Fatalf("tokens after charge: %v, want -20", got)
	}
	if err := b.WaitN(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	if waited := clk.Now().Sub(start); waited != 2500*time.Millisecond {
		t.Fatalf("waited %v, want 2.5s (20 debt + 5 at 10/s)", waited)
	}
	if got := b.TokensAt(clk.Now()); got != 0 {
		t.Fatalf("tokens after wait: %v, want 0", got)
	}
}

func TestWaitN(t *testing.T) {
	t.Run("over burst", func(t *testing.T) {
		b := bucket.New(10, 3, fakeClockOpts(newFakeClock())...)
		err := b.WaitN(context.Background(), 4)
		if !errors.Is(err, bucket.ErrCostExceedsBurst) {
			t.Fatalf("WaitN(4) on burst 3: %v, want ErrCostExceedsBurst", err)
		}
	})
	t.Run("deadline too close returns at once consuming nothing", func(t *testing.T) {
		clk := newFakeClock()
		b := bucket.New(10, 1, fakeClockOpts(clk)...)
		b.AllowN(clk.Now(), 1)
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(99*time.Millisecond))
		defer cancel()
		before := b.TokensAt(clk.Now())
		err := b.Wait(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, bucket.ErrWouldExceedDeadline) {
			t.Fatalf("Wait: %v, want a deadline error", err)
		}
		if clk.Now() != t0 {
			t.Fatalf("clock moved by %v: Wait slept", clk.Now().Sub(t0))
		}
		if after := b.TokensAt(clk.Now()); after != before {
			t.Fatalf("tokens %v after failed Wait, want %v", after, before)
		}
	})
	t.Run("deadline exactly enough waits", func(t *testing.T) {
		clk := newFakeClock()
		b := bucket.New(10, 1, fakeClockOpts(clk)...)
		b.AllowN(clk.Now(), 1)
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(100*time.Millisecond))
		defer cancel()
		if err := b.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if w := clk.Now().Sub(t0); w != 100*time.Millisecond {
			t.Fatalf("waited %v, want 100ms", w)
		}
	})
	t.Run("cancelled while waiting gives tokens back", func(t *testing.T) {
		clk := newFakeClock()
		ctx, cancel := context.WithCancel(context.Background())
		// A sleep that the context's end interrupts.
		b := bucket.New(10, 1, bucket.WithClock(sleepClock{clk, func(ctx context.Context, d time.Duration) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}}))
		b.AllowN(clk.Now(), 1)
		before := b.TokensAt(clk.Now())
		if err := b.Wait(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait: %v, want context.Canceled", err)
		}
		if after := b.TokensAt(clk.Now()); after != before {
			t.Fatalf("tokens %v after a cancelled Wait, want %v", after, before)
		}
	})
	t.Run("deadline already passed on the clock", func(t *testing.T) {
		clk := newFakeClock()
		b := bucket.New(10, 1, fakeClockOpts(clk)...)
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Second))
		defer cancel()
		clk.Advance(2 * time.Second)
		b.AllowN(clk.Now(), 1)
		if err := b.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait: %v, want DeadlineExceeded", err)
		}
		if got := b.TokensAt(clk.Now()); got != 0 {
			t.Fatalf("tokens %v after a failed Wait, want 0", got)
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		b := bucket.New(10, 1, fakeClockOpts(newFakeClock())...)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := b.Wait(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait: %v, want context.Canceled", err)
		}
	})
	t.Run("rate 0 with a deadline", func(t *testing.T) {
		clk := newFakeClock()
		b := bucket.New(0, 1, fakeClockOpts(clk)...)
		b.AllowN(clk.Now(), 1)
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Hour))
		defer cancel()
		if err := b.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait: %v, want DeadlineExceeded", err)
		}
	})
	t.Run("Inf ignores burst", func(t *testing.T) {
		b := bucket.New(rate.Inf, 0, fakeClockOpts(newFakeClock())...)
		if err := b.WaitN(context.Background(), 100); err != nil {
			t.Fatal(err)
		}
	})
}

// fakeClockOpts makes a Bucket read c's time and sleep on it.
func fakeClockOpts(c sluice.Clock) []bucket.Option {
	return []bucket.Option{bucket.WithClock(c)}
}

func TestSetLimitAndBurstKeepTokens(t *testing.T) {
	b := bucket.New(10, 10)
	b.AllowN(at(0), 6) // 4 left
	b.SetLimitAt(at(0), 1)
	if got := b.TokensAt(at(0)); got != 4 {
		t.Fatalf("after SetLimitAt: %v tokens, want 4", got)
	}
	if got := b.TokensAt(at(2 * time.Second)); got != 6 {
		t.Fatalf("2s later at 1/s: %v tokens, want 6", got)
	}
	if b.Limit() != 1 || b.Burst() != 10 {
		t.Fatalf("Limit, Burst = %v, %v", b.Limit(), b.Burst())
	}
	b.SetBurstAt(at(2*time.Second), 3)
	if got := b.TokensAt(at(2 * time.Second)); got != 3 {
		t.Fatalf("after SetBurstAt(3): %v tokens, want 3 (capped)", got)
	}
	b.AllowN(at(2*time.Second), 1) // 2 left, no longer full
	b.SetBurstAt(at(2*time.Second), 100)
	if got := b.TokensAt(at(2 * time.Second)); got != 2 {
		t.Fatalf("after SetBurstAt(100): %v tokens, want 2 kept", got)
	}
	// A bucket that is full when its burst grows is full under the new
	// burst: a full bucket carries no state (a Table reclaims it).
	full := bucket.New(1, 3)
	full.AllowN(at(0), 3)
	full.SetBurstAt(at(10*time.Second), 8)
	if got := full.TokensAt(at(10 * time.Second)); got != 8 {
		t.Fatalf("a full bucket after SetBurstAt(8): %v tokens, want 8", got)
	}
	b.ChargeN(at(2*time.Second), 12) // -10
	b.Reconfigure(at(2*time.Second), 2, 20)
	if got := b.TokensAt(at(2 * time.Second)); got != -10 {
		t.Fatalf("debt across Reconfigure: %v, want -10", got)
	}
	if got := b.TokensAt(at(7 * time.Second)); got != 0 {
		t.Fatalf("5s later at 2/s: %v, want 0", got)
	}
	// Through Inf and back: full.
	b.SetLimitAt(at(7*time.Second), rate.Inf)
	if !b.AllowN(at(7*time.Second), 1000) {
		t.Fatal("Inf denied")
	}
	b.SetLimitAt(at(7*time.Second), 1)
	if got := b.TokensAt(at(7 * time.Second)); got != 20 {
		t.Fatalf("after Inf: %v, want full 20", got)
	}
	// A fresh bucket stays full at any instant across a setter.
	f := bucket.New(1, 2)
	f.SetLimitAt(at(0), 5)
	if !f.AllowN(at(-time.Hour), 2) {
		t.Fatal("fresh bucket not full at an earlier instant after SetLimitAt")
	}
}

func TestClockConveniences(t *testing.T) {
	clk := newFakeClock()
	b := bucket.New(1, 1, bucket.WithClock(clk), nil, bucket.WithClock(nil))
	if !b.Allow() || b.Allow() {
		t.Fatal("Allow: want one grant then a denial")
	}
	if b.Tokens() != 0 {
		t.Fatalf("Tokens = %v", b.Tokens())
	}
	clk.Advance(time.Second)
	b.SetLimit(2)
	b.SetBurst(4)
	// Full (1 of 1) when the burst grows: full under the new burst.
	if b.Tokens() != 4 || b.Limit() != 2 || b.Burst() != 4 {
		t.Fatalf("after setters: tokens %v limit %v burst %v", b.Tokens(), b.Limit(), b.Burst())
	}
}

// The real clock: Wait on an available token returns at once.
func TestRealClock(t *testing.T) {
	b := bucket.New(1, 1)
	if err := b.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	ctx2, cancel2 := context.WithCancel(ctx)
	cancel2()
	if err := b.Wait(ctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a cancelled context: %v", err)
	}
	if !(b.Tokens() < 1) {
		t.Fatalf("Tokens = %v after taking the only token", b.Tokens())
	}
}

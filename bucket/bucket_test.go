package bucket_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/bucket"
	slerrors "github.com/sluicehq/sluice/errors"
	"golang.org/x/time/rate"
)

var t0 = time.Date(2036, time.March, 1, 12, 0, 0, 0, time.UTC)

// mustPanic runs f and checks that it panics with a message containing
// every one of want.
func mustPanic(t *testing.T, name string, f func(), want ...string) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("%s: no panic", name)
		}
		msg, _ := r.(string)
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Fatalf("%s: panic %q, want it to name %q", name, msg, w)
			}
		}
	}()
	f()
}

// TestConstructorArgumentsWithoutMeaning: a negative or NaN rate and a
// negative burst panic at construction (and in the setters), naming the
// argument, for New and NewTable alike.
func TestConstructorArgumentsWithoutMeaning(t *testing.T) {
	cases := []struct {
		name string
		r    rate.Limit
		b    int
		want []string
	}{
		{"rate -1", -1, 1, []string{"negative rate", "-1"}},
		{"rate -Inf", rate.Limit(math.Inf(-1)), 1, []string{"negative rate"}},
		{"rate NaN", rate.Limit(math.NaN()), 1, []string{"rate is NaN"}},
		{"burst -1", 1, -1, []string{"negative burst -1"}},
	}
	for _, c := range cases {
		mustPanic(t, "New "+c.name, func() { bucket.New(c.r, c.b) }, append([]string{"bucket.New"}, c.want...)...)
		mustPanic(t, "NewTable "+c.name, func() { bucket.NewTable(c.r, c.b) }, append([]string{"bucket.NewTable"}, c.want...)...)
	}
	b := bucket.New(1, 1)
	mustPanic(t, "SetLimit(NaN)", func() { b.SetLimit(rate.Limit(math.NaN())) }, "SetLimit", "NaN")
	mustPanic(t, "SetLimitAt(-2)", func() { b.SetLimitAt(t0, -2) }, "SetLimitAt", "negative rate")
	mustPanic(t, "SetBurst(-1)", func() { b.SetBurst(-1) }, "SetBurst", "negative burst")
	mustPanic(t, "SetBurstAt(-1)", func() { b.SetBurstAt(t0, -1) }, "SetBurstAt", "negative burst")
	// Nothing changed on the Bucket by a setter that panicked.
	if b.Limit() != 1 || b.Burst() != 1 {
		t.Fatalf("after refused setters: limit %v burst %d, want 1 and 1", b.Limit(), b.Burst())
	}
}

// TestConstructorArgumentMeanings checks the documented meaning of each
// edge value, and that every denial says when to retry or Permanent.
func TestConstructorArgumentMeanings(t *testing.T) {
	t.Run("rate 0 admits the burst, then Permanent", func(t *testing.T) {
		b := bucket.New(0, 2)
		if !b.AllowAt(t0, 2) {
			t.Fatal("the burst was refused")
		}
		r := b.TakeAt(t0.Add(24*time.Hour), 1)
		if r.OK || !r.Permanent || r.RetryAfter != 0 || r.OverBurst {
			t.Fatalf("a day later: %+v, want a Permanent denial without RetryAfter", r)
		}
		// WaitN refuses at once: no wait helps (ErrThrottled without a
		// deadline, DeadlineExceeded with one, as x/time/rate).
		if err := b.WaitN(context.Background(), 1); !errors.Is(err, slerrors.ErrThrottled) {
			t.Fatalf("WaitN on an empty rate-0 bucket without deadline: %v, want ErrThrottled at once", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		if err := b.WaitN(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitN on an empty rate-0 bucket: %v, want DeadlineExceeded at once", err)
		}
	})
	t.Run("rate Inf allows everything whatever the burst", func(t *testing.T) {
		b := bucket.New(rate.Inf, 0)
		if r := b.TakeAt(t0, 1_000_000); !r.OK {
			t.Fatalf("TakeAt(1e6) on rate.Inf: %+v", r)
		}
		tab := bucket.NewTable(rate.Inf, 0)
		if !tab.AllowAt(t0, "k", 1_000_000) {
			t.Fatal("Table AllowAt(1e6) on rate.Inf refused")
		}
	})
	t.Run("burst 0 admits nothing, OverBurst", func(t *testing.T) {
		b := bucket.New(10, 0)
		r := b.TakeAt(t0, 1)
		if r.OK || !r.OverBurst || !r.Permanent || r.RetryAfter != 0 {
			t.Fatalf("burst 0: %+v, want OverBurst and Permanent", r)
		}
		if b.AllowAt(t0.Add(time.Hour), 1) {
			t.Fatal("burst 0 allowed a token an hour later")
		}
		r = bucket.NewTable(10, 0).TakeAt(t0, "k", 1)
		if r.OK || !r.OverBurst || !r.Permanent {
			t.Fatalf("Table burst 0: %+v, want OverBurst and Permanent", r)
		}
	})
	t.Run("cost above the burst is OverBurst and an error from WaitN", func(t *testing.T) {
		b := bucket.New(10, 5)
		r := b.TakeAt(t0, 6)
		if r.OK || !r.OverBurst || !r.Permanent || r.Remaining != 5 {
			t.Fatalf("TakeAt(6) of burst 5: %+v", r)
		}
		if err := b.WaitN(context.Background(), 6); !errors.Is(err, bucket.ErrCostExceedsBurst) {
			t.Fatalf("WaitN(6) of burst 5: %v, want ErrCostExceedsBurst", err)
		}
		if tok := b.TokensAt(t0); tok != 5 {
			t.Fatalf("tokens after the refused takes: %v, want 5 (nothing consumed)", tok)
		}
	})
	t.Run("rates above 5e8/s are 5e8/s", func(t *testing.T) {
		b := bucket.New(1e12, 1e9)
		b.TakeAt(t0, 1e9)
		if tok := b.TokensAt(t0.Add(time.Second)); tok != 5e8 {
			t.Fatalf("tokens a second after emptying at 1e12/s: %v, want 5e8", tok)
		}
	})
	t.Run("a denial with refill says when", func(t *testing.T) {
		b := bucket.New(2, 4)
		b.TakeAt(t0, 4)
		r := b.TakeAt(t0, 3)
		if r.OK || r.Permanent || r.RetryAfter != 1500*time.Millisecond {
			t.Fatalf("TakeAt(3) on an empty 2/s bucket: %+v, want RetryAfter 1.5s", r)
		}
		if !b.AllowAt(t0.Add(r.RetryAfter), 3) {
			t.Fatal("refused at RetryAfter")
		}
	})
	t.Run("n ≤ 0 is a check", func(t *testing.T) {
		b := bucket.New(1, 1)
		if !b.AllowAt(t0, 0) || !b.AllowAt(t0, -3) {
			t.Fatal("a check on a full bucket refused")
		}
		b.AllowAt(t0, 1)
		if b.AllowAt(t0, 0) {
			t.Fatal("a check on an empty bucket passed")
		}
		if r := b.TakeAt(t0, 0); r.OK || r.RetryAfter != time.Second {
			t.Fatalf("TakeAt(0) on an empty 1/s bucket: %+v, want RetryAfter 1s", r)
		}
	})
}

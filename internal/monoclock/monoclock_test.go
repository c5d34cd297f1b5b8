package monoclock

import (
	"context"
	"testing"
	"time"
)

func TestNowFollowsTheMonotonicClock(t *testing.T) {
	a := Now()
	b := Now()
	if b.Before(a) {
		t.Fatalf("Now went backwards: %v then %v", a, b)
	}
	// Wall time is base's wall plus monotonic elapsed: it stays within the
	// drift of the two clocks from time.Now.
	if d := time.Since(a); d < 0 || d > time.Minute {
		t.Fatalf("Now is %v away from time.Now", d)
	}
	// The wall reading itself (what buckets use) is base's plus elapsed.
	if w := a.Round(0).Sub(base.Round(0)); w < 0 || w != a.Sub(base) {
		t.Fatalf("wall reading %v apart from base, monotonic %v", w, a.Sub(base))
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep on a done context = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0) = %v, want nil", err)
	}
	if n, w := Nanos(), Now().UnixNano(); w < n {
		t.Fatalf("Nanos %d after Now %d", n, w)
	}
}

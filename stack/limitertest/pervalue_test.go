package limitertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func TestPerValue(t *testing.T) {
	l, clock := limitertest.NewPerValue("caller", 2, 500*time.Millisecond)
	ctx := context.Background()
	alice := sluice.NewKeys("caller", "alice")
	for i, want := range []bool{true, true, false} {
		if d, _ := l.Allow(ctx, alice); d.Allowed != want {
			t.Fatalf("call %d: %+v", i, d)
		}
	}
	d, _ := l.Allow(ctx, alice)
	if d.LimitKey != "per-caller/caller=alice" || d.RetryAfter != 500*time.Millisecond || d.Limit != 2 || d.Window != time.Second {
		t.Errorf("denial %+v", d)
	}
	if d, _ := l.Allow(ctx, sluice.NewKeys("caller", "bob")); !d.Allowed {
		t.Error("bob shares alice's bucket")
	}
	if d, _ := l.Allow(ctx, sluice.NewKeys("other", "x")); !d.Allowed {
		t.Error("a request without the dimension was limited")
	}
	clock.Advance(500 * time.Millisecond)
	if d, _ := l.Allow(ctx, alice); !d.Allowed {
		t.Errorf("after RetryAfter: %+v", d)
	}
}

// NewPerValue's limiter reads the clock it returns, which starts at Start.
func TestNewPerValue(t *testing.T) {
	l, clock := limitertest.NewPerValue("caller", 1, time.Second)
	if !clock.Now().Equal(limitertest.Start) {
		t.Fatalf("clock at %v, want Start", clock.Now())
	}
	ctx, alice := context.Background(), sluice.NewKeys("caller", "alice")
	if d, _ := l.Allow(ctx, alice); !d.Allowed {
		t.Fatalf("first call: %+v", d)
	}
	d, _ := l.Allow(ctx, alice)
	if d.Allowed || d.RetryAfter != time.Second {
		t.Fatalf("second call: %+v", d)
	}
	clock.Advance(time.Second - time.Nanosecond)
	if d, _ := l.Allow(ctx, alice); d.Allowed {
		t.Fatalf("before RetryAfter: %+v", d)
	}
	clock.Advance(time.Nanosecond)
	if d, _ := l.Allow(ctx, alice); !d.Allowed {
		t.Errorf("after RetryAfter on the returned clock: %+v", d)
	}
}

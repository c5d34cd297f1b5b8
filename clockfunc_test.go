package sluice_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// ClockFunc's Now is the function's instant, and its Sleep ends with the
// context (at once when it is done) or at once for d ≤ 0.
func TestClockFunc(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var c sluice.Clock = sluice.ClockFunc(func() time.Time { return at })
	if got := c.Now(); !got.Equal(at) {
		t.Errorf("Now() = %v, want %v", got, at)
	}
	at = at.Add(time.Minute)
	if got := c.Now(); !got.Equal(at) {
		t.Errorf("Now() after the function's instant moved = %v, want %v", got, at)
	}
	if err := c.Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); err != context.Canceled {
		t.Errorf("Sleep(hour) on a done context = %v, want context.Canceled", err)
	}
}

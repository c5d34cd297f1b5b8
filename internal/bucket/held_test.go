package bucket_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/bucket"
)

// A bucket never reports more tokens than its burst, however long it idles
// after a take (TokensAt and the Remaining of a take of nothing once
// reported up to twice the burst).
func TestTokensNeverAboveBurst(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := bucket.New(10, 10)
	b.TakeN(t0, 1)
	for _, d := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second, time.Hour} {
		at := t0.Add(d)
		if got := b.TokensAt(at); got != 10 {
			t.Errorf("TokensAt(+%v) = %v, want 10", d, got)
		}
		if got := b.TakeN(at, 0).Remaining; got != 10 {
			t.Errorf("TakeN(+%v, 0).Remaining = %d, want 10", d, got)
		}
	}
	if got := b.TokensAt(t0.Add(50 * time.Millisecond)); got != 9.5 {
		t.Errorf("TokensAt(+50ms) = %v, want 9.5", got)
	}
}

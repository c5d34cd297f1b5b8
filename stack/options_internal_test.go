package stack

import (
	"context"
	"testing"
	"time"
)

// TestSourceOptionDefaults checks what TestSourceOptionsNotGiven cannot
// observe without waiting: "not given" values leave the interval and the
// ticker at their defaults, and do not undo an earlier option.
func TestSourceOptionDefaults(t *testing.T) {
	st, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(context.Context) ([]byte, error) { return nil, nil }
	src := NewSource(st, fetch, nil, WithInterval(0), WithInterval(-time.Second), WithTicks(nil))
	if src.interval != DefaultRefreshInterval || src.ticks != nil {
		t.Errorf("interval %v, ticks %v; want DefaultRefreshInterval and Run's own ticker", src.interval, src.ticks)
	}
	c := make(chan time.Time)
	src = NewSource(st, fetch, WithInterval(time.Minute), WithTicks(c), WithInterval(0), WithTicks(nil))
	if src.interval != time.Minute || src.ticks != (<-chan time.Time)(c) {
		t.Errorf("interval %v, ticks kept %v; want the earlier options kept", src.interval, src.ticks == (<-chan time.Time)(c))
	}
}

package bucket

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestOptionsNotGiven walks every option with the values the option rule
// calls "not given" (zero, negative, nil) and with out-of-range ones: none
// panics, and each leaves the documented default. New and NewTable have no
// error result: no option can be wrong in another way.
func TestOptionsNotGiven(t *testing.T) {
	bucketCases := map[string][]Option{
		"no option":       nil,
		"nil Option":      {nil},
		"WithClock(nil)":  {WithClock(nil)},
		"WithShards(0)":   {WithShards(0)},
		"WithShards(-1)":  {WithShards(-1)},
		"WithBudget(nil)": {WithBudget(nil)},
	}
	for name, opts := range bucketCases {
		t.Run("New/"+name, func(t *testing.T) {
			b := New(rate.Limit(1e-9), 2, opts...)
			if b.clock != nil {
				t.Fatalf("clock %v; want nil, the default (monoclock)", b.clock)
			}
			// Decided on the system clock: two tokens, then none.
			first, second, third := b.Allow(), b.Allow(), b.Allow()
			if !first || !second || third {
				t.Errorf("Allow on the default clock: %v, %v, %v; want true, true, false", first, second, third)
			}
		})
	}

	tableCases := []struct {
		name   string
		opts   []Option
		shards int
	}{
		{"no option", nil, defaultShards},
		{"nil Option", []Option{nil}, defaultShards},
		{"WithClock(nil)", []Option{WithClock(nil)}, defaultShards},
		{"WithShards(0)", []Option{WithShards(0)}, defaultShards},
		{"WithShards(-5)", []Option{WithShards(-5)}, defaultShards},
		{"WithShards(3)", []Option{WithShards(3)}, 4},
		{"WithShards(1<<40)", []Option{WithShards(1 << 40)}, 4096},
		{"WithBudget(nil)", []Option{WithBudget(nil)}, defaultShards},
	}
	for _, c := range tableCases {
		t.Run("NewTable/"+c.name, func(t *testing.T) {
			tb := NewTable(rate.Limit(1e-9), 1, c.opts...)
			if tb.maxShards != c.shards {
				t.Errorf("maxShards %d, want %d", tb.maxShards, c.shards)
			}
			if tb.clock != nil || tb.budget != nil {
				t.Fatalf("clock %v, budget %v; want the default clock and no Budget", tb.clock, tb.budget)
			}
			// No Budget: a thousand new keys all get a bucket, on the
			// system clock.
			for i := range 1000 {
				if r := tb.Take(string(rune('a'+i%26))+time.Duration(i).String(), 1); !r.OK || r.BudgetFull {
					t.Fatalf("key %d: %+v, want a fresh bucket", i, r)
				}
			}
		})
	}
}

// TestOptionsNotGivenKeepEarlier checks that a "not given" value leaves
// what an earlier option set: it is not given, not a reset.
func TestOptionsNotGivenKeepEarlier(t *testing.T) {
	b := NewBudget(1)
	tb := NewTable(rate.Limit(1e-9), 1, WithShards(2), WithBudget(b), WithShards(0), WithBudget(nil))
	if tb.maxShards != 2 || tb.budget != b {
		t.Fatalf("maxShards %d, budget kept %v; want 2 and the first Budget", tb.maxShards, tb.budget == b)
	}
	if r := tb.Take("a", 1); !r.OK {
		t.Fatalf("first key: %+v", r)
	}
	if r := tb.Take("b", 1); !r.BudgetFull {
		t.Fatalf("second key with a Budget of 1: %+v, want BudgetFull", r)
	}
}

package bucket

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestSweepAllKeepsEveryLiveKeyFindable drops random subsets of a shard's
// buckets with sweepAll and checks that every bucket kept is still found
// with its state, every dropped one is gone, and the count is right.
func TestSweepAllKeepsEveryLiveKeyFindable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		tb := NewTable(1, 1) // 1 token per second: a tick is 1 s
		p := tb.p.Load()
		s := &shard{}
		n := minSlots << r.IntN(6)
		s.slots = make([]slot, n)
		want := map[digest]int64{}
		count := r.IntN(n*3/4 + 1)
		for len(want) < count {
			// Few distinct homes, so probe runs are long and wrap around.
			d := digest{hi: r.Uint64() & (0xF << 60), lo: r.Uint64() | 1}
			if _, dup := want[d]; dup {
				continue
			}
			tat := p.nsToTicks(int64(r.IntN(4)) * int64(time.Second))
			s.place(d.hi, d.lo, tat)
			want[d] = tat
		}
		s.live, s.peak = count, count
		s.high, s.highSet = int64(2*time.Second), true // drop tat ≤ 2 ticks
		tb.sweepAll(s, p, 0, s.high)
		cut := p.nsToTicks(int64(2 * time.Second))
		kept := 0
		for d, tat := range want {
			i, found := s.find(d)
			if tat <= cut {
				if found {
					t.Fatalf("round %d: full bucket %v was kept", round, d)
				}
				continue
			}
			kept++
			if !found {
				t.Fatalf("round %d: live bucket %v lost", round, d)
			}
			if got := s.slots[i].tat.Load(); got != tat {
				t.Fatalf("round %d: bucket %v state %d, want %d", round, d, got, tat)
			}
		}
		if s.live != kept {
			t.Fatalf("round %d: live = %d, want %d", round, s.live, kept)
		}
	}
}

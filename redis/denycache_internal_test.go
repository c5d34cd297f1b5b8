package redis

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/stack"
)

// BenchmarkDenialCacheOverhead is what the near-cache of denials adds to a
// decision that goes to Redis and is admitted (the cache empty for its
// buckets, as for traffic within its limits): the lookup, the single
// flight's check, the ticket and the reply's bookkeeping (not the clock
// reading, once per script call, which batched decisions share), for one and
// three buckets.
//
//	cd redis && go test -run '^$' -bench DenialCacheOverhead
func BenchmarkDenialCacheOverhead(b *testing.B) {
	be := &Backend{dc: newDenyCache(defaultDenialCache), realStart: time.Now()}
	for _, n := range []int{1, 3} {
		ops := make([]stack.Op, n)
		for i := range ops {
			ops[i] = stack.Op{Key: "per-caller|requests|0|1:*|" + string(rune('a'+i)), Rate: 100, Period: time.Second, Burst: 100, Cost: 1}
		}
		out := stack.Outcome{Denied: -1}
		b.Run(string(rune('0'+n))+"ops", func(b *testing.B) {
			for b.Loop() {
				if be.dc.mayHold(&ops[0]) {
					b.Fatal("entries")
				}
				if mine, wait := be.dc.probeOrWait(&ops[0]); mine != nil || wait != nil {
					b.Fatal("probe")
				}
				var t denyTicket
				be.dc.begin(ops, &t)
				be.dc.end(be, ops, &t, out, nil, true, 0) // the call's instant is read once per script call, not here
			}
		})
	}
}

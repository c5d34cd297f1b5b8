package sim

import (
	"math/rand/v2"
	"testing"
	"time"
)

// benchLimiters are the per-shard limiters compared side by side: the
// fixed window and token buckets of rate 25/s, burst 26 (one of the seed's
// six shards).
var benchLimiters = []struct {
	name string
	make func() Allower
}{
	{"fixedwindow", func() Allower { return NewFixedWindow(26) }},
	{"sluicebucket", func() Allower { return newSluiceBucket(25, 26) }},
	{"xrate", func() Allower { return newRateLimiter(25, 26) }},
}

var sinkBool bool

// BenchmarkAllowPoisson measures one decision on a Poisson(22.1/s) timeline,
// the seed's per-shard traffic, single goroutine.
func BenchmarkAllowPoisson(b *testing.B) {
	const n = 1 << 16
	rng := rand.New(rand.NewPCG(1, 2))
	ts := make([]time.Time, n)
	at := 0.0
	for i := range ts {
		at += rng.ExpFloat64() / 22.1075
		ts[i] = epoch.Add(time.Duration(at * 1e9))
	}
	span := time.Duration((at + 1) * 1e9)
	for _, l := range benchLimiters {
		b.Run(l.name, func(b *testing.B) {
			lim := l.make()
			b.ReportAllocs()
			i, shift := 0, time.Duration(0)
			for b.Loop() {
				sinkBool = lim.AllowN(ts[i].Add(shift), 1)
				if i++; i == n {
					i, shift = 0, shift+span
				}
			}
		})
	}
}

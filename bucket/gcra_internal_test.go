package bucket

import (
	"math"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// FuzzTicks checks the instant↔tick conversions: monotone, and waitUntil
// gives the first instant at a tick, never early and never late.
func FuzzTicks(f *testing.F) {
	f.Add(20.0, 50, int64(0), int64(1), int64(5))
	f.Add(7e6/60, 100, int64(-12345), int64(99999), int64(-3))
	f.Add(0.001, 1, int64(math.MinInt64), int64(math.MaxInt64), int64(1<<61))
	f.Add(1e300, math.MaxInt, int64(math.MaxInt64), int64(-1), int64(-(1 << 61)))
	f.Fuzz(func(t *testing.T, r float64, b int, ns1, ns2, dt int64) {
		p := newParams(rate.Limit(r), b)
		if p.inf {
			return
		}
		if p.tau < 0 || p.tau > maxTau || p.unit < 1 || p.unit > maxUnit || p.fq > 1<<61 {
			t.Fatalf("params out of range: %+v", p)
		}
		if ns1 > ns2 {
			ns1, ns2 = ns2, ns1
		}
		k1, k2 := p.nsToTicks(ns1), p.nsToTicks(ns2)
		if k1 > k2 || k1 < -maxTick || k2 > maxTick {
			t.Fatalf("ticks(%d)=%d, ticks(%d)=%d: not monotone or out of range", ns1, k1, ns2, k2)
		}
		if p.fq == 0 {
			return
		}
		target := k1 + dt%(1<<40)
		d := p.waitUntil(ns1, target)
		if d < 0 {
			t.Fatalf("negative wait %v", d)
		}
		if d == time.Duration(math.MaxInt64) || ns1 > math.MaxInt64-int64(d) {
			return
		}
		if got := p.nsToTicks(ns1 + int64(d)); got < target && got < maxTick {
			t.Fatalf("waitUntil(%d, %d) = %v: tick then %d, early", ns1, target, d, got)
		}
		if d > 0 {
			if got := p.nsToTicks(ns1 + int64(d) - 1); got >= target {
				t.Fatalf("waitUntil(%d, %d) = %v: tick 1ns earlier already %d, late", ns1, target, d, got)
			}
		}
	})
}

package bucket

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/internal/monoclock"
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

// TestExtremesKeepInvariants drives every operation at the edges of the
// representable range and checks the state stays within its bounds (so no
// sum or difference can overflow) and results stay sane.
func TestExtremesKeepInvariants(t *testing.T) {
	far := []time.Time{
		{}, time.Date(1800, 1, 1, 0, 0, 0, 0, time.UTC), epoch,
		time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	ns := []int{1, 2, 1 << 20, math.MaxInt}
	for _, r := range []rate.Limit{0, 0.001, 1, 1e7 / 60, 1e9, rate.Limit(math.MaxFloat64 / 2)} {
		for _, b := range []int{0, 1, 1000, math.MaxInt} {
			bk := New(r, b, WithClock(nopSleep{}))
			check := func(op string) {
				c := bk.c.Load()
				if tat := c.tat.Load(); tat != fresh && (tat > 1<<62 || tat < -maxTick) {
					t.Fatalf("r=%v b=%d after %s: state %d out of bounds", r, b, op, tat)
				}
			}
			for i, t1 := range far {
				for _, n := range ns {
					res := bk.TakeN(t1, n)
					check("TakeN")
					if res.Remaining > int64(max(b, 0)) {
						t.Fatalf("r=%v b=%d: Remaining %d above burst", r, b, res.Remaining)
					}
					bk.ChargeN(t1, n)
					check("ChargeN")
					bk.ChargeN(far[len(far)-1-i], n)
					check("ChargeN")
					if res.OK {
						_ = bk.GiveBack(&res.Grant, min(n/2+1, int(res.Grant.Outstanding())))
					}
					check("GiveBack")
					ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
					_ = bk.WaitN(ctx, 1)
					cancel()
					check("WaitN")
				}
				bk.SetBurstAt(t1, b/2)
				check("SetBurstAt")
				bk.ChargeN(far[len(far)-1-i], math.MaxInt) // deepest debt
				bk.Reconfigure(far[len(far)-1-i], r/3, b)
				check("Reconfigure")
				if tk := bk.TokensAt(t1); math.IsNaN(tk) || tk > float64(max(b, 0)) {
					t.Fatalf("r=%v b=%d: TokensAt %v", r, b, tk)
				}
			}
		}
	}
}

// The state word of a Bucket has a cache line to itself: the parameters
// every take reads are not invalidated by other cores' takes.
func TestStateWordOnItsOwnCacheLine(t *testing.T) {
	off, size := unsafe.Offsetof(core{}.tat), unsafe.Sizeof(core{})
	if off%cacheLine != 0 || size != off+cacheLine || unsafe.Sizeof(params{}) > off {
		t.Fatalf("core: state at offset %d of %d bytes, params %d: want it alone on a %d-byte line",
			off, size, unsafe.Sizeof(params{}), cacheLine)
	}
}

// divUnit is floorDiv by the unit, for every unit a rate can have and
// every dividend a take can produce.
func TestDivUnit(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	units := []int64{1, 2, 3, 7, 10, 1000, 166666666, maxUnit - 1, maxUnit}
	for range 200 {
		units = append(units, 1+rng.Int64N(maxUnit))
	}
	for _, u := range units {
		p := params{unit: u, um: math.MaxUint64 / uint64(u)}
		as := []int64{0, 1, u - 1, u, u + 1, 2*u - 1, 1 << 62, 1<<62 - 1, math.MaxInt64, -1, -u, -u - 1, -(1 << 62)}
		for range 500 {
			as = append(as, rng.Int64(), rng.Int64N(1<<40), -rng.Int64N(1<<40), rng.Int64N(u)*u+rng.Int64N(u))
		}
		for _, a := range as {
			if got, want := p.divUnit(a), floorDiv(a, u); got != want {
				t.Fatalf("divUnit(%d) with unit %d = %d, want %d", a, u, got, want)
			}
		}
	}
	// newParams sets the reciprocal.
	for _, r := range []rate.Limit{0, 1e-3, 1, 1e6, rate.Inf} {
		p := newParams(r, 10)
		if p.um != math.MaxUint64/uint64(p.unit) {
			t.Fatalf("newParams(%v): um %d for unit %d", r, p.um, p.unit)
		}
	}
}

// nopSleep is the default clock with a Sleep that returns at once.
type nopSleep struct{ monoclock.Clock }

func (nopSleep) Sleep(context.Context, time.Duration) error { return nil }

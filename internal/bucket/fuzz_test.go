package bucket_test

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/bucket"
	"golang.org/x/time/rate"
)

// FuzzBucket drives a bucket with arbitrary parameters and operations at
// arbitrary (also stale, also far away) instants. It must never panic or
// overflow: tokens never exceed the burst, a RetryAfter is never early,
// and with takes only, no window admits more than burst + rate·Δt.
func FuzzBucket(f *testing.F) {
	f.Add(20.0, int64(50), []byte{1, 1, 0, 0, 1, 1, 0, 10, 1, 3, 0, 200})
	f.Add(7e6/60, int64(100), []byte{1, 50, 1, 0, 7, 9, 255, 255, 1, 100, 0, 1})
	f.Add(0.001, int64(1), []byte{0, 1, 0, 0, 2, 5, 0, 9, 3, 1, 0, 0, 4, 1, 128, 0})
	f.Add(math.Inf(1), int64(0), []byte{0, 1, 0, 0})
	f.Add(-1.0, int64(-1), []byte{0, 1, 0, 0, 5, 2, 0, 0})
	f.Add(1e300, int64(math.MaxInt64), []byte{1, 255, 127, 255, 1, 255, 128, 0})
	f.Add(math.NaN(), int64(3), []byte{2, 255, 127, 255})
	f.Fuzz(func(t *testing.T, r float64, burst int64, ops []byte) {
		if burst > math.MaxInt || burst < math.MinInt {
			return
		}
		lim := rate.Limit(r)
		b := bucket.New(lim, int(burst))
		takesOnly := len(ops) > 0 && ops[0]&1 == 1
		step := time.Millisecond
		if r > 0 && r < 1e9 {
			step = time.Duration(max(1, min(1e12, 1e9/r/8)))
		}
		now := t0
		var grants []grant
		var last bucket.Grant
		for i := 0; i+4 <= len(ops); i += 4 {
			op, n := ops[i]%6, int(ops[i+1])
			delta := time.Duration(int16(binary.BigEndian.Uint16(ops[i+2:]))) * step
			if delta == time.Duration(math.MinInt16)*step {
				delta = 50 * 365 * 24 * time.Hour // a jump of 50 years
			}
			t1 := now.Add(delta)
			if delta > 0 || op == 0 {
				now = t1 // op 0 with a negative delta moves back: a stale caller
			}
			if takesOnly {
				op = 1
			}
			switch op {
			case 0, 1:
				res := b.TakeN(t1, n)
				if res.OK {
					last = res.Grant
					grants = append(grants, grant{t1, n})
				} else if !res.Permanent && !res.OverBurst && res.RetryAfter < time.Duration(math.MaxInt64) {
					if got := b.TokensAt(t1.Add(res.RetryAfter)); got < float64(n) {
						t.Fatalf("RetryAfter %v early: %v tokens then, want %d", res.RetryAfter, got, n)
					}
				}
			case 2:
				b.ChargeN(t1, n*int(burst%1000+1))
			case 3:
				_ = b.GiveBack(&last, n) // refused when n is more than outstanding, or after a Set*
			case 4:
				b.SetBurstAt(t1, n)
			case 5:
				b.SetLimitAt(t1, lim*rate.Limit(n)/16)
			}
			if lim != rate.Inf {
				if got := b.TokensAt(t1); got > float64(max(b.Burst(), 0))+1e-9 || math.IsNaN(got) {
					t.Fatalf("tokens %v above burst %d", got, b.Burst())
				}
			}
		}
		if takesOnly && lim > 0 && lim <= bucket.MaxRate && burst >= 0 && burst <= 1e6 && len(grants) < 2000 {
			checkWindows(t, grants, lim, int(burst), 0)
		}
	})
}

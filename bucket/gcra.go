package bucket

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Bucket time is measured in ticks, chosen per rate so that one token is
// exactly unit ticks. An instant is converted to ticks on every call as
// floor(ns × fq / 2^62), where ns is the instant's offset from epoch and
// fq/2^62 is the number of ticks per nanosecond (at most 1/2). Nothing is
// accumulated, so there is no drift beyond the float64 rounding of fq
// (relative error below 1e-15).

// epoch is the fixed origin of bucket time. Instants are measured from it
// with time.Time.Sub, which saturates about 292 years away.
var epoch = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

const (
	fracBits = 62
	// maxTick bounds the tick value of an instant. With at most half a tick
	// per nanosecond this covers at least ±146 years around 2000.
	maxTick = int64(1) << 61
	// maxTau bounds burst×unit, the capacity in ticks.
	maxTau = int64(1) << 60
	// maxDebt bounds how far ahead of an instant ChargeN can push the state.
	maxDebt = int64(1) << 61
	// maxUnit bounds the ticks per token for slow rates (a tick is then at
	// most about a microsecond for 0.001/s).
	maxUnit = int64(1) << 30
	// sealed marks the state of a Bucket whose parameters are being changed.
	sealed = int64(math.MaxInt64)
	// fresh is the state of a bucket never used: full at every instant.
	fresh = int64(math.MinInt64)

	// MaxRate is the fastest finite refill rate a bucket represents exactly
	// (tokens per second): a tick cannot be shorter than 2 ns. Faster finite
	// rates are treated as MaxRate; rate.Inf allows everything.
	MaxRate = rate.Limit(5e8)
	// MaxBurst is the largest burst a bucket holds; larger bursts are
	// treated as MaxBurst.
	MaxBurst = 1 << 60
)

// params are the immutable parameters of a bucket.
type params struct {
	limit rate.Limit // as given
	burst int        // as given
	inf   bool       // limit == rate.Inf: everything is allowed
	zero  bool       // no refill (rate <= 0, NaN, or too slow to represent)
	n     int64      // effective burst in tokens, 0 ≤ n ≤ MaxBurst
	unit  int64      // ticks per token, ≥ 1
	tau   int64      // n × unit
	fq    uint64     // ticks per nanosecond × 2^62, ≤ 2^61
}

func newParams(r rate.Limit, b int) params {
	p := params{limit: r, burst: b, unit: 1}
	if r == rate.Inf {
		p.inf = true
		return p
	}
	n := int64(b)
	if n < 0 {
		n = 0
	}
	if n > MaxBurst {
		n = MaxBurst
	}
	p.n = n
	rf := float64(r)
	if !(rf > 0) { // also NaN
		p.zero = true
		p.tau = n
		return p
	}
	if rf > float64(MaxRate) {
		rf = float64(MaxRate)
	}
	lim := maxUnit
	if n > 0 && maxTau/n < lim {
		lim = maxTau / n
	}
	u := int64(lim)
	if x := 5e8 / rf; x < float64(lim) {
		u = int64(x)
	}
	if u < 1 {
		u = 1
	}
	f := float64(u) * rf / 1e9 * (1 << fracBits)
	if f > 1<<(fracBits-1) {
		f = 1 << (fracBits - 1)
	}
	fq := uint64(f)
	if fq == 0 {
		p.zero = true
		p.tau = n
		return p
	}
	p.unit, p.fq, p.tau = u, fq, n*u
	return p
}

// now converts an instant to ticks: floor(ns × fq / 2^62), clamped to ±maxTick.
func (p *params) now(t time.Time) int64 {
	return p.nsToTicks(int64(t.Sub(epoch)))
}

func (p *params) nsToTicks(ns int64) int64 {
	if ns >= 0 {
		hi, lo := bits.Mul64(uint64(ns), p.fq)
		q := hi<<(64-fracBits) | lo>>fracBits
		if q > uint64(maxTick) {
			return maxTick
		}
		return int64(q)
	}
	hi, lo := bits.Mul64(uint64(-ns), p.fq) // -MinInt64 wraps to 2^63 as uint64: right
	q := hi<<(64-fracBits) | lo>>fracBits
	if lo&(1<<fracBits-1) != 0 {
		q++
	}
	if q > uint64(maxTick) {
		return -maxTick
	}
	return -int64(q)
}

// ticksToDuration returns the shortest duration d such that any instant
// moved forward by d is at least dt ticks later: ceil(dt × 2^62 / fq).
// It saturates at the largest Duration.
func (p *params) ticksToDuration(dt int64) time.Duration {
	if dt <= 0 {
		return 0
	}
	if p.fq == 0 {
		return time.Duration(math.MaxInt64)
	}
	hi, lo := uint64(dt)>>(64-fracBits), uint64(dt)<<fracBits
	if hi >= p.fq {
		return time.Duration(math.MaxInt64)
	}
	q, r := bits.Div64(hi, lo, p.fq)
	if r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(q)
}

// floorDiv divides rounding towards negative infinity (d > 0).
func floorDiv(a, d int64) int64 {
	q := a / d
	if a%d != 0 && a < 0 {
		q--
	}
	return q
}

// held is the capacity left at now for state tat, in ticks: tau when full,
// negative in debt.
func (p *params) held(tat, now int64) int64 {
	if tat < now-p.tau { // also fresh
		return p.tau
	}
	return p.tau - (tat - now)
}

// take tries to take n tokens at t from state s. It reports ok=false with
// retry=true when s is sealed and the caller must reload and retry.
func (p *params) take(s *atomic.Int64, t time.Time, n int) (res Result, retry bool) {
	if p.inf {
		return Result{OK: true, Remaining: p.n}, false
	}
	now := p.now(t)
	for {
		tat := s.Load()
		if tat == sealed {
			return Result{}, true
		}
		if n <= 0 {
			return Result{OK: true, Remaining: floorDiv(p.held(tat, now), p.unit)}, false
		}
		if int64(n) > p.n || n > p.burst {
			return Result{OverBurst: true, Permanent: true, Remaining: floorDiv(p.held(tat, now), p.unit)}, false
		}
		base := tat
		if base < now {
			base = now
		}
		newTat := base + int64(n)*p.unit
		if newTat-now > p.tau {
			res := Result{Remaining: floorDiv(p.tau-(base-now), p.unit)}
			if p.zero {
				res.Permanent = true
			} else {
				res.RetryAfter = p.ticksToDuration(newTat - p.tau - now)
			}
			return res, false
		}
		if s.CompareAndSwap(tat, newTat) {
			return Result{OK: true, Remaining: floorDiv(p.tau-(newTat-now), p.unit)}, false
		}
	}
}

// mulSat returns n × unit, saturated at limit (n > 0).
func mulSat(n, unit, limit int64) int64 {
	if n > limit/unit {
		return limit
	}
	return n * unit
}

// charge consumes n tokens at t unconditionally, up to maxDebt ticks ahead.
// It reports false when s is sealed.
func (p *params) charge(s *atomic.Int64, t time.Time, n int) bool {
	if p.inf || n <= 0 {
		return true
	}
	now := p.now(t)
	inc := mulSat(int64(n), p.unit, maxDebt)
	for {
		tat := s.Load()
		if tat == sealed {
			return false
		}
		base := max(tat, now)
		newTat := min(base+inc, now+maxDebt)
		if newTat <= tat {
			return true // already at the debt bound: nothing moves backwards
		}
		if s.CompareAndSwap(tat, newTat) {
			return true
		}
	}
}

// refund gives back n tokens at t, never beyond full at t. It reports false
// when s is sealed.
func (p *params) refund(s *atomic.Int64, t time.Time, n int) bool {
	if p.inf || n <= 0 {
		return true
	}
	now := p.now(t)
	dec := mulSat(int64(n), p.unit, maxDebt)
	for {
		tat := s.Load()
		if tat == sealed {
			return false
		}
		full := now - p.tau
		if tat <= full {
			return true
		}
		newTat := max(tat-dec, full)
		if s.CompareAndSwap(tat, newTat) {
			return true
		}
	}
}

// tokensAt is the number of tokens held at t for state tat.
func (p *params) tokensAt(tat int64, t time.Time) float64 {
	if p.inf {
		return float64(p.n)
	}
	return float64(p.held(tat, p.now(t))) / float64(p.unit)
}

// convert re-expresses state tat of params p, as seen at t, as a state of
// params q holding the same number of tokens at t (capped at q's burst,
// rounded down).
func convert(p *params, tat int64, t time.Time, q *params) int64 {
	if tat == fresh || p.inf || q.inf {
		return fresh
	}
	h := p.held(tat, p.now(t))
	if h >= p.tau && q.n >= p.n {
		// Full and not shrinking: stay full, as of t.
		return q.now(t) - q.tau
	}
	// h in [tau-maxDebt-2·maxTick, tau]: scale by q.unit/p.unit, floor.
	nh := mulDivFloor(h, q.unit, p.unit)
	if nh > q.tau {
		nh = q.tau
	}
	if nh < -maxDebt {
		nh = -maxDebt
	}
	return q.now(t) + q.tau - nh
}

// mulDivFloor returns floor(a × m / d) for m, d > 0, saturated to ±2^62.
func mulDivFloor(a, m, d int64) int64 {
	neg := a < 0
	ua := uint64(a)
	if neg {
		ua = uint64(-a)
	}
	hi, lo := bits.Mul64(ua, uint64(m))
	if hi >= uint64(d) {
		if neg {
			return -(1 << 62)
		}
		return 1 << 62
	}
	q, r := bits.Div64(hi, lo, uint64(d))
	if q > 1<<62 {
		q = 1 << 62
	}
	if neg {
		if r != 0 {
			q++
		}
		return -int64(q)
	}
	return int64(q)
}

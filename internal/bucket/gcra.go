package bucket

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/monoclock"
	"golang.org/x/time/rate"
)

// Bounds (they keep every sum and difference below 2^63): instants are in
// [-maxTick, maxTick] = ±2^61 ticks; a state (tat) is fresh, or in
// [now, now+maxDebt] for the instant now that wrote it, so at most 2^62;
// n×unit ≤ tau ≤ 2^60 on the take path and ≤ maxDebt elsewhere.
//
// Bucket time is measured in ticks, chosen per rate so that one token is
// exactly unit ticks. An instant is converted to ticks on every call as
// floor(ns × fq / 2^62), where ns is the instant's offset from epoch and
// fq/2^62 is the number of ticks per nanosecond (at most 1/2). Nothing is
// accumulated, so there is no drift beyond the float64 rounding of fq
// (relative error below 1e-15).

// epoch is the fixed origin of bucket time. Instants are measured from it
// in nanoseconds by nsOf, which saturates about 285 years away.
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
	um    uint64     // (2^64-1) / unit: divUnit's reciprocal
}

func newParams(r rate.Limit, b int) params {
	p := newParamsUnit(r, b)
	p.um = math.MaxUint64 / uint64(p.unit)
	return p
}

func newParamsUnit(r rate.Limit, b int) params {
	p := params{limit: r, burst: b, unit: 1}
	n := int64(b)
	if n < 0 {
		n = 0
	}
	if n > MaxBurst {
		n = MaxBurst
	}
	p.n = n
	if r == rate.Inf {
		p.inf = true
		return p
	}
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
	return p.nsToTicks(nsOf(t))
}

// epochUnix is epoch in Unix seconds.
var epochUnix = epoch.Unix()

// nsOf returns t's offset from epoch in nanoseconds, saturated about 292
// years away (like t.Sub(epoch), but cheaper).
func nsOf(t time.Time) int64 {
	const lim = 9_000_000_000 // seconds, about 285 years
	s := t.Unix() - epochUnix
	if s > lim {
		return math.MaxInt64
	}
	if s < -lim {
		return math.MinInt64
	}
	return s*1e9 + int64(t.Nanosecond())
}

// sysNow is the default clock (internal/monoclock) in ns since epoch: one
// monotonic clock read, without building a Time.
func sysNow() int64 { return monoclock.Nanos() - epochUnixNs }

// epochUnixNs is epoch in Unix nanoseconds.
const epochUnixNs = 946_684_800 * 1e9

// nsToTicks converts ns (since epoch) to ticks: floor(ns × fq / 2^62),
// clamped to ±maxTick. The common case, an instant after epoch, is small
// enough to be inlined into every take; instants before epoch go through
// nsToTicksNeg.
func (p *params) nsToTicks(ns int64) int64 {
	if ns < 0 {
		return p.nsToTicksNeg(ns)
	}
	hi, lo := bits.Mul64(uint64(ns), p.fq)
	return int64(min(hi<<(64-fracBits)|lo>>fracBits, uint64(maxTick)))
}

// nsToTicksNeg is nsToTicks for ns < 0, rounding towards negative infinity.
func (p *params) nsToTicksNeg(ns int64) int64 {
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

// waitUntil returns the shortest d ≥ 0 such that the instant ns+d is at
// tick T or later, saturating at the largest Duration (never, for zero rate
// or a tick beyond the representable range).
func (p *params) waitUntil(ns, T int64) time.Duration {
	const never = time.Duration(math.MaxInt64)
	if p.fq == 0 || T > maxTick {
		return never
	}
	if T <= -maxTick {
		return 0 // every instant is at tick -maxTick or later
	}
	var target int64 // the first instant (ns since epoch) at tick T
	if T > 0 {
		hi, lo := uint64(T)>>(64-fracBits), uint64(T)<<fracBits
		if hi >= p.fq {
			return never
		}
		q, r := bits.Div64(hi, lo, p.fq)
		if r != 0 {
			q++
		}
		if q > math.MaxInt64 {
			return never
		}
		target = int64(q)
	} else {
		u := uint64(-T)
		hi, lo := u>>(64-fracBits), u<<fracBits
		if hi >= p.fq {
			return 0 // before any representable instant
		}
		q, _ := bits.Div64(hi, lo, p.fq)
		if q > math.MaxInt64 {
			return 0
		}
		target = -int64(q)
	}
	if target <= ns {
		return 0
	}
	if ns < 0 && target > math.MaxInt64+ns {
		return never
	}
	return time.Duration(target - ns)
}

// divUnit is floorDiv(a, p.unit) without a hardware division in the common
// case a ≥ 0 (the tokens left after a take): q = ⌊a·um/2⁶⁴⌋ is ⌊a/unit⌋ or
// one less, since um = ⌊(2⁶⁴-1)/unit⌋ > 2⁶⁴/unit - 2 and a < 2⁶³; one
// comparison corrects it.
func (p *params) divUnit(a int64) int64 {
	if a < 0 {
		return floorDiv(a, p.unit)
	}
	hi, _ := bits.Mul64(uint64(a), p.um)
	q := int64(hi)
	if a-q*p.unit >= p.unit {
		q++
	}
	return q
}

// floorDiv divides rounding towards negative infinity (d > 0).
func floorDiv(a, d int64) int64 {
	q := a / d
	if a%d != 0 && a < 0 {
		q--
	}
	return q
}

// held is the capacity left at now for state tat, in ticks: tau when full
// (tat ≤ now), negative in debt.
func (p *params) held(tat, now int64) int64 {
	if tat <= now { // also fresh: nothing is owed, the bucket is full
		return p.tau
	}
	return p.tau - (tat - now)
}

// highQuantum is the resolution of a Bucket's high-water instant: a take
// raises the mark to the end of its instant's quantum, so that takes in a
// row raise it once a quantum instead of once each (a compare-and-swap on
// every take costs the lock-free path a fifth). A give-back after a take
// at a later instant then returns up to a quantum's refill less than the
// exact bound (one microsecond: a thousandth of a token at 1,000/s); a
// give-back with nothing taken since is exact whatever the mark says (see
// core.giveBack).
const highQuantum = 1 << 10 // ns

// raise moves the high-water instant h (ns since epoch) up to ns, rounded
// up to the end of its quantum. A take raises it before its
// compare-and-swap, so that a give-back that finds the take's state also
// finds its instant (see Grant). h may be nil (a Table keeps its mark per
// shard, exactly, under the shard's lock).
func raise(h *atomic.Int64, ns int64) {
	if h == nil {
		return
	}
	for {
		cur := h.Load()
		if ns <= cur || h.CompareAndSwap(cur, ns|(highQuantum-1)) {
			return
		}
	}
}

// reread returns the state s holds after a compare-and-swap on it failed:
// another take wrote it in between, so the bucket is contended. It reads
// with an atomic add of zero, which takes the cache line for writing at
// once, where a load would bring the line in shared and the next
// compare-and-swap would have to take it again: on two cores the retry
// then loses the line to the other core less often. The first read of a
// take stays a load, so that refusals, which write nothing, keep the line
// shared between the cores that read it.
//
// Before that it waits, spinning, for about a microsecond (contendedSpin):
// the core that won keeps the line and takes on without losing it, where
// an immediate re-read pulls the line back and makes the winner's next
// compare-and-swap fail in turn. The wait changes no outcome (the take is
// decided on the state it then reads) and is paid only by a take that lost
// a compare-and-swap: an uncontended take never spins, and a refusal never
// gets here.
func reread(s *atomic.Int64) int64 {
	for i := 0; i < contendedSpin; i++ {
	}
	return s.Add(0)
}

// contendedSpin is the wait of reread, in iterations of an empty loop
// (about a cycle each): long enough for the winner to take on, short
// enough that a take that lost waits about a microsecond more. How the
// choice was measured: BENCHMARKS.md, "Bucket: one contended bucket".
const contendedSpin = 2048

// take tries to take n tokens at t from state s, raising the high-water
// instant h first (nil: the caller keeps it). It reports ok=false with
// retry=true when s is sealed and the caller must reload and retry. A
// successful take's Result carries its Grant but for the key and the
// give-back counter, which the caller fills in.
func (p *params) take(s, h *atomic.Int64, ns int64, n int) (res Result, retry bool) {
	if p.inf {
		return Result{OK: true, Remaining: p.n}, false
	}
	now := p.nsToTicks(ns)
	tat := s.Load()
	for {
		if tat == sealed {
			return Result{}, true
		}
		if n <= 0 {
			// A check: nothing to take, and it passes only while the bucket
			// holds at least one whole unit; an empty bucket or one in debt
			// refuses until a unit has refilled (Envoy's token-quota check,
			// hits_addend 0, before a debit of the tokens used). A bucket of
			// burst 0 never holds a unit.
			h := p.held(tat, now)
			if h >= p.unit {
				return Result{OK: true, Remaining: p.divUnit(h)}, false
			}
			res := Result{Remaining: p.divUnit(h)}
			if p.zero || p.n == 0 {
				res.Permanent = true
			} else {
				res.RetryAfter = p.waitUntil(ns, tat-p.tau+p.unit)
			}
			return res, false
		}
		if int64(n) > p.n || n > p.burst {
			return Result{OverBurst: true, Permanent: true, Remaining: p.divUnit(p.held(tat, now))}, false
		}
		base := tat
		if base < now {
			base = now
		}
		newTat := base + int64(n)*p.unit
		if newTat-now > p.tau {
			res := Result{Remaining: p.divUnit(p.tau - (base - now))}
			if p.zero {
				res.Permanent = true
			} else {
				res.RetryAfter = p.waitUntil(ns, newTat-p.tau)
			}
			return res, false
		}
		raise(h, ns)
		if s.CompareAndSwap(tat, newTat) {
			return Result{OK: true, Remaining: p.divUnit(p.tau - (newTat - now)),
				Grant: Grant{p: p, at: ns, end: newTat, n: int64(n)}}, false
		}
		tat = reread(s)
	}
}

// tryTake is take reporting only OK and Remaining, in registers (a Result
// has too many fields to stay out of memory). Outcomes other than a plain
// take or refusal (n ≤ 0, over burst) go through take.
//
// With g not nil, a successful take writes its Grant there (but for the
// key and the give-back counter, which the caller fills in) and a refusal
// zeroes it; a Grant returned by value would cost the hot path more than
// the take (it goes through the stack frames of every caller).
func (p *params) tryTake(s, h *atomic.Int64, ns int64, n int, g *Grant) (ok bool, remaining int64, why Refusal, retry bool) {
	if p.inf {
		if g != nil {
			*g = Grant{p: p, n: int64(max(n, 0))}
		}
		return true, p.n, Refusal{}, false
	}
	if n <= 0 || int64(n) > p.n || n > p.burst {
		r, retry := p.take(s, h, ns, n)
		if g != nil {
			*g = r.Grant
		}
		return r.OK, r.Remaining, refusalOf(&r), retry
	}
	now := p.nsToTicks(ns)
	inc := int64(n) * p.unit
	tat := s.Load()
	for {
		if tat == sealed {
			return false, 0, Refusal{}, true
		}
		base := max(tat, now)
		newTat := base + inc
		if newTat-now > p.tau {
			if g != nil {
				*g = Grant{}
			}
			return false, p.divUnit(p.tau - (base - now)), p.refusal(ns, newTat), false
		}
		raise(h, ns)
		if s.CompareAndSwap(tat, newTat) {
			if g != nil {
				*g = Grant{p: p, at: ns, end: newTat, n: int64(n)}
			}
			return true, p.divUnit(p.tau - (newTat - now)), Refusal{}, false
		}
		tat = reread(s)
	}
}

// A Refusal is the rest of the Result of a take that a try
// (Table.TryTakeGrantNs, Bucket.TryTakeGrantNs) refused, besides OK and
// Remaining: with it the refusal is decided once, without asking the
// bucket again for its Result. The zero Refusal is a success's.
type Refusal struct {
	retryAfter time.Duration
	flags      uint8 // refusedPermanent, refusedOverBurst, refusedBudgetFull
}

const (
	refusedPermanent = 1 << iota
	refusedOverBurst
	refusedBudgetFull
)

// Result returns the refused take's Result: OK false, Remaining remaining
// (the try's), and the RetryAfter, Permanent, OverBurst and BudgetFull the
// take reported.
func (r Refusal) Result(remaining int64) Result {
	return Result{Remaining: remaining, RetryAfter: r.retryAfter,
		Permanent: r.flags&refusedPermanent != 0, OverBurst: r.flags&refusedOverBurst != 0,
		BudgetFull: r.flags&refusedBudgetFull != 0}
}

// refusalOf is r's Refusal (zero when r is OK).
func refusalOf(r *Result) Refusal {
	if r.OK {
		return Refusal{}
	}
	var f uint8
	if r.Permanent {
		f |= refusedPermanent
	}
	if r.OverBurst {
		f |= refusedOverBurst
	}
	if r.BudgetFull {
		f |= refusedBudgetFull
	}
	return Refusal{retryAfter: r.RetryAfter, flags: f}
}

// refusal is take's report of a take of a count within the burst refused
// at ns, that would have left the state at newTat (as take decides it).
//
//go:noinline
func (p *params) refusal(ns, newTat int64) Refusal {
	if p.zero {
		return Refusal{flags: refusedPermanent}
	}
	return Refusal{retryAfter: p.waitUntil(ns, newTat-p.tau)}
}

// allow is take without the report: ok says whether n tokens were taken.
func (p *params) allow(s, h *atomic.Int64, ns int64, n int) (ok, retry bool) {
	if p.inf {
		return true, false
	}
	if n <= 0 {
		tat := s.Load()
		if tat == sealed {
			return false, true
		}
		return p.held(tat, p.nsToTicks(ns)) >= p.unit, false // a check: see take
	}
	if int64(n) > p.n || n > p.burst {
		return false, false
	}
	now := p.nsToTicks(ns)
	inc := int64(n) * p.unit
	tat := s.Load()
	for {
		if tat == sealed {
			return false, true
		}
		newTat := max(tat, now) + inc
		if newTat-now > p.tau {
			return false, false
		}
		raise(h, ns)
		if s.CompareAndSwap(tat, newTat) {
			return true, false
		}
		tat = reread(s)
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
func (p *params) charge(s, h *atomic.Int64, ns int64, n int) bool {
	if p.inf || n <= 0 {
		return true
	}
	now := p.nsToTicks(ns)
	inc := mulSat(int64(n), p.unit, maxDebt)
	tat := s.Load()
	for {
		if tat == sealed {
			return false
		}
		base := max(tat, now)
		newTat := min(base+inc, now+maxDebt)
		if newTat <= tat {
			return true // already at the debt bound: nothing moves backwards
		}
		raise(h, ns)
		if s.CompareAndSwap(tat, newTat) {
			return true
		}
		tat = reread(s)
	}
}

// bound is how many ticks of p may be given back for k of the tokens of g's
// take (0 ≤ k ≤ g.n), from a bucket with parameters p whose latest take
// instant is hi (p's ticks) and whose give-back counter reads q.
//
// Why it is safe. Picture every kept take as a segment of bucket time
// [start, end): it starts no earlier than its own instant, ends no later
// than its instant plus the capacity (that is what admitting it checked),
// and the segments are disjoint and end before the state. Those three
// facts alone bound what any window of instants [t1, t2] admits: its
// segments lie in [t1, t2+tau], so they hold at most tau + (t2-t1) ticks.
// Taking lays a new segment after the state. Giving back d ticks of a
// take shortens its segment by d and slides every later segment back by
// d; that keeps the facts true only if each later segment still starts
// no earlier than its instant. Later segments start at or after this
// take's end, which is at least its instant plus its outstanding ticks
// (a + c), and at least the end it was given less everything given back
// since (end − (q − g.q)), and no later take's instant exceeds hi. So
// d ≤ max(a + c, end − Δq) − hi keeps them all valid: a later take that
// found the bucket refilled and started over from its own instant makes
// the bound small or zero, and with no later take it is the whole take.
//
// A Grant of other parameters than p's (the bucket's rate or burst changed
// since, which raised hi to the instant of the change) is bounded by its
// instant and count alone: the state it left is in other ticks.
func (g *Grant) bound(k int64, p *params, hi, q int64) int64 {
	d := k * p.unit
	l := p.nsToTicks(g.at) + g.n*p.unit
	if g.p == p {
		if e := g.end - (q - g.q); e > l {
			l = e
		}
	}
	return max(min(d, l-hi), 0)
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
// rounded down). A bucket full at t is full under q.
func convert(p *params, tat int64, t time.Time, q *params) int64 {
	if p.inf || q.inf {
		return fresh
	}
	if tat == fresh {
		return fresh // never used: full at every instant under q too
	}
	h := p.held(tat, p.now(t))
	if h >= p.tau {
		// Full at t: a full bucket carries no state (the Table reclaims it,
		// Redis drops its key), so it is full under the new parameters too,
		// whatever their burst: full from t on, so that callers with older
		// instants still see no tokens they could not have had.
		return q.now(t)
	}
	// h in [tau-maxDebt-2·maxTick, tau]: scale by q.unit/p.unit, floor.
	nh := mulDivFloor(h, q.unit, p.unit)
	if nh > q.tau {
		nh = q.tau
	}
	if nh < q.tau-maxDebt {
		nh = q.tau - maxDebt // the debt bound of ChargeN: state ≤ now + maxDebt
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

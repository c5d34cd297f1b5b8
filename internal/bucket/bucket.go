package bucket

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/internal/monoclock"
	"golang.org/x/time/rate"
)

// ErrCostExceedsBurst matches (with errors.Is) the error WaitN returns when
// n is larger than the burst: such a request can never be admitted. It is
// the sentinel of github.com/sluicehq/sluice/errors.
var ErrCostExceedsBurst = slerrors.ErrCostExceedsBurst

// ErrWouldExceedDeadline is returned by Wait and WaitN when the wait needed
// would pass the context's deadline; nothing is consumed. It matches
// context.DeadlineExceeded with errors.Is.
var ErrWouldExceedDeadline = fmt.Errorf("bucket: wait would pass the context deadline: %w", context.DeadlineExceeded)

// Result is the outcome of a TakeN.
type Result struct {
	// OK reports whether the tokens were taken.
	OK bool
	// RetryAfter is, when !OK and !Permanent, the exact wait after which the
	// same TakeN succeeds if nothing else consumed in between. It is never
	// early: TakeN at t+RetryAfter succeeds. Zero when OK or Permanent.
	RetryAfter time.Duration
	// Remaining is the number of whole tokens left after this call (rounded
	// down; negative in debt).
	Remaining int64
	// OverBurst is set when n is larger than the burst: the request can
	// never be admitted and RetryAfter is 0. Permanent is set too.
	OverBurst bool
	// Permanent is set on a denial that no wait can cure: OverBurst, or a
	// rate of zero (no refill) with too few tokens left, or a Table whose
	// Budget has a bound of zero.
	Permanent bool
	// BudgetFull is set when a Table denied the take because the key has no
	// bucket and its Budget has no room for one; see Budget for the policy
	// and the RetryAfter reported.
	BudgetFull bool
	// Grant gives the tokens back (GiveBack) when OK; zero otherwise.
	Grant Grant
}

// Bucket is a token bucket of capacity Burst refilled at Limit tokens per
// second, implemented as GCRA on one atomic int64 updated by
// compare-and-swap: no locks and no allocation on the take path.
//
// Its API mirrors golang.org/x/time/rate.Limiter where they overlap. A new
// Bucket is full at whatever instant it is first used. Time never moves
// backwards inside a Bucket: a caller with an older instant than others sees
// at most the tokens the bucket held at that instant given everything taken
// since, never tokens already spent.
//
// Instants are measured from 2000-01-01 UTC; they are exact within about
// ±146 years of it (for slow rates much further) and saturate beyond, which
// stops the refill rather than admitting more.
//
// Bucket is safe for concurrent use. The zero value is not usable; call New.
type Bucket struct {
	c     atomic.Pointer[core]
	id    uint64       // tells its Grants from other buckets'
	mu    sync.Mutex   // serializes setters only
	clock sluice.Clock // nil: monoclock, read by Allow without building a Time
}

// cacheLine is the padding that keeps a contended word away from anything
// else.
const cacheLine = 64

// core is the parameters and state of a Bucket. The words written sit on
// a cache line of their own, so concurrent takes do not invalidate the
// line holding the parameters that every take reads: the state, the
// high-water instant of the takes (ns since epoch; raised before each
// take's compare-and-swap) and the give-back counter (ticks given back so
// far, written under the Bucket's mutex). See Grant.
type core struct {
	params
	_     [cacheLine - unsafe.Sizeof(params{})%cacheLine]byte
	tat   atomic.Int64
	high  atomic.Int64
	given atomic.Int64
	_     [cacheLine - 24]byte
}

// newCore returns the core of parameters p in state tat.
func newCore(p params, tat int64) *core {
	c := &core{params: p}
	c.tat.Store(tat)
	c.high.Store(math.MinInt64)
	return c
}

// bucketIDs numbers Buckets, so that a Grant knows its own.
var bucketIDs atomic.Uint64

// New returns a Bucket refilled at r tokens per second holding at most b
// tokens, full. Like rate.NewLimiter: rate.Inf allows everything whatever b;
// r ≤ 0 admits b tokens and then nothing; b ≤ 0 admits nothing. Finite rates
// above MaxRate are treated as MaxRate, bursts above MaxBurst as MaxBurst.
func New(r rate.Limit, b int, opts ...Option) *Bucket {
	bk := new(Bucket)
	bk.Init(r, b, opts...)
	return bk
}

// Init makes bk what New(r, b, opts...) returns, for a Bucket held by
// value (the public package's). It must be called once, before any other
// method.
func (bk *Bucket) Init(r rate.Limit, b int, opts ...Option) {
	cfg := newConfig(opts)
	bk.id, bk.clock = bucketIDs.Add(1), cfg.clock
	bk.c.Store(newCore(newParams(r, b), fresh))
}

// AllowNow is AllowN at the clock's now.
func (b *Bucket) AllowNow(n int) bool {
	if b.clock == nil {
		return b.allowNs(sysNow(), n)
	}
	return b.allowNs(nsOf(b.clock.Now()), n)
}

// TakeNow is TakeN at the clock's now.
func (b *Bucket) TakeNow(n int) Result { return b.TakeN(b.now(), n) }

// Allow reports whether one token may be taken now, and takes it if so.
// With the system clock, "now" is read from the monotonic clock, anchored to
// the wall clock when the package was initialised.
func (b *Bucket) Allow() bool {
	if b.clock == nil {
		return b.allowNs(sysNow(), 1)
	}
	return b.allowNs(nsOf(b.clock.Now()), 1)
}

// AllowN reports whether n tokens may be taken at t, and takes them if so.
// n ≤ 0 takes nothing and is allowed only while the bucket holds at least
// one whole token at t: a check, refused when the bucket is empty or in
// debt (stricter than x/time/rate, which refuses only a debt).
func (b *Bucket) AllowN(t time.Time, n int) bool {
	return b.allowNs(nsOf(t), n)
}

func (b *Bucket) allowNs(ns int64, n int) bool {
	for {
		c := b.c.Load()
		if ok, retry := c.allow(&c.tat, &c.high, ns, n); !retry {
			return ok
		}
		runtime.Gosched() // a setter is between seal and publish
	}
}

// TryTakeN is TakeN reporting only Result.OK and Result.Remaining, for
// hot paths that need the full Result only on a denial: it returns them in
// registers, where a Result goes through memory. A denial takes nothing,
// so a TakeN after it may be called for RetryAfter and the other fields
// (it may then succeed, and take, if tokens came back in between). What it
// takes cannot be given back: use TryTakeGrant for that.
func (b *Bucket) TryTakeN(t time.Time, n int) (ok bool, remaining int64) {
	return b.tryTake(t, n, nil)
}

// TryTakeGrant is TryTakeN that also writes the take's Grant to *g (zero
// on a denial), for hot paths that may give back: a later stacked limit
// denying, a request cancelled.
func (b *Bucket) TryTakeGrant(t time.Time, n int, g *Grant) (ok bool, remaining int64) {
	return b.tryTake(t, n, g)
}

// TryTakeGrantNs is TryTakeGrant at the instant ns (NowNs, NsOf),
// reporting a refusal's Result in why (see Table.TryTakeGrantNs).
func (b *Bucket) TryTakeGrantNs(ns int64, n int, g *Grant) (ok bool, remaining int64, why Refusal) {
	return b.tryTakeNs(ns, n, g)
}

func (b *Bucket) tryTake(t time.Time, n int, g *Grant) (ok bool, remaining int64) {
	ok, remaining, _ = b.tryTakeNs(nsOf(t), n, g)
	return ok, remaining
}

func (b *Bucket) tryTakeNs(ns int64, n int, g *Grant) (ok bool, remaining int64, why Refusal) {
	for {
		c := b.c.Load()
		q := c.given.Load() // before the state: see Grant.bound
		if ok, remaining, why, retry := c.tryTake(&c.tat, &c.high, ns, n, g); !retry {
			if ok && g != nil {
				g.q, g.key = q, b.id
			}
			return ok, remaining, why
		}
		runtime.Gosched() // a setter is between seal and publish
	}
}

// TakeN takes n tokens at t if the bucket holds them, and reports the
// outcome: on a denial, when to retry, or that no wait helps. On success
// Result.Grant gives the tokens back (GiveBack).
func (b *Bucket) TakeN(t time.Time, n int) Result { return b.TakeNs(nsOf(t), n) }

// TakeNs is TakeN at the instant ns (NowNs, NsOf).
func (b *Bucket) TakeNs(ns int64, n int) Result {
	for {
		c := b.c.Load()
		q := c.given.Load() // before the state: see Grant.bound
		if r, retry := c.take(&c.tat, &c.high, ns, n); !retry {
			r.Grant.q, r.Grant.key = q, b.id
			return r
		}
		runtime.Gosched() // a setter is between seal and publish
	}
}

// GiveBack returns n of the tokens that the take which made g took, and
// counts them off g: a stacked limit that denied after this one admitted,
// a cancelled request, an estimate larger than the actual cost. It is
// exact when nothing was taken since g's take, or when no take has used a
// later instant than g's, and otherwise may return fewer tokens, never
// more (see Grant): whatever the
// interleaving, the bucket never admits more than burst + rate·Δt in a
// window Δt.
//
// After a change of rate or burst (SetLimitAt, SetBurstAt, Reconfigure),
// a give-back of an earlier take returns at most what of it had not
// refilled by the instant of the change (the change re-expressed the
// tokens held then).
//
// It returns an error matching ErrGiveBack, and gives nothing back, when
// n is negative or more than g.Outstanding(), when g records no take
// (a denial's), or when g is from another bucket. n = 0 does nothing.
func (b *Bucket) GiveBack(g *Grant, n int) error {
	if err := g.check(n); err != nil {
		return err
	}
	if g.key != b.id {
		return errForeign
	}
	if n == 0 {
		return nil
	}
	b.mu.Lock() // one give-back at a time: see giveBack
	defer b.mu.Unlock()
	b.c.Load().giveBack(g, int64(n))
	return nil
}

// GrantFor returns the Grant of a take of n tokens at t that the caller
// recorded itself instead of keeping TakeN's Grant: a Backend settles a
// reservation taken in an earlier call from the instant and count it
// stored (stack.MemoryBackend does, as the Redis backend does in its
// script). A give-back through it is bounded like any other by the takes
// since t, but without the state the take left, so it may return less
// than the take's own Grant would; it trusts the caller that n tokens
// were taken at t and not given back, which is why TakeN's Grant is the
// better way whenever it can be kept.
func (b *Bucket) GrantFor(t time.Time, n int) Grant {
	c := b.c.Load()
	if n <= 0 {
		return Grant{}
	}
	ns := nsOf(t)
	return Grant{p: &c.params, key: b.id, at: ns, end: c.nsToTicks(ns), q: c.given.Load(), n: int64(n)}
}

// giveBack returns k of g's tokens to c. The Bucket's mutex must be held:
// give-backs are the only operations that move the state back, so while
// one runs the state only grows, and its compare-and-swap cannot succeed
// on a state that has since been changed and changed back. A take that
// changed the state before the swap raised the high-water instant before
// its own swap, so the load of the mark after the load of the state sees
// it.
func (c *core) giveBack(g *Grant, k int64) {
	if d := k * c.unit; !c.inf && g.p == &c.params && c.given.Load() == g.q && c.tat.CompareAndSwap(g.end, g.end-d) {
		// Nothing since the take (takes and charges only move the state
		// forward, give-backs move the counter and cannot run while we hold
		// the mutex): the tokens go back onto the state the take left,
		// exactly, whatever the quantised high-water mark says.
		c.given.Store(g.q + d)
		g.end -= d // a second give-back of this Grant is exact too
		g.q += d
	} else if !c.inf {
		for {
			tat := c.tat.Load()
			hi := c.nsToTicks(c.high.Load())
			q := c.given.Load()
			d := g.bound(k, &c.params, hi, q)
			if d <= 0 || tat <= hi { // nothing may come back, or full already
				break
			}
			// Never below the latest instant: a bucket full then stays full
			// for callers with older instants too (only ever stricter).
			if c.tat.CompareAndSwap(tat, max(tat-d, hi)) {
				c.given.Store(q + d)
				break
			}
		}
	}
	g.n -= k
}

// ChargeN takes n tokens at t unconditionally, putting the bucket into debt
// if it holds fewer: later takes wait until the debt is refilled. Use it
// when an actual cost turns out larger than the estimate taken. The debt is
// bounded (about 73 years of refill); it never overflows.
func (b *Bucket) ChargeN(t time.Time, n int) {
	for {
		c := b.c.Load()
		if c.charge(&c.tat, &c.high, nsOf(t), n) {
			return
		}
		runtime.Gosched()
	}
}

// Tokens returns the number of tokens available now.
func (b *Bucket) Tokens() float64 {
	return b.TokensAt(b.now())
}

// TokensAt returns the number of tokens available at t, negative in debt.
func (b *Bucket) TokensAt(t time.Time) float64 {
	for {
		c := b.c.Load()
		tat := c.tat.Load()
		if tat != sealed {
			return c.tokensAt(tat, t)
		}
		runtime.Gosched()
	}
}

// Limit returns the refill rate in tokens per second, as last set.
func (b *Bucket) Limit() rate.Limit { return b.c.Load().limit }

// Burst returns the capacity, as last set.
func (b *Bucket) Burst() int { return b.c.Load().burst }

// SetLimitAt changes the rate at t. The tokens held at t are kept.
func (b *Bucket) SetLimitAt(t time.Time, r rate.Limit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reconfigure(t, r, b.c.Load().burst)
}

// SetBurstAt changes the burst at t. The tokens held at t are kept, capped
// at the new burst.
func (b *Bucket) SetBurstAt(t time.Time, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reconfigure(t, b.c.Load().limit, n)
}

// Reconfigure changes rate and burst together at t, atomically with respect
// to concurrent takes. The tokens held at t are kept, capped at the new burst.
func (b *Bucket) Reconfigure(t time.Time, r rate.Limit, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reconfigure(t, r, n)
}

// SetLimit is SetLimitAt at the clock's now.
func (b *Bucket) SetLimit(r rate.Limit) { b.SetLimitAt(b.now(), r) }

// SetBurst is SetBurstAt at the clock's now.
func (b *Bucket) SetBurst(n int) { b.SetBurstAt(b.now(), n) }

// reconfigure seals the current state so no take can land on it, converts
// it to the new parameters and publishes the result. b.mu must be held.
func (b *Bucket) reconfigure(t time.Time, r rate.Limit, n int) {
	old := b.c.Load()
	var tat int64
	for {
		tat = old.tat.Load()
		if old.tat.CompareAndSwap(tat, sealed) {
			break
		}
	}
	np := newParams(r, n)
	nc := newCore(np, convert(&old.params, tat, t, &np))
	// The high-water instant carries over, raised to the change's instant:
	// a Grant of the old parameters is then bounded by what of its take
	// had not refilled by then (Grant.bound).
	nc.high.Store(max(old.high.Load(), nsOf(t)))
	b.c.Store(nc)
}

// Wait is WaitN(ctx, 1).
func (b *Bucket) Wait(ctx context.Context) error { return b.WaitN(ctx, 1) }

// WaitN blocks until n tokens can be taken, takes them and returns nil.
//
// It returns at once, consuming nothing, with an error matching
// ErrCostExceedsBurst when n is larger than the burst (unless the rate is
// rate.Inf), or ErrWouldExceedDeadline (which matches
// context.DeadlineExceeded) when the wait would pass ctx's deadline, or,
// without a deadline, an error matching errors.ErrThrottled when no wait
// helps (rate 0 and too few tokens). If ctx ends while waiting, the tokens
// are given back and ctx.Err() returned. The wait reads and sleeps on the
// bucket's clock (WithClock).
func (b *Bucket) WaitN(ctx context.Context, n int) error {
	c := b.c.Load()
	if !c.inf && n > 0 && (int64(n) > c.n || n > c.burst) {
		return fmt.Errorf("bucket: WaitN(n=%d) exceeds burst %d: %w", n, c.burst, ErrCostExceedsBurst)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for {
		now := b.now()
		limit := time.Duration(math.MaxInt64) // no deadline
		dl, hasDeadline := ctx.Deadline()
		if hasDeadline {
			limit = dl.Sub(now) // negative when already passed on this clock
		}
		c = b.c.Load()
		q := c.given.Load() // before the state: see Grant.bound
		wait, g, ok, retry := c.reserve(&c.tat, &c.high, now, n, limit)
		if retry {
			runtime.Gosched()
			continue
		}
		g.q, g.key = q, b.id
		if !ok {
			if wait < 0 && !hasDeadline { // rate 0 (or decades of debt): no wait helps
				return fmt.Errorf("bucket: WaitN(n=%d): the bucket does not refill enough for it (rate %v), no wait helps: %w",
					n, float64(c.limit), slerrors.ErrThrottled)
			}
			return ErrWouldExceedDeadline
		}
		if wait == 0 {
			return nil
		}
		if err := b.sleep(ctx, wait); err != nil {
			_ = b.GiveBack(&g, n) // the take's own grant: never refused
			return err
		}
		return nil
	}
}

// reserve takes n tokens at t from the future if the wait until they are
// due is at most limit. It returns the wait and the take's Grant (but for
// its counter); ok=false means nothing was taken (wait < 0 then means
// never). A reservation is a take at the instant its tokens are due: that
// is the instant it raises the high-water mark to and records in its
// Grant.
func (p *params) reserve(s, h *atomic.Int64, t time.Time, n int, limit time.Duration) (wait time.Duration, g Grant, ok, retry bool) {
	if p.inf || n <= 0 {
		return 0, Grant{p: p, n: int64(max(n, 0))}, true, false
	}
	ns := nsOf(t)
	now := p.nsToTicks(ns)
	inc := int64(n) * p.unit // n ≤ burst checked by the caller
	tat := s.Load()
	for {
		if tat == sealed {
			return 0, Grant{}, false, true
		}
		base := max(tat, now)
		if base-now > maxDebt-inc {
			return -1, Grant{}, false, false // decades of debt: never, in practice
		}
		newTat := base + inc
		wait = 0
		if newTat-p.tau > now {
			if p.zero {
				return -1, Grant{}, false, false
			}
			wait = p.waitUntil(ns, newTat-p.tau)
		}
		if wait > limit {
			return wait, Grant{}, false, false
		}
		due := satAdd(ns, int64(wait))
		raise(h, due)
		if s.CompareAndSwap(tat, newTat) {
			return wait, Grant{p: p, at: due, end: newTat, n: int64(n)}, true, false
		}
		tat = reread(s)
	}
}

// satAdd is a + b for b ≥ 0, saturated at the largest int64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// now is the clock's reading.
func (b *Bucket) now() time.Time { return clockNow(b.clock) }

// sleep sleeps d on the bucket's clock.
func (b *Bucket) sleep(ctx context.Context, d time.Duration) error {
	if b.clock == nil {
		return monoclock.Sleep(ctx, d)
	}
	return b.clock.Sleep(ctx, d)
}

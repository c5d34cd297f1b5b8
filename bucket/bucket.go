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

	slerrors "github.com/sluicehq/sluice/errors"
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

	// For RefundTake: the state the take left and the parameters it used.
	tat int64
	p   *params
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
	mu    sync.Mutex // serializes setters only
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	sys   bool // now is the system clock: Allow reads the monotonic clock only
}

// cacheLine is the padding that keeps a contended word away from anything
// else.
const cacheLine = 64

// core is the parameters and state of a Bucket. The state word, the only
// one written, sits on a cache line of its own, so concurrent takes do not
// invalidate the line holding the parameters that every take reads.
type core struct {
	params
	_   [cacheLine - unsafe.Sizeof(params{})%cacheLine]byte
	tat atomic.Int64
	_   [cacheLine - 8]byte
}

// New returns a Bucket refilled at r tokens per second holding at most b
// tokens, full. Like rate.NewLimiter: rate.Inf allows everything whatever b;
// r ≤ 0 admits b tokens and then nothing; b ≤ 0 admits nothing. Finite rates
// above MaxRate are treated as MaxRate, bursts above MaxBurst as MaxBurst.
func New(r rate.Limit, b int, opts ...Option) *Bucket {
	cfg := newConfig(opts)
	bk := &Bucket{now: cfg.now, sleep: cfg.sleep, sys: cfg.now == nil}
	if bk.sys {
		bk.now = sysTime
	}
	if bk.sleep == nil {
		bk.sleep = sysSleep
	}
	c := &core{params: newParams(r, b)}
	c.tat.Store(fresh)
	bk.c.Store(c)
	return bk
}

// Allow reports whether one token may be taken now, and takes it if so.
// With the system clock, "now" is read from the monotonic clock, anchored to
// the wall clock when the package was initialised.
func (b *Bucket) Allow() bool {
	if b.sys {
		return b.allowNs(sysNow(), 1)
	}
	return b.allowNs(nsOf(b.now()), 1)
}

// AllowN reports whether n tokens may be taken at t, and takes them if so.
// n ≤ 0 takes nothing and is allowed unless the bucket is in debt at t (as
// with x/time/rate).
func (b *Bucket) AllowN(t time.Time, n int) bool {
	return b.allowNs(nsOf(t), n)
}

func (b *Bucket) allowNs(ns int64, n int) bool {
	for {
		c := b.c.Load()
		if ok, retry := c.allow(&c.tat, ns, n); !retry {
			return ok
		}
		runtime.Gosched() // a setter is between seal and publish
	}
}

// TryTakeN is TakeN reporting only Result.OK and Result.Remaining, for
// hot paths that need the full Result only on a denial: it returns them in
// registers, where a Result goes through memory. A denial takes nothing, so
// a TakeN after it may be called for RetryAfter and the other fields (it
// may then succeed, and take, if tokens came back in between).
func (b *Bucket) TryTakeN(t time.Time, n int) (ok bool, remaining int64) {
	ns := nsOf(t)
	for {
		c := b.c.Load()
		if ok, remaining, retry := c.tryTake(&c.tat, ns, n); !retry {
			return ok, remaining
		}
		runtime.Gosched() // a setter is between seal and publish
	}
}

// TakeN takes n tokens at t if the bucket holds them, and reports the
// outcome: on a denial, when to retry, or that no wait helps.
func (b *Bucket) TakeN(t time.Time, n int) Result {
	for {
		c := b.c.Load()
		if r, retry := c.take(&c.tat, nsOf(t), n); !retry {
			return r
		}
		runtime.Gosched() // a setter is between seal and publish
	}
}

// RefundN gives back n tokens at t: the exact inverse of a successful TakeN
// or ChargeN of n at t. The bucket never holds more than its burst.
//
// It is exact when the bucket did not refill to full between the take and
// the refund. If it did (a take at an instant at least n/rate after the
// refunded take's found it full), the refunded tokens had already come back
// through the refill, and giving them back again lets up to n more through:
// refund promptly, at the take's instant, as a stack does when a later limit
// denies.
func (b *Bucket) RefundN(t time.Time, n int) {
	for {
		c := b.c.Load()
		if c.refund(&c.tat, nsOf(t), n) {
			return
		}
		runtime.Gosched()
	}
}

// RefundTake gives back up to n of the tokens taken by the TakeN that
// returned res (res.OK), but only those that have not come back by refill
// alone by t. Right after the take it is exactly RefundN. Later, once the
// bucket would have refilled past the take, it gives back less or nothing:
// a late refund never re-creates tokens that later takes already counted on,
// so settling a reservation long after it was made cannot over-admit.
//
// That holds when callers' instants come in order, as from one clock read
// at the take. A take since res at an instant later than both res's state
// and t (a caller whose instant runs ahead, or this one's read long before
// its take) may have found the bucket refilled and started over; this
// refund then gives back up to n tokens a second time. A Table's
// RefundTakeBytes guards against that; a Bucket does not yet.
func (b *Bucket) RefundTake(res Result, t time.Time, n int) {
	for {
		c := b.c.Load()
		if c.refundTake(&c.tat, res, nsOf(t), n) {
			return
		}
		runtime.Gosched()
	}
}

// ChargeN takes n tokens at t unconditionally, putting the bucket into debt
// if it holds fewer: later takes wait until the debt is refilled. Use it
// when an actual cost turns out larger than the estimate taken. The debt is
// bounded (about 73 years of refill); it never overflows.
func (b *Bucket) ChargeN(t time.Time, n int) {
	for {
		c := b.c.Load()
		if c.charge(&c.tat, nsOf(t), n) {
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
	nc := &core{params: newParams(r, n)}
	nc.tat.Store(convert(&old.params, tat, t, &nc.params))
	b.c.Store(nc)
}

// Wait is WaitN(ctx, 1).
func (b *Bucket) Wait(ctx context.Context) error { return b.WaitN(ctx, 1) }

// WaitN blocks until n tokens can be taken, takes them and returns nil.
//
// It returns at once, consuming nothing, with an error matching
// ErrCostExceedsBurst when n is larger than the burst (unless the rate is
// rate.Inf), or ErrWouldExceedDeadline (which matches
// context.DeadlineExceeded) when the wait would pass ctx's deadline. If ctx
// ends while waiting, the tokens are given back and ctx.Err() returned.
// The wait uses the bucket's clock and sleep (WithClock, WithSleep).
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
		wait, ok, retry := c.reserve(&c.tat, now, n, limit)
		if retry {
			runtime.Gosched()
			continue
		}
		if !ok {
			if wait < 0 && !hasDeadline { // rate 0 (or decades of debt) and no deadline: only ctx can end this
				<-ctx.Done()
				return ctx.Err()
			}
			return ErrWouldExceedDeadline
		}
		if wait == 0 {
			return nil
		}
		if err := b.sleep(ctx, wait); err != nil {
			b.RefundN(now, n)
			return err
		}
		return nil
	}
}

// reserve takes n tokens at t from the future if the wait until they are
// due is at most limit. It returns the wait; ok=false means nothing was
// taken (wait < 0 then means never).
func (p *params) reserve(s *atomic.Int64, t time.Time, n int, limit time.Duration) (wait time.Duration, ok, retry bool) {
	if p.inf || n <= 0 {
		return 0, true, false
	}
	ns := nsOf(t)
	now := p.nsToTicks(ns)
	inc := int64(n) * p.unit // n ≤ burst checked by the caller
	for {
		tat := s.Load()
		if tat == sealed {
			return 0, false, true
		}
		base := max(tat, now)
		if base-now > maxDebt-inc {
			return -1, false, false // decades of debt: never, in practice
		}
		newTat := base + inc
		dt := newTat - p.tau - now
		wait = 0
		if dt > 0 {
			if p.zero {
				return -1, false, false
			}
			wait = p.waitUntil(ns, newTat-p.tau)
		}
		if wait > limit {
			return wait, false, false
		}
		if s.CompareAndSwap(tat, newTat) {
			return wait, true, false
		}
	}
}

package bucket

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	ib "github.com/sluicehq/sluice/internal/bucket"
	"golang.org/x/time/rate"
)

// ErrCostExceedsBurst matches (with errors.Is) the error WaitN returns when
// n is larger than the burst: such a request can never be admitted. It is
// the sentinel of github.com/sluicehq/sluice/errors.
var ErrCostExceedsBurst = slerrors.ErrCostExceedsBurst

// ErrGiveBack matches (with errors.Is) every error of GiveBack: a Grant
// that records no take of this bucket, or a count it cannot give back.
// Nothing is given back when it is returned.
var ErrGiveBack = ib.ErrGiveBack

// Result is the outcome of a take (Bucket.TakeN, TakeAt; Table.TakeN,
// TakeAt). A denial always says what to do: wait RetryAfter, or, when
// Permanent is set, that no wait helps.
type Result struct {
	// OK reports whether the tokens were taken.
	OK bool
	// RetryAfter is, when !OK and !Permanent, the exact wait after which the
	// same take succeeds if nothing else consumed in between. It is never
	// early: TakeAt at t+RetryAfter succeeds. Zero when OK or Permanent.
	RetryAfter time.Duration
	// Remaining is the number of whole tokens left after this call (rounded
	// down).
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

func result(r ib.Result) Result {
	return Result{OK: r.OK, RetryAfter: r.RetryAfter, Remaining: r.Remaining, OverBurst: r.OverBurst,
		Permanent: r.Permanent, BudgetFull: r.BudgetFull, Grant: Grant{r.Grant}}
}

// A Grant is what a successful take leaves behind so that its tokens can be
// given back: Result.Grant. Give back through the Bucket or Table that made
// it (GiveBack); the Grant keeps count, so it never gives back more than it
// took, in one call or in several.
//
// A give-back is exact, returning every token asked for, when nothing has
// been taken from the bucket since the take, or when no take of the bucket
// (for a Table: of the key's shard) has used a later instant than the
// take's. Otherwise it returns what it can without handing out a token
// twice: a take since, at a later instant, may have found the bucket
// refilled and started over from its own instant, and the refill that
// covered this take's tokens is then already spent; the give-back then
// returns fewer tokens (down to none), never more. That keeps the promise
// of every bucket under any interleaving of takes and give-backs: within
// any window of instants Δt, at most burst + rate·Δt tokens are kept.
//
// A take running at the same moment as the give-back counts as one since:
// a Bucket's take announces its instant before it takes, so a give-back
// that overlaps a take at a later instant may return less, as it would
// after it.
//
// The zero Grant records nothing (a denied take's). A Grant is a value:
// copying it copies the count, so give back through one copy only.
type Grant struct{ g ib.Grant }

// Outstanding returns the number of tokens taken and not yet given back.
func (g *Grant) Outstanding() int64 { return g.g.Outstanding() }

// Bucket is a token bucket of capacity Burst refilled at Limit tokens per
// second, implemented as GCRA on one atomic int64 updated by
// compare-and-swap: no locks and no allocation on the take path.
//
// Its API mirrors golang.org/x/time/rate.Limiter where they overlap, with
// sluice's naming rule for time: a method whose name ends in At takes the
// instant as its first argument; every other method reads the Bucket's
// clock (WithClock). A new Bucket is full at whatever instant it is first
// used. Time never moves backwards inside a Bucket: a caller with an older
// instant than others sees at most the tokens the bucket held at that
// instant given everything taken since, never tokens already spent.
//
// Instants are measured from 2000-01-01 UTC; they are exact within about
// ±146 years of it (for slow rates much further) and saturate beyond, which
// stops the refill rather than admitting more.
//
// Bucket is safe for concurrent use. The zero value is not usable; call New.
type Bucket struct{ b ib.Bucket }

// New returns a Bucket refilled at r tokens per second holding at most b
// tokens, full.
//
// The meaning of each argument:
//   - r = rate.Inf allows every take, whatever b.
//   - r = 0 never refills: the bucket admits b tokens and then nothing, and
//     its denials are Permanent.
//   - r above 5e8 tokens per second is treated as 5e8 (a tick cannot be
//     shorter than 2 ns).
//   - b = 0 admits nothing: every take of one token or more is OverBurst
//     (Permanent); a take of n larger than b is OverBurst whatever the rate.
//   - b above 2⁶⁰ is treated as 2⁶⁰.
//
// New panics, naming the argument, when r is negative (rate.Limit(-1), -Inf)
// or NaN, or b is negative: these have no meaning, and a programmer error is
// better caught at construction than read as "never admit". A nil Option is
// ignored.
func New(r rate.Limit, b int, opts ...Option) *Bucket {
	checkArgs("bucket.New", r, b)
	cfg := newConfig(opts)
	bk := new(Bucket)
	bk.b.Init(r, b, ib.WithClock(cfg.clock))
	return bk
}

// checkArgs panics on a rate or burst without meaning (see New).
func checkArgs(fn string, r rate.Limit, b int) {
	checkRate(fn, r)
	checkBurst(fn, b)
}

func checkRate(fn string, r rate.Limit) {
	switch {
	case math.IsNaN(float64(r)):
		panic(fmt.Sprintf("%s: rate is NaN", fn))
	case r < 0:
		panic(fmt.Sprintf("%s: negative rate %v (0 is a bucket that never refills)", fn, float64(r)))
	}
}

func checkBurst(fn string, b int) {
	if b < 0 {
		panic(fmt.Sprintf("%s: negative burst %d (0 is a bucket that admits nothing)", fn, b))
	}
}

// Allow reports whether one token may be taken now, and takes it if so.
func (b *Bucket) Allow() bool { return b.b.Allow() }

// AllowN reports whether n tokens may be taken now, and takes them if so.
// See AllowAt.
func (b *Bucket) AllowN(n int) bool { return b.b.AllowNow(n) }

// AllowAt reports whether n tokens may be taken at t, and takes them if so.
// n larger than the burst is never allowed. n ≤ 0 takes nothing and is
// allowed only while the bucket holds at least one whole token at t: a
// check, refused while the bucket holds less than one whole token (stricter
// than x/time/rate, which allows it unless its tokens are negative).
func (b *Bucket) AllowAt(t time.Time, n int) bool { return b.b.AllowN(t, n) }

// TakeN takes n tokens now if the bucket holds them; see TakeAt.
func (b *Bucket) TakeN(n int) Result { return result(b.b.TakeNow(n)) }

// TakeAt takes n tokens at t if the bucket holds them, and reports the
// outcome: on a denial, the exact RetryAfter (never early), or Permanent
// when no wait helps (n larger than the burst: OverBurst; a rate of zero
// with too few tokens left). A denial takes nothing. On success
// Result.Grant gives the tokens back (GiveBack). n ≤ 0 is a check, as in
// AllowAt.
func (b *Bucket) TakeAt(t time.Time, n int) Result { return result(b.b.TakeN(t, n)) }

// GiveBack returns n of the tokens that the take which made g took, and
// counts them off g: a later limit denied after this one admitted, a
// request was cancelled, an estimate was larger than the actual cost. It
// is exact when nothing was taken since g's take, or when no take has used
// a later instant than g's, and otherwise may return fewer tokens, never
// more (see Grant).
//
// After a change of rate or burst (SetLimit, SetBurst), a give-back of an
// earlier take returns at most what of it had not refilled by the instant
// of the change.
//
// It returns an error matching ErrGiveBack, and gives nothing back, when
// n is negative or more than g.Outstanding(), when g records no take
// (a denial's), or when g is from another bucket. n = 0 does nothing.
func (b *Bucket) GiveBack(g *Grant, n int) error { return b.b.GiveBack(&g.g, n) }

// Wait is WaitN(ctx, 1).
func (b *Bucket) Wait(ctx context.Context) error { return b.b.WaitN(ctx, 1) }

// WaitN blocks until n tokens can be taken, takes them and returns nil. It
// reads and sleeps on the Bucket's clock (WithClock).
//
// It returns at once, consuming nothing, with an error matching
// ErrCostExceedsBurst when n is larger than the burst (unless the rate is
// rate.Inf), or an error matching context.DeadlineExceeded when the wait
// would pass ctx's deadline. When no wait can help (a rate of zero and too
// few tokens) and ctx has no deadline, it returns at once an error
// matching github.com/sluicehq/sluice/errors.ErrThrottled. If ctx ends
// while waiting, the tokens are given back and ctx.Err() returned.
func (b *Bucket) WaitN(ctx context.Context, n int) error { return b.b.WaitN(ctx, n) }

// Tokens returns the number of tokens available now.
func (b *Bucket) Tokens() float64 { return b.b.Tokens() }

// TokensAt returns the number of tokens available at t.
func (b *Bucket) TokensAt(t time.Time) float64 { return b.b.TokensAt(t) }

// Limit returns the refill rate in tokens per second, as last set.
func (b *Bucket) Limit() rate.Limit { return b.b.Limit() }

// Burst returns the capacity, as last set.
func (b *Bucket) Burst() int { return b.b.Burst() }

// SetLimit is SetLimitAt at the clock's now.
func (b *Bucket) SetLimit(r rate.Limit) {
	checkRate("bucket.Bucket.SetLimit", r)
	b.b.SetLimit(r)
}

// SetLimitAt changes the rate at t. The tokens held at t are kept. r has
// New's meaning, and the same values panic.
func (b *Bucket) SetLimitAt(t time.Time, r rate.Limit) {
	checkRate("bucket.Bucket.SetLimitAt", r)
	b.b.SetLimitAt(t, r)
}

// SetBurst is SetBurstAt at the clock's now.
func (b *Bucket) SetBurst(n int) {
	checkBurst("bucket.Bucket.SetBurst", n)
	b.b.SetBurst(n)
}

// SetBurstAt changes the burst at t. The tokens held at t are kept, capped
// at the new burst. n has New's meaning, and a negative n panics.
func (b *Bucket) SetBurstAt(t time.Time, n int) {
	checkBurst("bucket.Bucket.SetBurstAt", n)
	b.b.SetBurstAt(t, n)
}

// Option configures New and NewTable. A nil Option is ignored.
type Option interface{ apply(*config) }

type config struct {
	clock  sluice.Clock
	budget *Budget
}

type optionFunc func(*config)

func (f optionFunc) apply(cfg *config) { f(cfg) }

// WithClock sets the clock of the methods that read the current instant
// (every method whose name does not end in At; WaitN also sleeps on it).
// A nil c means the default: wall time advanced by the monotonic clock
// only, so a step of the system's clock never moves a bucket's time
// backwards, and a real timer. Tests pass a manual clock such as
// stack/limitertest.Clock, whose Sleep advances its own time.
func WithClock(c sluice.Clock) Option {
	return optionFunc(func(cfg *config) {
		if c != nil {
			cfg.clock = c
		}
	})
}

// WithBudget makes a Table count its live buckets against b, shared with
// every other Table given the same Budget. A nil b means the default: no
// Budget, the Table's live buckets are not bounded (idle ones are still
// reclaimed). New ignores this option. See Budget for the policy when it
// is full.
func WithBudget(b *Budget) Option {
	return optionFunc(func(cfg *config) {
		if b != nil {
			cfg.budget = b
		}
	})
}

func newConfig(opts []Option) config {
	var cfg config
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	return cfg
}

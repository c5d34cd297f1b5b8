package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/stack"
)

// States of a Backend (Backend.state).
const (
	stateUp     = iota // every call asks Redis
	stateDown          // Redis failed: local decisions (or errors) until a probe succeeds
	stateRejoin        // Redis is back: decisions need Redis and the local buckets
)

const (
	// reportEvery is the least interval between two FallbackError events
	// that only report the count of failures while in the fallback.
	reportEvery = time.Second
	// maxLocalKeys bounds the local buckets kept during an outage; a
	// decision that would need more fails with ErrUnavailable.
	maxLocalKeys = 1 << 16
	// maxNotices bounds the events waiting for a Take to deliver them.
	maxNotices = 16
)

// fallbackState is what a Backend knows of an outage, under mu.
//
// Local buckets hold the share of each limit given to this process. They
// start empty, never full: a process entering its fallback has not been
// given any of the tokens Redis held, so a switch adds no burst. Every unit
// a local decision takes is owed to Redis and charged there when it answers
// again (before this process decides on Redis), never below zero. Other
// processes may still be deciding locally, with debts Redis has not yet
// seen: for a rejoin period every decision must pass the local bucket as
// well as Redis, so that the fleet as a whole stays within its rate until
// all of it has rejoined and paid.
type fallbackState struct {
	mu          sync.Mutex
	failures    int64 // since the outage began
	local       int64 // local decisions since the outage began
	lastErr     error
	nextProbe   int64 // mono: before it, Redis is not asked while down
	lastReport  int64 // mono of the last FallbackError
	rejoinUntil int64 // mono: end of the rejoin period
	localBuckets
	notices []error
	// nodes are the cluster masters decided locally, or rejoining, by
	// address (WithSpread or WithPin on a cluster; see nodefallback.go).
	nodes map[string]*nodeFB
}

// localBuckets are the buckets a fallback decides with: mem holds them at
// the fallback's share, owed their Redis parameters and what they took.
//
// Every local bucket of one fallback starts empty at the same instant,
// since: the fallback's first local instant (its first decision,
// adjustment or rejoin after entering it), wherever the bucket is first
// used. A bucket first used later in the outage, or only in the rejoin
// period, then holds what the fallback's share refilled since, as if it
// had been made empty at the outage's start and left unused; it is made
// later only because no decision needed it before. That is what makes a
// bucket this process never decided locally pass its rejoin bound (after
// an outage of a burst's refill or more, it is full at the share) instead
// of denying for a burst's refill at the share, about a second: the
// spurious denials of issue #21. It creates no token: the argument that
// local decisions stay within the fleet's rate is per bucket and needs
// only that each process's local bucket starts empty no earlier than the
// outage, so that over any window inside the outage and rejoin period it
// admits at most share·r·Δt, never a burst. Starting it full instead (or
// deciding an unseen bucket on Redis alone) would let this process spend,
// in the rejoin period, refill that processes still deciding locally are
// also spending, not yet charged to Redis: up to a share of the burst
// more than one limiter.
type localBuckets struct {
	mem   *stack.MemoryBackend
	owed  map[string]*owedOp // the local buckets, by key
	since time.Time          // the instant every bucket of mem starts empty; zero: not yet
}

// renew replaces the local buckets by new, empty ones at the entry into a
// fallback, keeping the debts still owed. A bucket that owes nothing is
// forgotten: it is not in the new buckets, and a Redis (or a master)
// failing again and again keeps at most maxLocalKeys buckets in use, not
// that many per outage.
func (lb *localBuckets) renew() {
	lb.mem = stack.NewMemoryBackend()
	lb.since = time.Time{}
	if lb.owed == nil {
		lb.owed = map[string]*owedOp{}
	}
	for k, o := range lb.owed {
		if o.op.Cost <= 0 { // a credit is dropped: see takeOwed
			delete(lb.owed, k)
			continue
		}
		o.inMem = false
	}
}

// owedOp is the op of one local bucket (Redis parameters) with, as Cost,
// the units taken locally and not yet charged to Redis (negative: a credit,
// see takeOwed). inMem reports whether the bucket exists (drained) in the
// current fb.mem; taken is what that bucket has handed out (takes and
// charges less give-backs), the most a give-back may return to it. fails
// counts the payments of this debt that Redis refused with an error reply
// (see pay).
type owedOp struct {
	op    stack.Op
	inMem bool
	taken int64
	fails int
}

// rejoinPeriod is how long a process that reaches Redis again keeps its
// local buckets as a second bound: long enough for the other processes of
// the fleet, which probe Redis every probe interval, to rejoin and pay.
func (b *Backend) rejoinPeriod() int64 {
	return int64(max(time.Second, 4*(b.probe+b.timeout)))
}

// notice queues an event for the next Take, under fb.mu.
func (b *Backend) notice(e *stack.FallbackError) {
	fb := &b.fb
	if len(fb.notices) >= maxNotices {
		fb.notices = slices.Delete(fb.notices, 0, 1)
	}
	fb.notices = append(fb.notices, e)
	fb.lastReport = b.mono()
}

// takeNotices returns the queued events, under fb.mu.
func (b *Backend) takeNotices() []error {
	n := b.fb.notices
	b.fb.notices = nil
	return n
}

// fail records a failure that means Redis cannot decide now: the backend
// goes (or stays) down until the next probe.
func (b *Backend) fail(err error) {
	fb := &b.fb
	fb.mu.Lock()
	defer fb.mu.Unlock()
	now := b.mono()
	fb.nextProbe = now + int64(b.probe)
	fb.lastErr = err
	prev := b.state.Load()
	if prev != stateDown {
		b.state.Store(stateDown)
		fb.failures, fb.local = 0, 0
		// New local buckets, empty: those of a rejoin period may hold
		// units Redis denied and were given back.
		fb.renew()
		fb.failures++
		if b.share > 0 {
			b.notice(&stack.FallbackError{Active: true, Failures: fb.failures, Err: err})
		}
		return
	}
	fb.failures++
	if b.share > 0 && now-fb.lastReport >= int64(reportEvery) {
		b.notice(&stack.FallbackError{Active: true, Failures: fb.failures, Local: fb.local, Err: err})
	}
}

// downErr is the error of a call made while Redis is down without a local
// fallback; nil when this call should probe Redis.
func (b *Backend) downErr() error {
	fb := &b.fb
	fb.mu.Lock()
	defer fb.mu.Unlock()
	now := b.mono()
	if now >= fb.nextProbe {
		fb.nextProbe = now + int64(b.probe)
		return nil
	}
	return fmt.Errorf("%w (not retried for up to %v): %w", ErrUnavailable, b.probe, fb.lastErr)
}

// up returns to stateUp after a success when there is no local bucket to
// keep as a bound.
func (b *Backend) up() {
	fb := &b.fb
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if b.state.Load() == stateDown {
		b.state.Store(stateUp)
		fb.mem, fb.owed = nil, nil
	}
}

// scaledOp returns op at the fallback share of its rate and burst.
func (b *Backend) scaledOp(op stack.Op) stack.Op {
	op.Period = time.Duration(float64(op.Period) / b.share)
	if op.Burst > 0 {
		op.Burst = int64(math.Ceil(float64(op.Burst) * b.share))
	}
	return op
}

// undo returns the adjustment that gives back what op took in a take at
// takenAt: its cost negated, or its connections slot released.
func undo(op stack.Op, takenAt time.Time) stack.Op {
	op.Cost = -op.Cost
	if op.Conn {
		op.Cost = -1
	}
	op.TakenAt = takenAt
	return op
}

// localUndo returns the adjustments that give back a local take of sc at
// takenAt, less the shadow-denied ops (which took nothing).
func localUndo(sc []stack.Op, shadowDenied []int, takenAt time.Time) []stack.Op {
	out := make([]stack.Op, 0, len(sc))
	for i, op := range sc {
		if !slices.Contains(shadowDenied, i) {
			out = append(out, undo(op, takenAt))
		}
	}
	return out
}

// slotReleases returns the adjustments that release the connections slots
// a local take of sc at takenAt holds.
func slotReleases(sc []stack.Op, takenAt time.Time) []stack.Op {
	var out []stack.Op
	for _, op := range sc {
		if op.Conn {
			out = append(out, undo(op, takenAt))
		}
	}
	return out
}

func (b *Backend) scaled(ops []stack.Op) []stack.Op {
	out := make([]stack.Op, len(ops))
	for i, op := range ops {
		out[i] = b.scaledOp(op)
	}
	return out
}

// ensureLocal creates, empty, the local buckets of ops that do not exist
// yet, under fb.mu. It fails when that would exceed maxLocalKeys.
func (b *Backend) ensureLocal(ctx context.Context, at time.Time, ops []stack.Op) error {
	return b.ensureIn(&b.fb.localBuckets, ctx, at, ops)
}

// ensureIn is ensureLocal in the local buckets fb, under b.fb.mu.
func (b *Backend) ensureIn(fb *localBuckets, ctx context.Context, at time.Time, ops []stack.Op) error {
	var drain []stack.Op
	for _, op := range ops {
		o := fb.owed[op.Key]
		if o == nil {
			if len(fb.owed) >= maxLocalKeys {
				return fmt.Errorf("%w: %d local buckets in use, the most a fallback keeps", ErrUnavailable, maxLocalKeys)
			}
			o = &owedOp{}
			fb.owed[op.Key] = o
		}
		if !o.inMem {
			o.inMem = true
			o.taken = 0
			if s := b.scaledOp(op); s.Burst > 0 && !op.Conn {
				s.Cost = s.Burst // a new local bucket starts empty
				drain = append(drain, s)
			}
		}
		o.op.Key, o.op.Rate, o.op.Period, o.op.Burst = op.Key, op.Rate, op.Period, op.Burst
	}
	if fb.since.IsZero() {
		// Never moved earlier by a caller whose instant was read before
		// another's: a bucket drained at since and then asked at an
		// earlier instant only gets nothing from it (time never runs
		// backwards inside a bucket).
		fb.since = at
	}
	if len(drain) > 0 {
		// Empty at since, the same instant for every bucket of this
		// fallback (see localBuckets). Whether the caller still waits or
		// not: a bucket marked in mem and not drained would be made full
		// by its next decision.
		return fb.mem.Adjust(context.WithoutCancel(ctx), fb.since, drain)
	}
	return nil
}

// boundGiveBacks returns ops with each give-back (negative Cost) cut to
// what the current local bucket of its key has handed out, and to nothing
// for a take before that bucket began (since): a give-back during an
// outage returns no unit the fallback did not take. A take made in Redis
// before the outage took nothing from the local bucket; its give-back is
// not sent to Redis either (Redis is down), so that the units stay taken,
// never handed out twice. What is given back is no longer owed. Under
// b.fb.mu.
func (lb *localBuckets) boundGiveBacks(ops []stack.Op) []stack.Op {
	out := make([]stack.Op, len(ops))
	for i, op := range ops {
		out[i] = op
		if op.Cost >= 0 || op.Conn {
			continue
		}
		o := lb.owed[op.Key]
		back := int64(0)
		if o != nil && o.inMem && !op.TakenAt.IsZero() && !op.TakenAt.Before(lb.since) {
			back = min(-op.Cost, o.taken)
		}
		out[i].Cost = -back
		if o != nil {
			o.taken -= back
			o.op.Cost -= back
		}
	}
	return out
}

// takeLocal decides on the local buckets alone while Redis is down; what
// it takes is owed to Redis.
func (b *Backend) takeLocal(ctx context.Context, at time.Time, ops []stack.Op) (stack.Outcome, error) {
	fb := &b.fb
	fb.mu.Lock()
	defer fb.mu.Unlock()
	at = b.localTime(at)
	if fb.mem == nil { // came back meanwhile; decide locally all the same
		fb.mem, fb.owed = stack.NewMemoryBackend(), map[string]*owedOp{}
	}
	if err := b.ensureLocal(ctx, at, ops); err != nil {
		return stack.Outcome{}, err // the Stack hears only the error: events wait
	}
	out, err := fb.mem.Take(ctx, at, b.scaled(ops))
	if err != nil {
		return out, err
	}
	fb.local++
	if out.Denied < 0 {
		b.owe(ops, out.ShadowDenied)
	}
	if now := b.mono(); now-fb.lastReport >= int64(reportEvery) {
		b.notice(&stack.FallbackError{Active: true, Failures: fb.failures, Local: fb.local, Err: fb.lastErr})
	}
	out.Notices = b.takeNotices()
	return out, nil
}

// owe adds what ops took locally to the debt to Redis, under fb.mu.
func (b *Backend) owe(ops []stack.Op, skip []int) { b.fb.localBuckets.owe(ops, skip) }

func (lb *localBuckets) owe(ops []stack.Op, skip []int) {
	for i, op := range ops {
		if !op.Conn && !slices.Contains(skip, i) && op.Cost > 0 { // a slot is no charge
			o := lb.owed[op.Key]
			o.op.Cost += op.Cost
			o.taken += op.Cost
		}
	}
}

// adjustLocal applies a settlement to the local buckets while Redis is
// down: a charge is owed to Redis; a give-back returns at most what the
// local bucket took (boundGiveBacks) and lowers what is owed by as much.
func (b *Backend) adjustLocal(ctx context.Context, at time.Time, ops []stack.Op) error {
	fb := &b.fb
	fb.mu.Lock()
	defer fb.mu.Unlock()
	at = b.localTime(at)
	if fb.mem == nil {
		fb.mem, fb.owed = stack.NewMemoryBackend(), map[string]*owedOp{}
	}
	return b.adjustIn(ctx, at, &fb.localBuckets, ops)
}

// adjustIn applies ops to the local buckets lb and owes the charges, under
// fb.mu.
func (b *Backend) adjustIn(ctx context.Context, at time.Time, lb *localBuckets, ops []stack.Op) error {
	if err := b.ensureIn(lb, ctx, at, ops); err != nil {
		return err
	}
	ops = lb.boundGiveBacks(ops)
	if err := lb.mem.Adjust(ctx, at, b.scaled(ops)); err != nil {
		return err
	}
	lb.owe(ops, nil)
	return nil
}

// takeOwed returns the charges owed to Redis and clears them, under fb.mu.
// A credit (a negative Cost: units given back after a payment took the debt
// they were part of, while it is in flight or once it is paid) is kept, to
// net against that debt if the payment fails and it is owed again (reowe),
// or else against later charges of the same fallback: dropped, the units
// would be charged to Redis though given back. A new fallback (renew)
// drops it: a credit never crosses an outage, so at worst Redis keeps a
// unit given back, which errs on the side of denying.
func (b *Backend) takeOwed() []stack.Op { return b.fb.localBuckets.takeOwed() }

func (lb *localBuckets) takeOwed() []stack.Op {
	var ops []stack.Op
	for _, o := range lb.owed {
		if o.op.Cost > 0 {
			ops = append(ops, o.op)
			o.op.Cost = 0
		}
	}
	return ops
}

// reowe puts back charges that could not be made, under fb.mu.
func (b *Backend) reowe(ops []stack.Op) { b.fb.localBuckets.reowe(ops) }

func (lb *localBuckets) reowe(ops []stack.Op) {
	if lb.owed == nil {
		lb.owed = map[string]*owedOp{}
	}
	for _, op := range ops {
		o := lb.owed[op.Key]
		if o == nil {
			if len(lb.owed) >= maxLocalKeys {
				continue
			}
			o = &owedOp{op: op}
			o.op.Cost = 0
			lb.owed[op.Key] = o
		}
		o.op.Cost += op.Cost
	}
}

// maxPayTries is how many times a debt may be refused by an error reply
// (Redis answered, but not with a payment: a key holding something that is
// not a bucket, a permission denied) before it is dropped and reported
// with a *PaymentError. Each probe, the payment that begins a rejoin
// period and the one that ends it tries it again.
const maxPayTries = 3

// maxPaySplit bounds the calls one refused payment is split into, so that
// one bad key does not keep the other debts from being paid; debts beyond
// it stay owed for the next payment.
const maxPaySplit = 64

// PaymentError is an event for the Stack's error handler: charges that a
// local fallback owed Redis (units it admitted while Redis could not
// decide) that Redis refused three times with an error reply, and
// that are no longer offered. Redis was never charged for them.
type PaymentError struct {
	// Keys are the buckets (stack.Op.Key) whose debts were dropped, and
	// Units the units they owed, together.
	Keys  []string
	Units int64
	// Err is the latest refusal.
	Err error
}

func (e *PaymentError) Error() string {
	s := "sluice/redis: dropped " + strconv.FormatInt(e.Units, 10) + " units owed to Redis by a local fallback on " +
		strconv.Itoa(len(e.Keys)) + " buckets"
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the latest refusal.
func (e *PaymentError) Unwrap() error { return e.Err }

// refused puts back in lb charges that Redis refused with an error reply
// (cause), counting the refusal: a debt refused maxPayTries times is
// dropped and reported instead, and so is every one when final (the
// payment at the end of a rejoin period, after which none follows). Under
// fb.mu.
func (b *Backend) refused(lb *localBuckets, ops []stack.Op, cause error, final bool) {
	drop := &PaymentError{Err: cause}
	for _, op := range ops {
		if final {
			drop.Keys = append(drop.Keys, op.Key)
			drop.Units += op.Cost
			continue
		}
		lb.reowe([]stack.Op{op})
		o := lb.owed[op.Key]
		if o == nil {
			continue // no room to keep it (maxLocalKeys)
		}
		if o.fails++; o.fails < maxPayTries {
			continue
		}
		drop.Keys = append(drop.Keys, op.Key)
		drop.Units += o.op.Cost
		o.op.Cost, o.fails = 0, 0
	}
	if len(drop.Keys) > 0 {
		b.queue(drop)
	}
}

// payEach pays owed one debt at a time, after a payment of all of them was
// refused with an error reply: the debts Redis accepts are paid, and it
// returns those it refused (with the latest refusal) and those not tried
// (beyond maxPaySplit, or after Redis failed: err is then that failure).
func payEach(owed []stack.Op, pay func([]stack.Op) error) (refused, untried []stack.Op, cause, err error) {
	for i, op := range owed {
		if i >= maxPaySplit {
			return refused, append(untried, owed[i:]...), cause, nil
		}
		switch e := pay([]stack.Op{op}); {
		case e == nil:
		case errorsIsUnavailable(e):
			return refused, append(untried, owed[i:]...), cause, e
		default:
			refused, cause = append(refused, op), e
		}
	}
	return refused, untried, cause, nil
}

// pay charges Redis with what was decided locally, never below zero (a
// bucket Redis refilled to full while this process decided locally is
// emptied, not put in debt: the refill was what the local decisions used).
// It also writes a short-lived probe key, so that it fails as a decision
// would (out of memory, read-only) even when nothing is owed: it is the
// probe that ends an outage. Charges that fail because Redis cannot
// decide stay owed; the caller giving up (ctx cancelled, or its deadline
// passed) neither cuts the charge short nor passes for an answer (only the
// backend's timeout bounds it). A payment Redis refuses with an error
// reply answers the probe (Redis decides again) but pays nothing: the
// debts are paid one by one so that the others are charged, and those
// refused stay owed, tried again up to maxPayTries (see refused). (With
// the spread layout on a cluster each master has its own fallback, which
// pays with payParts.)
func (b *Backend) pay(ctx context.Context, owed []stack.Op, final bool) error {
	ctx = context.WithoutCancel(ctx)
	call := func(ops []stack.Op) error {
		keys, args, err := b.request(nil, "c", ops, time.Time{})
		if err != nil {
			return err
		}
		keys = append(keys, b.redisKey(probeKey))
		_, err = b.run(ctx, keys, args)
		return err
	}
	err := call(owed)
	if err == nil {
		return nil
	}
	if errorsIsUnavailable(err) {
		b.fb.mu.Lock()
		b.reowe(owed)
		b.fb.mu.Unlock()
		return err
	}
	all := owed
	var untried []stack.Op
	cause := err
	if len(owed) > 1 {
		var e, down error
		if all, untried, e, down = payEach(owed, call); e != nil {
			cause = e
		}
		if down != nil {
			err = down // Redis failed meanwhile: the probe fails
		}
	}
	b.fb.mu.Lock()
	b.reowe(untried)
	if len(all) > 0 {
		b.refused(&b.fb.localBuckets, all, cause, final)
	}
	b.fb.mu.Unlock()
	return err
}

// probeKey is the key pay writes; no bucket key starts with '~'.
const probeKey = "~probe"

// takeSlow decides while Redis is down or rejoining.
func (b *Backend) takeSlow(ctx context.Context, at time.Time, ops []stack.Op, keys []string, args []any) (stack.Outcome, error) {
	fb := &b.fb
	fb.mu.Lock()
	now := b.mono()
	switch b.state.Load() {
	case stateUp:
		fb.mu.Unlock()
		return b.takeCached(ctx, at, ops, false)
	case stateRejoin:
		if now >= fb.rejoinUntil {
			b.state.Store(stateUp)
			owed := b.takeOwed() // a local decision that raced the rejoin
			fb.mem, fb.owed = nil, nil
			notices := b.takeNotices()
			fb.mu.Unlock()
			if len(owed) > 0 {
				_ = b.pay(ctx, owed, true) // best effort: Redis just answered
				fb.mu.Lock()
				notices = append(notices, b.takeNotices()...) // a debt it dropped
				fb.mu.Unlock()
			}
			out, err := b.takeCached(ctx, at, ops, false)
			out.Notices = append(notices, out.Notices...)
			return out, err
		}
		fb.mu.Unlock()
		return b.takeBoth(ctx, at, ops, keys, args)
	}
	// Down.
	if now < fb.nextProbe {
		if b.share > 0 {
			fb.mu.Unlock()
			return b.takeLocal(ctx, at, ops)
		}
		err := fmt.Errorf("%w (not retried for up to %v): %w", ErrUnavailable, b.probe, fb.lastErr)
		fb.mu.Unlock()
		return stack.Outcome{}, err
	}
	fb.nextProbe = now + int64(b.probe) // this call probes; the others wait
	owed := b.takeOwed()
	fb.mu.Unlock()
	// The probe pays what was decided locally, before any decision on Redis.
	if err := b.pay(ctx, owed, false); err != nil && errorsIsUnavailable(err) {
		b.fail(err)
		if b.share > 0 {
			return b.takeLocal(ctx, at, ops)
		}
		return stack.Outcome{}, err
	}
	if b.share == 0 {
		b.up()
		return b.takeCached(ctx, at, ops, false)
	}
	b.rejoined(ctx)
	return b.takeBoth(ctx, at, ops, keys, args)
}

// takeBoth decides on the local buckets and then on Redis: both must
// allow. Used while rejoining.
func (b *Backend) takeBoth(ctx context.Context, at time.Time, ops []stack.Op, keys []string, args []any) (stack.Outcome, error) {
	fb := &b.fb
	lat := b.localTime(at)
	sc := b.scaled(ops)
	fb.mu.Lock()
	if fb.mem == nil {
		fb.mem, fb.owed = stack.NewMemoryBackend(), map[string]*owedOp{}
	}
	if err := b.ensureLocal(ctx, lat, ops); err != nil {
		fb.mu.Unlock()
		return stack.Outcome{}, err
	}
	mem := fb.mem
	loc, err := mem.Take(ctx, lat, sc)
	if err != nil || loc.Denied >= 0 {
		if err == nil { // the Stack hears only the error of a failed decision: events wait
			loc.Notices = b.takeNotices()
		}
		fb.mu.Unlock()
		return loc, err
	}
	fb.mu.Unlock()
	out, err := b.takeDirect(ctx, ops, keys, args)
	if err != nil && errorsIsUnavailable(err) {
		// Redis failed again: the local decision stands, and is owed.
		b.fail(err)
		fb.mu.Lock()
		if fb.owed != nil { // kept across the switch (the local buckets are new)
			if err := b.ensureLocal(ctx, lat, ops); err == nil {
				b.owe(ops, loc.ShadowDenied)
			}
			fb.local++
		}
		loc.Notices = b.takeNotices()
		fb.mu.Unlock()
		return loc, nil
	}
	if err != nil || out.Denied >= 0 {
		// Redis decided (or refused to): give the local units back.
		_ = mem.Adjust(context.WithoutCancel(ctx), lat, localUndo(sc, loc.ShadowDenied, lat)) // even if the caller gave up
	} else {
		// Redis holds the slots now: the local ones would only leak.
		if release := slotReleases(sc, lat); len(release) > 0 {
			_ = mem.Adjust(context.WithoutCancel(ctx), lat, release)
		}
	}
	if err == nil {
		fb.mu.Lock()
		out.Notices = append(out.Notices, b.takeNotices()...)
		fb.mu.Unlock()
	}
	return out, err
}

// rejoined ends an outage after Redis answered a probe: the rejoin period
// begins, and what was decided locally while the probe ran is paid.
func (b *Backend) rejoined(ctx context.Context) {
	fb := &b.fb
	fb.mu.Lock()
	if b.state.Load() != stateDown {
		fb.mu.Unlock()
		return
	}
	b.state.Store(stateRejoin)
	fb.rejoinUntil = b.mono() + b.rejoinPeriod()
	b.notice(&stack.FallbackError{Active: false, Failures: fb.failures, Local: fb.local})
	owed := b.takeOwed()
	fb.mu.Unlock()
	if len(owed) > 0 {
		if err := b.pay(ctx, owed, false); err != nil && errorsIsUnavailable(err) {
			b.fail(err)
		}
	}
}

func errorsIsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

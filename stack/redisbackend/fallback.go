package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
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
type localBuckets struct {
	mem  *stack.MemoryBackend
	owed map[string]*owedOp // the local buckets, by key
}

// renew replaces the local buckets by new, empty ones at the entry into a
// fallback, keeping the debts still owed. A bucket that owes nothing is
// forgotten: it is not in the new buckets, and a Redis (or a master)
// failing again and again keeps at most maxLocalKeys buckets in use, not
// that many per outage.
func (lb *localBuckets) renew() {
	lb.mem = stack.NewMemoryBackend()
	if lb.owed == nil {
		lb.owed = map[string]*owedOp{}
	}
	for k, o := range lb.owed {
		if o.op.Cost <= 0 {
			delete(lb.owed, k)
			continue
		}
		o.inMem = false
	}
}

// owedOp is the op of one local bucket (Redis parameters) with, as Cost,
// the units taken locally and not yet charged to Redis. inMem reports
// whether the bucket exists (drained) in the current fb.mem.
type owedOp struct {
	op    stack.Op
	inMem bool
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

// undo returns the adjustment that gives back what op took at at: its cost
// negated, or its connections slot released.
func undo(op stack.Op, at time.Time) stack.Op {
	op.Cost, op.TakenAt = -op.Cost, at
	if op.Conn {
		op.Cost = -1
	}
	return op
}

// localUndo returns the adjustments that give back a local take of sc at
// at, less the shadow-denied ops (which took nothing).
func localUndo(sc []stack.Op, shadowDenied []int, at time.Time) []stack.Op {
	out := make([]stack.Op, 0, len(sc))
	for i, op := range sc {
		if !slices.Contains(shadowDenied, i) {
			out = append(out, undo(op, at))
		}
	}
	return out
}

// slotReleases returns the adjustments that release the connections slots
// a local take of sc holds.
func slotReleases(sc []stack.Op) []stack.Op {
	var out []stack.Op
	for _, op := range sc {
		if op.Conn {
			out = append(out, undo(op, time.Time{}))
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
			if s := b.scaledOp(op); s.Burst > 0 && !op.Conn {
				s.Cost = s.Burst // a new local bucket starts empty
				drain = append(drain, s)
			}
		}
		o.op.Key, o.op.Rate, o.op.Period, o.op.Burst = op.Key, op.Rate, op.Period, op.Burst
	}
	if len(drain) > 0 {
		// Whether the caller still waits or not: a bucket marked in mem
		// and not drained would be made full by its next decision.
		return fb.mem.Adjust(context.WithoutCancel(ctx), at, drain)
	}
	return nil
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
		if !op.Conn && !slices.Contains(skip, i) { // a slot is no charge
			lb.owed[op.Key].op.Cost += op.Cost
		}
	}
}

// adjustLocal applies a settlement to the local buckets while Redis is
// down; a charge is owed to Redis, a refund lowers what is owed.
func (b *Backend) adjustLocal(ctx context.Context, at time.Time, ops []stack.Op) error {
	fb := &b.fb
	fb.mu.Lock()
	defer fb.mu.Unlock()
	at = b.localTime(at)
	if fb.mem == nil {
		fb.mem, fb.owed = stack.NewMemoryBackend(), map[string]*owedOp{}
	}
	if err := b.ensureLocal(ctx, at, ops); err != nil {
		return err
	}
	if err := fb.mem.Adjust(ctx, at, b.scaled(ops)); err != nil {
		return err
	}
	b.owe(ops, nil)
	return nil
}

// takeOwed returns the charges owed to Redis and clears them, under fb.mu.
func (b *Backend) takeOwed() []stack.Op { return b.fb.localBuckets.takeOwed() }

func (lb *localBuckets) takeOwed() []stack.Op {
	var ops []stack.Op
	for _, o := range lb.owed {
		if o.op.Cost > 0 {
			ops = append(ops, o.op)
		}
		o.op.Cost = 0
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

// pay charges Redis with what was decided locally, never below zero (a
// bucket Redis refilled to full while this process decided locally is
// emptied, not put in debt: the refill was what the local decisions used).
// It also writes a short-lived probe key, so that it fails as a decision
// would (out of memory, read-only) even when nothing is owed: it is the
// probe that ends an outage. Charges that fail because Redis cannot
// decide stay owed; the caller giving up (ctx cancelled, or its deadline
// passed) neither cuts the charge short nor passes for an answer (only the
// backend's timeout bounds it). (With the spread layout on a cluster each
// master has its own fallback, which pays with payParts.)
func (b *Backend) pay(ctx context.Context, owed []stack.Op) error {
	ctx = context.WithoutCancel(ctx)
	keys, args, err := b.request(nil, "c", owed)
	if err != nil {
		return err
	}
	keys = append(keys, b.redisKey(probeKey))
	_, err = b.run(ctx, keys, args)
	if err != nil && errorsIsUnavailable(err) {
		b.fb.mu.Lock()
		b.reowe(owed)
		b.fb.mu.Unlock()
	}
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
		return b.Take(ctx, at, ops)
	case stateRejoin:
		if now >= fb.rejoinUntil {
			b.state.Store(stateUp)
			owed := b.takeOwed() // a local decision that raced the rejoin
			fb.mem, fb.owed = nil, nil
			notices := b.takeNotices()
			fb.mu.Unlock()
			if len(owed) > 0 {
				_ = b.pay(ctx, owed) // best effort: Redis just answered
			}
			out, err := b.Take(ctx, at, ops)
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
	if err := b.pay(ctx, owed); err != nil && errorsIsUnavailable(err) {
		b.fail(err)
		if b.share > 0 {
			return b.takeLocal(ctx, at, ops)
		}
		return stack.Outcome{}, err
	}
	if b.share == 0 {
		b.up()
		return b.Take(ctx, at, ops)
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
		if release := slotReleases(sc); len(release) > 0 {
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
		if err := b.pay(ctx, owed); err != nil && errorsIsUnavailable(err) {
			b.fail(err)
		}
	}
}

func errorsIsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

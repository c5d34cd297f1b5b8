package redis

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/stack"
)

// With WithSpread or WithPin on a Redis Cluster and WithLocalFallback, the
// fallback is per master: a master that cannot decide has its buckets
// decided locally (a nodeFB), while the other masters go on deciding
// theirs in Redis. Each nodeFB follows the single-server fallback's rules
// (fallback.go): its local buckets start empty, at the fallback's share;
// what they take is owed and charged, down to zero, by the probe that ends
// its outage, through the cluster's current routing, so that after a
// failover the new master of the slots is charged; for a rejoin period the
// buckets it decided must pass both Redis and the local bucket; and the
// Stack's error handler hears each transition, with a *NodeError naming the
// master.
//
// A decision with buckets on a local master and on healthy ones is still
// all or nothing: each part is decided where it lives, then the first
// denial in evaluation order decides and what the other parts took is
// given back, in Redis or in the local buckets.

// NodeError is the Err of the *stack.FallbackError events of a per-master
// local fallback (WithSpread or WithPin on a Redis Cluster, with
// WithLocalFallback): it names the master whose buckets are decided
// locally, or again in Redis.
type NodeError struct {
	// Addr is the master's address when it failed (after a failover, its
	// slots have a new master, which the fallback charges); "" when no
	// master could be found for the keys (the cluster's routing failed),
	// or for the charges of an ended fallback that could not be made.
	Addr string
	// Err is the latest failure; nil in the event that ends the fallback.
	Err error
}

func (e *NodeError) Error() string {
	if e.Err == nil {
		return "sluice/redis: cluster node " + e.Addr + " decides again"
	}
	return "sluice/redis: cluster node " + e.Addr + ": " + e.Err.Error()
}

// Unwrap returns the latest failure.
func (e *NodeError) Unwrap() error { return e.Err }

// nodeFB is the local fallback of one cluster master, under b.fb.mu.
type nodeFB struct {
	addr        string
	down        bool // deciding locally; false: rejoining until rejoinUntil
	failures    int64
	local       int64
	lastErr     error
	nextProbe   int64  // mono: before it, a down master is not asked
	lastReport  int64  // mono of the last periodic event
	rejoinUntil int64  // mono
	probeKey    string // a Redis key in one of its slots: the probe writes there
	localBuckets
}

// How each part of a decision is decided (takeMixed).
const (
	partRedis = iota // in Redis
	partLocal        // in a nodeFB's local buckets
	partProbe        // probe the nodeFB's master first, then partBoth or partLocal
	partBoth         // rejoining: the local buckets, then Redis
)

// partResult is how a part was decided and where it took.
type partResult struct {
	out    stack.Outcome
	err    error
	redis  bool          // took in Redis
	mem    *localBuckets // took in these local buckets (nil: none)
	owedIn *localBuckets // what it took is owed in these
	ops    []stack.Op    // the part's ops (Redis parameters)
	at     time.Time     // the local instant
}

func addrOf(node *goredis.Client) string {
	if node == nil {
		return ""
	}
	return node.Options().Addr
}

// queue adds an event for the next Take, under fb.mu.
func (b *Backend) queue(e error) {
	fb := &b.fb
	if len(fb.notices) >= maxNotices {
		fb.notices = slices.Delete(fb.notices, 0, 1)
	}
	fb.notices = append(fb.notices, e)
}

// enterNode records that master addr cannot decide (err): its buckets are
// decided locally until a probe succeeds. probeKey is a Redis key of its
// slots, or "". It returns the master's nodeFB, under fb.mu.
func (b *Backend) enterNode(addr, probeKey string, err error) *nodeFB {
	fb := &b.fb
	now := b.mono()
	nf := fb.nodes[addr]
	if nf == nil {
		if fb.nodes == nil {
			fb.nodes = map[string]*nodeFB{}
		}
		nf = &nodeFB{addr: addr}
		fb.nodes[addr] = nf
		b.anyLocal.Store(true)
	}
	if probeKey != "" {
		nf.probeKey = probeKey
	}
	nf.lastErr = err
	nf.nextProbe = now + int64(b.probe)
	if !nf.down {
		// Entering (or leaving a rejoin period): new local buckets, empty.
		nf.down = true
		nf.failures, nf.local = 1, 0
		nf.renew()
		nf.lastReport = now
		b.queue(&stack.FallbackError{Active: true, Failures: 1, Err: &NodeError{Addr: addr, Err: err}})
		if b.cluster != nil {
			b.cluster.ReloadState(context.Background()) // a failover may move its slots
		}
		return nf
	}
	nf.failures++
	b.reportNode(nf, now)
	return nf
}

// downNode returns the nodeFB of master addr after a call to it failed
// (err): takePart has usually entered it already (nodeFailed); under
// fb.mu.
func (b *Backend) downNode(addr, probeKey string, err error) *nodeFB {
	if nf := b.fb.nodes[addr]; nf != nil && nf.down {
		if nf.probeKey == "" {
			nf.probeKey = probeKey
		}
		return nf
	}
	return b.enterNode(addr, probeKey, err)
}

// reportNode queues the periodic event of a down master, under fb.mu.
func (b *Backend) reportNode(nf *nodeFB, now int64) {
	if nf.down && now-nf.lastReport >= int64(reportEvery) {
		nf.lastReport = now
		b.queue(&stack.FallbackError{Active: true, Failures: nf.failures, Local: nf.local,
			Err: &NodeError{Addr: nf.addr, Err: nf.lastErr}})
	}
}

// nodeFor returns the nodeFB of master addr, or else one holding a local
// bucket of ops[idx] (its slots moved to addr), or nil; under fb.mu.
func (b *Backend) nodeFor(addr string, ops []stack.Op, idx []int) *nodeFB {
	if nf := b.fb.nodes[addr]; nf != nil {
		return nf
	}
	for _, nf := range b.fb.nodes {
		for _, i := range idx {
			if _, ok := nf.owed[ops[i].Key]; ok {
				return nf
			}
		}
	}
	return nil
}

// takeNodes decides on a cluster with a per-master local fallback.
func (b *Backend) takeNodes(ctx context.Context, at time.Time, ops []stack.Op, keys []string, args []any) (stack.Outcome, error) {
	if !b.anyLocal.Load() {
		out, err := b.takeParts(ctx, ops, keys, args, false)
		if err == nil || !errors.Is(err, ErrUnavailable) {
			return out, err
		}
		// A master failed during this decision, and what the others took
		// was given back: decided again, its part locally.
	}
	return b.takeMixed(ctx, at, ops, keys, args)
}

// takeMixed decides each part of a decision where it lives now: in Redis,
// in the local buckets of a master that cannot decide, or in both while it
// rejoins; then combines the parts all or nothing.
func (b *Backend) takeMixed(ctx context.Context, at time.Time, ops []stack.Op, keys []string, args []any) (stack.Outcome, error) {
	lat := b.localTime(at)
	takenAt := b.takenAt(args) // of the Redis parts, read before any is sent
	parts, err := b.partition(ctx, keys, false)
	if err != nil {
		// No routing at all: one part, decided by the fallback of "" (the
		// whole cluster), probed through the first key's slot.
		all := make([]int, len(ops))
		for i := range all {
			all[i] = i
		}
		parts = []part{{idx: all, slot: -1}}
	}
	kinds := make([]int, len(parts))
	nfs := make([]*nodeFB, len(parts))
	owed := make([][]stack.Op, len(parts))
	var ended []stack.Op // owed by fallbacks whose rejoin period ended
	fb := &b.fb
	fb.mu.Lock()
	now := b.mono()
	for j, p := range parts {
		addr := addrOf(p.node)
		nf := b.nodeFor(addr, ops, p.idx)
		if nf == nil && err != nil {
			nf = b.enterNode("", keys[0], err)
		}
		switch {
		case nf == nil:
			kinds[j] = partRedis
		case nf.down && now < nf.nextProbe:
			kinds[j] = partLocal
		case nf.down:
			nf.nextProbe = now + int64(b.probe) // this part probes; the others wait
			owed[j] = nf.takeOwed()
			kinds[j] = partProbe
		case now >= nf.rejoinUntil:
			ended = append(ended, nf.takeOwed()...) // a local decision that raced the rejoin
			delete(fb.nodes, nf.addr)
			b.anyLocal.Store(len(fb.nodes) > 0)
			nf, kinds[j] = nil, partRedis
		default:
			kinds[j] = partBoth
		}
		if nf != nil && nf.probeKey == "" && addr == nf.addr {
			nf.probeKey = keys[p.idx[0]]
		}
		nfs[j] = nf
	}
	// Fallbacks no part of this decision touched: one whose master is due
	// a probe is probed after the decision (its buckets may never be asked
	// for again, and every decision takes this slower path until it ends),
	// one whose rejoin period is over ends.
	type idleProbe struct {
		nf   *nodeFB
		owed []stack.Op
	}
	var idle []idleProbe
	for _, nf := range fb.nodes {
		if slices.Contains(nfs, nf) {
			continue
		}
		switch {
		case nf.down && now >= nf.nextProbe:
			nf.nextProbe = now + int64(b.probe)
			idle = append(idle, idleProbe{nf, nf.takeOwed()})
		case !nf.down && now >= nf.rejoinUntil:
			ended = append(ended, nf.takeOwed()...)
			delete(fb.nodes, nf.addr)
		}
	}
	b.anyLocal.Store(len(fb.nodes) > 0)
	fb.mu.Unlock()
	if len(ended) > 0 {
		_ = b.payParts(ctx, nil, ended) // best effort: Redis answered
	}
	defer func() {
		for _, p := range idle {
			b.probeNode(ctx, p.nf, p.owed)
		}
	}()

	res := make([]partResult, len(parts))
	decide := func(j int) {
		p := parts[j]
		sub := pick(ops, p.idx)
		k, a := subRequest(keys, args, p.idx)
		r := &res[j]
		r.ops, r.at = sub, lat
		nf := nfs[j]
		if kinds[j] == partProbe {
			if b.probeNode(ctx, nf, owed[j]) {
				kinds[j] = partBoth
			} else {
				kinds[j] = partLocal
			}
		}
		switch kinds[j] {
		case partRedis:
			r.out, r.err = b.takePart(ctx, sub, k, a, p)
			r.redis = r.err == nil && r.out.Denied < 0
			if r.err != nil && errors.Is(r.err, ErrUnavailable) {
				fb.mu.Lock()
				nf = b.downNode(addrOf(p.node), k[0], r.err)
				fb.mu.Unlock()
				b.takeLocalPart(ctx, nf, r)
			}
		case partLocal:
			b.takeLocalPart(ctx, nf, r)
		case partBoth:
			b.takeBothPart(ctx, nf, p, k, a, r)
		}
	}
	var wg sync.WaitGroup
	for j := 1; j < len(parts); j++ {
		wg.Go(func() { decide(j) })
	}
	decide(0)
	wg.Wait()

	outs := make([]stack.Outcome, len(parts))
	errs := make([]error, len(parts))
	for j := range res {
		outs[j], errs[j] = res[j].out, res[j].err
	}
	out, err := b.combineWith(ctx, ops, parts, outs, errs, func() { b.giveBackMixed(ctx, res, takenAt) })
	if err == nil {
		// The Stack hears only the error of a failed decision: the events
		// wait for the next decision that succeeds.
		fb.mu.Lock()
		out.Notices = append(out.Notices, b.takeNotices()...)
		fb.mu.Unlock()
	}
	return out, err
}

// takeLocalPart decides r.ops on nf's local buckets; what they take is
// owed.
func (b *Backend) takeLocalPart(ctx context.Context, nf *nodeFB, r *partResult) {
	fb := &b.fb
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if err := b.ensureIn(&nf.localBuckets, ctx, r.at, r.ops); err != nil {
		r.out, r.err = stack.Outcome{}, err
		return
	}
	out, err := nf.mem.Take(ctx, r.at, b.scaled(r.ops))
	out.Notices = nil
	r.out, r.err = out, err
	if err != nil {
		return
	}
	nf.local++
	if out.Denied < 0 {
		nf.owe(r.ops, out.ShadowDenied)
		// These buckets, even if nf is left and entered again before a
		// give-back: the new ones start empty and never held these units.
		lb := nf.localBuckets
		r.mem, r.owedIn = &lb, &lb
	}
	b.reportNode(nf, b.mono())
}

// takeBothPart decides r.ops on nf's local buckets and then in Redis
// (nf is rejoining): both must allow.
func (b *Backend) takeBothPart(ctx context.Context, nf *nodeFB, p part, keys []string, args []any, r *partResult) {
	fb := &b.fb
	sc := b.scaled(r.ops)
	fb.mu.Lock()
	if err := b.ensureIn(&nf.localBuckets, ctx, r.at, r.ops); err != nil {
		fb.mu.Unlock()
		r.out, r.err = stack.Outcome{}, err
		return
	}
	lb := nf.localBuckets // this rejoin's buckets, even if nf goes down again
	loc, err := lb.mem.Take(ctx, r.at, sc)
	fb.mu.Unlock()
	loc.Notices = nil
	if err != nil || loc.Denied >= 0 {
		r.out, r.err = loc, err
		return
	}
	out, err := b.takePart(ctx, r.ops, keys, args, p)
	if err != nil && errors.Is(err, ErrUnavailable) {
		// The master failed again: the local decision stands, owed in
		// the new local buckets (the ones it took from are dropped).
		fb.mu.Lock()
		nf = b.downNode(addrOf(p.node), keys[0], err)
		if b.ensureIn(&nf.localBuckets, ctx, r.at, r.ops) == nil {
			nf.owe(r.ops, loc.ShadowDenied)
			r.owedIn = &nf.localBuckets
		}
		nf.local++
		fb.mu.Unlock()
		r.out, r.err = loc, nil
		return
	}
	if err != nil || out.Denied >= 0 {
		// Redis decided (or refused to): the local units go back.
		fb.mu.Lock()
		_ = lb.mem.Adjust(context.WithoutCancel(ctx), r.at, localUndo(sc, loc.ShadowDenied, r.at)) // even if the caller gave up
		fb.mu.Unlock()
		r.out, r.err = out, err
		return
	}
	// Redis holds the slots now: the local ones would only leak.
	release := slotReleases(sc, r.at)
	fb.mu.Lock()
	if len(release) > 0 {
		_ = lb.mem.Adjust(context.WithoutCancel(ctx), r.at, release)
	}
	fb.mu.Unlock()
	r.out, r.err, r.redis = out, nil, true
	r.mem = &lb
}

// giveBackMixed gives back what the parts that passed took, in Redis (taken
// at takenAt) and in local buckets (at each part's local instant; what was
// owed for it is no longer owed).
func (b *Backend) giveBackMixed(ctx context.Context, res []partResult, takenAt time.Time) {
	var wg sync.WaitGroup
	fb := &b.fb
	for j := range res {
		r := &res[j]
		if r.err != nil || r.out.Denied >= 0 {
			continue
		}
		var back []int
		for l, op := range r.ops {
			if !slices.Contains(r.out.ShadowDenied, l) && (op.Cost > 0 || op.Conn) {
				back = append(back, l)
			}
		}
		if len(back) == 0 {
			continue
		}
		if r.redis {
			wg.Go(func() { _ = b.giveBack(context.WithoutCancel(ctx), r.ops, back, takenAt) })
		}
		if r.mem == nil && r.owedIn == nil {
			continue
		}
		fb.mu.Lock()
		var refund []stack.Op
		for _, l := range back {
			op := r.ops[l]
			if r.owedIn != nil && !op.Conn {
				if o := r.owedIn.owed[op.Key]; o != nil {
					// Not clamped at zero: a probe may have taken the debt
					// this unit is part of (takeOwed) after the take and
					// before this give-back. If its payment fails, reowe
					// adds the whole debt back onto this credit; clamped,
					// the unit would be charged to Redis though given back.
					o.op.Cost -= op.Cost
					o.taken = max(o.taken-op.Cost, 0)
				}
			}
			refund = append(refund, undo(b.scaledOp(op), r.at))
		}
		if r.mem != nil && r.mem.mem != nil {
			// Even if the caller gave up (often why the decision failed).
			_ = r.mem.mem.Adjust(context.WithoutCancel(ctx), r.at, refund)
		}
		fb.mu.Unlock()
	}
	wg.Wait()
}

// payParts charges Redis, through the cluster's current routing, with
// owed (taken locally for nf, or nil), never below zero; it also writes a
// probe key in nf's probe slot when nothing is owed, so that it fails as a
// decision on that master would. What fails to be charged stays owed.
// The debt is the backend's, not the caller's: a caller that gives up
// (ctx cancelled, or its deadline passed) neither cuts the charge short
// nor passes for an answer (only the backend's timeout bounds it).
func (b *Backend) payParts(ctx context.Context, nf *nodeFB, owed []stack.Op) error {
	ctx = context.WithoutCancel(ctx)
	if len(owed) == 0 {
		if nf == nil {
			return nil
		}
		b.fb.mu.Lock()
		pk := nf.probeKey // a decision may set it meanwhile
		b.fb.mu.Unlock()
		if pk == "" {
			return nil
		}
		_, err := b.run(ctx, []string{b.probeKeyFor(pk)}, []any{modePay, ""})
		return err
	}
	call := func(ops []stack.Op) ([]int, []int, error) {
		keys, args, err := b.request(nil, "c", ops, time.Time{})
		if err != nil {
			all := make([]int, len(ops))
			for i := range all {
				all[i] = i
			}
			return nil, all, err
		}
		return b.adjustPartsResult(ctx, ops, keys, args, false)
	}
	failed, refusedIdx, err := call(owed)
	still := pick(owed, failed)
	refused := pick(owed, refusedIdx)
	cause := err
	if len(refused) > 1 {
		// A part was refused with an error reply (a bad key refuses its
		// whole call): its debts one by one, so that the others are paid.
		var untried []stack.Op
		var e, down error
		refused, untried, e, down = payEach(refused, func(ops []stack.Op) error {
			_, _, err := call(ops)
			return err
		})
		still = append(still, untried...)
		if e != nil {
			cause = e
		}
		if down != nil && !errors.Is(err, ErrUnavailable) {
			err = down
		}
	}
	if len(still) == 0 && len(refused) == 0 {
		return err
	}
	b.fb.mu.Lock()
	defer b.fb.mu.Unlock()
	live := nf != nil && b.fb.nodes[nf.addr] == nf
	if len(still) > 0 {
		if live {
			nf.reowe(still)
		} else {
			// a rejoin that ended: owed by whichever fallback holds
			// these buckets, or by a new one of their master
			b.reoweAnywhere(still)
		}
	}
	if len(refused) > 0 {
		if live {
			b.refused(&nf.localBuckets, refused, cause, false)
		} else {
			b.refused(nil, refused, cause, true) // no payment follows the end of a rejoin
		}
	}
	return err
}

// reoweAnywhere puts back charges of a fallback that has ended, under
// fb.mu: in the fallback of "" (the cluster), probed with the first key.
func (b *Backend) reoweAnywhere(ops []stack.Op) {
	nf := b.fb.nodes[""]
	if nf == nil {
		nf = b.enterNode("", b.redisKey(ops[0].Key), errors.New("sluice/redis: charges for a local fallback failed"))
	}
	nf.reowe(ops)
}

// probeNode asks nf's master whether it decides again, by charging what
// was decided locally (owed, taken from nf), and reports whether it does:
// then nf's rejoin period begins.
func (b *Backend) probeNode(ctx context.Context, nf *nodeFB, owed []stack.Op) bool {
	if err := b.payParts(ctx, nf, owed); err != nil && errors.Is(err, ErrUnavailable) {
		b.fb.mu.Lock()
		b.enterNode(nf.addr, "", err)
		b.fb.mu.Unlock()
		if b.cluster != nil {
			b.cluster.ReloadState(ctx) // a replica may have taken over
		}
		return false
	}
	b.rejoinNode(nf)
	return true
}

// rejoinNode ends nf's outage after a probe succeeded: its rejoin period
// begins, and what was decided locally while the probe ran is charged.
func (b *Backend) rejoinNode(nf *nodeFB) {
	fb := &b.fb
	fb.mu.Lock()
	if !nf.down || fb.nodes[nf.addr] != nf {
		fb.mu.Unlock()
		return
	}
	nf.down = false
	nf.rejoinUntil = b.mono() + b.rejoinPeriod()
	b.queue(&stack.FallbackError{Active: false, Failures: nf.failures, Local: nf.local, Err: &NodeError{Addr: nf.addr}})
	owed := nf.takeOwed()
	fb.mu.Unlock()
	if len(owed) > 0 {
		if err := b.payParts(context.Background(), nf, owed); err != nil && errors.Is(err, ErrUnavailable) {
			fb.mu.Lock()
			b.enterNode(nf.addr, "", err)
			fb.mu.Unlock()
		}
	}
}

// adjustNodes applies an adjustment on a cluster with a per-master local
// fallback: the ops of a master that cannot decide (or whose call fails)
// are applied to its local buckets and owed, the others in Redis. A
// rejoining master's are applied in Redis only (its local buckets keep
// what they took: a bound, never a grant).
func (b *Backend) adjustNodes(ctx context.Context, at time.Time, ops []stack.Op, keys []string, args []any) error {
	lat := b.localTime(at)
	if !b.anyLocal.Load() {
		failed, err := b.adjustPartsFailed(ctx, ops, keys, args, false)
		if len(failed) == 0 || !errors.Is(err, ErrUnavailable) {
			return err
		}
		// Applied but for failed: those on their master's local buckets.
		sub := make([]stack.Op, len(failed))
		for j, i := range failed {
			sub[j] = ops[i]
		}
		rk := make([]string, len(failed))
		for j, i := range failed {
			rk[j] = keys[i]
		}
		return b.adjustLocalParts(ctx, lat, sub, rk, err)
	}
	parts, err := b.partition(ctx, keys, false)
	if err != nil {
		return b.adjustLocalParts(ctx, lat, ops, keys, err)
	}
	var first error
	for _, p := range parts {
		sub := pick(ops, p.idx)
		b.fb.mu.Lock()
		nf := b.nodeFor(addrOf(p.node), ops, p.idx)
		local := nf != nil && nf.down
		if local {
			err = b.adjustIn(ctx, lat, &nf.localBuckets, sub)
		}
		b.fb.mu.Unlock()
		if !local {
			k, a := subRequest(keys, args, p.idx)
			var failed []int
			failed, err = b.adjustPartsFailed(ctx, sub, k, a, false)
			if len(failed) > 0 && errors.Is(err, ErrUnavailable) {
				fs := make([]stack.Op, len(failed))
				fk := make([]string, len(failed))
				for j, i := range failed {
					fs[j], fk[j] = sub[i], k[i]
				}
				err = b.adjustLocalParts(ctx, lat, fs, fk, err)
			}
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// adjustLocalParts applies ops (Redis keys rkeys) whose call failed with
// cause to their masters' local buckets.
func (b *Backend) adjustLocalParts(ctx context.Context, at time.Time, ops []stack.Op, rkeys []string, cause error) error {
	byAddr := map[string][]int{}
	var order []string
	for i, k := range rkeys {
		addr := ""
		if b.cluster != nil {
			if n, err := b.cluster.MasterForKey(ctx, k); err == nil {
				addr = addrOf(n)
			}
		}
		if _, ok := byAddr[addr]; !ok {
			order = append(order, addr)
		}
		byAddr[addr] = append(byAddr[addr], i)
	}
	b.fb.mu.Lock()
	defer b.fb.mu.Unlock()
	for _, addr := range order {
		idx := byAddr[addr]
		nf := b.nodeFor(addr, ops, idx)
		if nf == nil || !nf.down {
			nf = b.enterNode(addr, rkeys[idx[0]], cause)
		}
		if err := b.adjustIn(ctx, at, &nf.localBuckets, pick(ops, idx)); err != nil {
			return err
		}
	}
	return nil
}

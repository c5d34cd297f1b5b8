package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/stack"
)

// A decision on Redis Cluster with the spread layout (WithSpread) is split
// into parts: the ops whose keys one master holds, in their order. Each
// part is one script call to its node (mode "x" with the cross-slot flag
// when the part spans several slots), the parts are sent concurrently, and
// their outcomes are combined as one all-or-nothing decision: a part that
// took while another denied is given back (Adjust with the opposite
// costs). A part whose node answers with a redirection (a slot moved or
// moving) or lacks the cross-slot flag is redone as one call per slot,
// through the cluster client, which follows MOVED and ASK.

// part is the ops of one decision held by one node (or one slot).
type part struct {
	idx  []int           // indexes into the decision's ops, in order
	slot int             // the slot of every key, or -1 when several
	node *goredis.Client // nil when split by slot
}

// errRegroup reports that a cross-slot call must be redone slot by slot.
var errRegroup = errors.New("sluice/redis: redo by slot")

// partition splits keys by the master that holds them, or by slot.
func (b *Backend) partition(ctx context.Context, keys []string, bySlot bool) ([]part, error) {
	parts := make([]part, 0, 3)
	for i, k := range keys {
		s := slot(k)
		var node *goredis.Client
		if !bySlot {
			for _, p := range parts {
				if p.slot == s {
					node = p.node
				}
			}
			if node == nil {
				n, err := b.cluster.MasterForKey(ctx, k)
				if err != nil {
					return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
				}
				node = n
			}
		}
		j := slices.IndexFunc(parts, func(p part) bool {
			if bySlot {
				return p.slot == s
			}
			return p.node == node
		})
		if j < 0 {
			parts = append(parts, part{slot: s, node: node})
			j = len(parts) - 1
		} else if parts[j].slot != s {
			parts[j].slot = -1
		}
		parts[j].idx = append(parts[j].idx, i)
	}
	return parts, nil
}

// subRequest returns the keys and arguments of the ops at idx: six fields
// an op, seven in an adjustment (see request).
func subRequest(keys []string, args []any, idx []int) ([]string, []any) {
	nf := 6
	if args[0] == "a" {
		nf = 7
	}
	k := make([]string, len(idx))
	a := make([]any, 2, 2+nf*len(idx))
	a[0], a[1] = args[0], args[1]
	for j, i := range idx {
		k[j] = keys[i]
		a = append(a, args[2+nf*i:2+nf*(i+1)]...)
	}
	return k, a
}

func pick(ops []stack.Op, idx []int) []stack.Op {
	out := make([]stack.Op, len(idx))
	for j, i := range idx {
		out[j] = ops[i]
	}
	return out
}

// runCross runs the script over keys of several slots of one node (mode
// "x"). A reply that says the keys are not all on the node, or that the
// server does not know the flag, is errRegroup.
func (b *Backend) runCross(ctx context.Context, keys []string, args []any) (*goredis.Cmd, error) {
	if b.noCross.Load() {
		return nil, errRegroup
	}
	xa := make([]any, 0, 2+len(keys)+len(args))
	xa = append(xa, "x", len(keys))
	for i := range keys {
		xa = append(xa, &keys[i]) // no allocation, unlike boxing a string
	}
	xa = append(xa, args...)
	cmd, err := b.runScript(ctx, gcraCross, keys[:1], xa)
	if err == nil || errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
		return cmd, err
	}
	var rerr goredis.Error
	if !errors.As(err, &rerr) || strings.Contains(err.Error(), "sluice: key") {
		return nil, err
	}
	msg := rerr.Error()
	if strings.Contains(msg, "shebang") || strings.Contains(msg, "compiling") || strings.Contains(msg, "flag") {
		b.noCross.Store(true) // a server before Redis 7: one call per slot from now on
	}
	b.cluster.ReloadState(ctx)
	return nil, errRegroup
}

// takeParts decides ops (keys and args built by request) over the nodes
// of the cluster: one call when they are on one node.
func (b *Backend) takeParts(ctx context.Context, ops []stack.Op, keys []string, args []any, bySlot bool) (stack.Outcome, error) {
	takenAt := b.takenAt(args) // before any part is sent
	parts, err := b.partition(ctx, keys, bySlot || b.noCross.Load())
	if err != nil {
		return stack.Outcome{}, err
	}
	if len(parts) == 1 {
		// One node: batched with the node's other concurrent decisions.
		if p := parts[0]; p.node != nil && b.maxBatch > 1 {
			if bt := b.nodeBatcher(p.node); bt != nil {
				c := getCall()
				c.ctx, c.keys, c.args, c.nops, c.ops, c.slot = ctx, keys, args, len(ops), ops, p.slot
				out, err := b.takeVia(bt, c)
				putCall(c)
				return out, err
			}
		}
		return b.takePart(ctx, ops, keys, args, parts[0])
	}
	outs := make([]stack.Outcome, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for j := 1; j < len(parts); j++ {
		wg.Go(func() {
			k, a := subRequest(keys, args, parts[j].idx)
			outs[j], errs[j] = b.takePart(ctx, pick(ops, parts[j].idx), k, a, parts[j])
		})
	}
	k, a := subRequest(keys, args, parts[0].idx)
	outs[0], errs[0] = b.takePart(ctx, pick(ops, parts[0].idx), k, a, parts[0])
	wg.Wait()
	return b.combine(ctx, ops, parts, outs, errs, takenAt)
}

// takePart decides the ops of one part (keys and args its own).
func (b *Backend) takePart(ctx context.Context, ops []stack.Op, keys []string, args []any, p part) (stack.Outcome, error) {
	if p.node != nil {
		if err := b.nodeDownErr(p.node); err != nil {
			return stack.Outcome{}, err
		}
	}
	var out stack.Outcome
	var err error
	if p.slot >= 0 {
		out, err = b.takeRedis(ctx, keys, args, len(ops))
	} else {
		var cmd *goredis.Cmd
		cmd, err = b.runCross(ctx, keys, args)
		switch {
		case errors.Is(err, errRegroup):
			return b.takeParts(ctx, ops, keys, args, true)
		case err == nil:
			out, err = parseCmd(cmd, len(ops))
		}
	}
	if p.node != nil {
		if errors.Is(err, ErrUnavailable) {
			b.nodeFailed(p.node, err)
		} else if b.anyDown.Load() {
			b.nodeFailed(p.node, nil)
		}
	}
	return out, err
}

func parseCmd(cmd *goredis.Cmd, nops int) (stack.Outcome, error) {
	vals, err := replyInts(cmd)
	if err != nil {
		return stack.Outcome{}, fmt.Errorf("sluice/redis: unexpected script reply: %w", err)
	}
	return parseOutcome(vals, nops)
}

// combine makes one all-or-nothing outcome of the parts' outcomes: the
// first denial in evaluation order decides, and what the other parts took
// is given back. A part that failed while none denied makes the decision
// fail: with a local fallback, which then decides and owes every op, what
// the others took is given back; without one (the Stack fails open or
// closed) it stays taken, so that a fail-open decision is still counted
// where it could be.
// takenAt is the instant of the takes sent with args, for their give-backs.
func (b *Backend) combine(ctx context.Context, ops []stack.Op, parts []part, outs []stack.Outcome, errs []error, takenAt time.Time) (stack.Outcome, error) {
	return b.combineWith(ctx, ops, parts, outs, errs, func() { b.giveBackParts(ctx, ops, parts, outs, errs, takenAt) })
}

// combineWith is combine with giveBack giving back what the parts that
// passed took.
func (b *Backend) combineWith(ctx context.Context, ops []stack.Op, parts []part, outs []stack.Outcome, errs []error, giveBack func()) (stack.Outcome, error) {
	first, fj := -1, -1
	var failed error
	for j, p := range parts {
		switch {
		case errs[j] != nil:
			if failed == nil || errors.Is(errs[j], ErrUnavailable) && !errors.Is(failed, ErrUnavailable) {
				failed = errs[j]
			}
		case outs[j].Denied >= 0:
			if g := p.idx[outs[j].Denied]; first < 0 || g < first {
				first, fj = g, j
			}
		}
	}
	out := stack.Outcome{Denied: -1}
	if first < 0 && failed != nil {
		if b.share > 0 {
			// The local fallback decides instead (and will owe what it
			// takes), or the decision fails: what the other nodes took is
			// given back.
			giveBack()
		}
		return stack.Outcome{}, failed
	}
	for j, p := range parts {
		if errs[j] != nil {
			continue
		}
		for _, s := range outs[j].ShadowDenied {
			if g := p.idx[s]; first < 0 || g < first {
				out.ShadowDenied = append(out.ShadowDenied, g)
			}
		}
	}
	slices.Sort(out.ShadowDenied)
	if first < 0 {
		out.Remaining = make([]int64, len(ops))
		for j, p := range parts {
			for l, i := range p.idx {
				out.Remaining[i] = outs[j].Remaining[l]
			}
		}
		return out, nil
	}
	out.Denied = first
	d := outs[fj]
	out.RetryAfter, out.Permanent, out.OverBurst = d.RetryAfter, d.Permanent, d.OverBurst
	permAt := -1
	for j, p := range parts {
		if j == fj || errs[j] != nil || outs[j].Denied < 0 || d.Permanent {
			continue
		}
		o := outs[j]
		if o.Permanent {
			if g := p.idx[o.Denied]; permAt < 0 || g < permAt {
				permAt = g
				out.Permanent, out.OverBurst, out.RetryAfter = true, o.OverBurst, 0
			}
		} else if permAt < 0 {
			out.RetryAfter = max(out.RetryAfter, o.RetryAfter)
		}
	}
	giveBack()
	return out, nil
}

// giveBackParts gives back what the parts that passed took.
func (b *Backend) giveBackParts(ctx context.Context, ops []stack.Op, parts []part, outs []stack.Outcome, errs []error, takenAt time.Time) {
	var wg sync.WaitGroup
	for j, p := range parts {
		if errs[j] != nil || outs[j].Denied >= 0 {
			continue
		}
		var back []int
		for l, i := range p.idx {
			if !slices.Contains(outs[j].ShadowDenied, l) && (ops[i].Cost > 0 || ops[i].Conn) {
				back = append(back, i)
			}
		}
		if len(back) == 0 {
			continue
		}
		wg.Go(func() { _ = b.giveBack(context.WithoutCancel(ctx), ops, back, takenAt) })
	}
	wg.Wait()
}

// giveBack gives back what a take of ops[idx] at takenAt took (a
// connections slot is released): all of it when no take since then may
// have started over from the bucket's state, less otherwise (see Adjust).
func (b *Backend) giveBack(ctx context.Context, ops []stack.Op, idx []int, takenAt time.Time) error {
	back := make([]stack.Op, len(idx))
	for j, i := range idx {
		back[j] = undo(ops[i], takenAt)
	}
	keys, args, err := b.request(nil, "a", back, time.Time{})
	if err != nil {
		return err
	}
	return b.adjustParts(ctx, back, keys, args, false)
}

// takenAt returns the instant of a take whose arguments are args (built by
// request), for its give-backs: the script's instant with WithClock;
// otherwise now, read before the take is sent, on this process's clock
// (see giveBackInstant).
func (b *Backend) takenAt(args []any) time.Time {
	if n, ok := argNum(args[1]); ok {
		return time.UnixMicro(n)
	}
	return time.Now()
}

// adjustParts runs an adjustment ("a") or a payment ("c", each call then
// also writes a probe key of its first slot) over the nodes, concurrently.
func (b *Backend) adjustParts(ctx context.Context, ops []stack.Op, keys []string, args []any, bySlot bool) error {
	_, err := b.adjustPartsFailed(ctx, ops, keys, args, bySlot)
	return err
}

// adjustPartsFailed is adjustParts that also returns the indexes of the ops
// whose call failed because Redis could not decide (the others were
// applied, or refused with an error reply).
func (b *Backend) adjustPartsFailed(ctx context.Context, ops []stack.Op, keys []string, args []any, bySlot bool) ([]int, error) {
	failed, _, err := b.adjustPartsResult(ctx, ops, keys, args, bySlot)
	return failed, err
}

// adjustPartsResult is adjustPartsFailed that also returns the indexes of
// the ops whose call Redis refused with an error reply (nothing of that
// call was applied: the script checks every bucket before it writes).
func (b *Backend) adjustPartsResult(ctx context.Context, ops []stack.Op, keys []string, args []any, bySlot bool) ([]int, []int, error) {
	parts, err := b.partition(ctx, keys, bySlot || b.noCross.Load())
	if err != nil {
		all := make([]int, len(ops))
		for i := range all {
			all[i] = i
		}
		return all, nil, err
	}
	errs := make([]error, len(parts))
	fails := make([][]int, len(parts)) // indexes into the part's ops
	refs := make([][]int, len(parts))  // the same, refused
	var wg sync.WaitGroup
	for j := range parts {
		run := func() {
			p := parts[j]
			k, a := subRequest(keys, args, p.idx)
			if len(parts) == 1 {
				k, a = keys, args
			}
			if a[0] == "c" {
				k = append(k, b.probeKeyFor(k[0]))
			}
			if p.slot >= 0 {
				_, errs[j] = b.run(ctx, k, a)
			} else if _, errs[j] = b.runCross(ctx, k, a); errors.Is(errs[j], errRegroup) {
				if a[0] == "c" {
					k = k[:len(k)-1]
				}
				fails[j], refs[j], errs[j] = b.adjustPartsResult(ctx, pick(ops, p.idx), k, a, true)
				return
			}
			if errs[j] != nil {
				all := make([]int, len(p.idx))
				for l := range all {
					all[l] = l
				}
				if errors.Is(errs[j], ErrUnavailable) {
					fails[j] = all
				} else {
					refs[j] = all
				}
			}
		}
		if j == len(parts)-1 {
			run()
		} else {
			wg.Go(run)
		}
	}
	wg.Wait()
	var failed error
	var failedIdx, refusedIdx []int
	for j, err := range errs {
		if err != nil && (failed == nil || errors.Is(err, ErrUnavailable)) {
			failed = err
		}
		for _, l := range fails[j] {
			failedIdx = append(failedIdx, parts[j].idx[l])
		}
		for _, l := range refs[j] {
			refusedIdx = append(refusedIdx, parts[j].idx[l])
		}
	}
	return failedIdx, refusedIdx, failed
}

// probeKeyFor returns the probe key in the slot of key.
func (b *Backend) probeKeyFor(key string) string {
	s := strings.IndexByte(key, '{')
	e := strings.IndexByte(key, '}')
	if s < 0 || e < s {
		return b.redisKey(probeKey)
	}
	return key[:e+1] + ":" + probeKey
}

// nodeDownErr returns, while a node is not asked again after failing
// (WithProbeInterval), the error of a call to it; nil when it may be asked.
func (b *Backend) nodeDownErr(node *goredis.Client) error {
	if !b.anyDown.Load() || b.share > 0 { // a local fallback: see takeMixed
		return nil
	}
	addr := node.Options().Addr
	b.nodesMu.Lock()
	defer b.nodesMu.Unlock()
	d, ok := b.nodesDown[addr]
	if !ok {
		return nil
	}
	now := b.mono()
	if now >= d.next {
		d.next = now + int64(b.probe) // this call probes; the others wait
		b.nodesDown[addr] = d
		return nil
	}
	return fmt.Errorf("%w (node %s not retried for up to %v): %w", ErrUnavailable, addr, b.probe, d.err)
}

// nodeFailed marks a node as not to be asked for the probe interval, or
// forgets it after a success (err nil).
func (b *Backend) nodeFailed(node *goredis.Client, err error) {
	addr := node.Options().Addr
	if b.share > 0 {
		// The master's buckets go to its local fallback (nodefallback.go);
		// a probe, not a success, ends it.
		if err != nil {
			b.fb.mu.Lock()
			b.enterNode(addr, "", err)
			b.fb.mu.Unlock()
		}
		return
	}
	b.nodesMu.Lock()
	defer b.nodesMu.Unlock()
	if err == nil {
		delete(b.nodesDown, addr)
		b.anyDown.Store(len(b.nodesDown) > 0)
		return
	}
	if b.nodesDown == nil {
		b.nodesDown = map[string]nodeDown{}
	}
	b.cluster.ReloadState(context.Background()) // a failover may have moved its slots
	if len(b.nodesDown) < maxNodesDown {
		b.nodesDown[addr] = nodeDown{next: b.mono() + int64(b.probe), err: err}
		b.anyDown.Store(true)
	}
}

// nodeDown is a failed node's state.
type nodeDown struct {
	next int64 // mono: before it the node is not asked
	err  error
}

// maxNodesDown bounds the failed nodes remembered.
const maxNodesDown = 1024

// takeDirect decides on Redis without the batcher.
func (b *Backend) takeDirect(ctx context.Context, ops []stack.Op, keys []string, args []any) (stack.Outcome, error) {
	if b.cluster != nil {
		return b.takeParts(ctx, ops, keys, args, false)
	}
	return b.takeRedis(ctx, keys, args, len(ops))
}

// adjustDirect runs an adjustment on Redis.
func (b *Backend) adjustDirect(ctx context.Context, ops []stack.Op, keys []string, args []any) error {
	if b.cluster != nil {
		return b.adjustParts(ctx, ops, keys, args, false)
	}
	_, err := b.run(ctx, keys, args)
	return err
}

// global reports whether a failure sends the whole backend down (to its
// fallback or to failing every call for the probe interval). With the
// spread layout on a cluster, only the failed node is: left alone for the
// probe interval, or decided by its own local fallback (takeNodes).
func (b *Backend) global() bool { return b.cluster == nil }

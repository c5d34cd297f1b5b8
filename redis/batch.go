package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/stack"
)

// maxInflight is how many script calls one Backend has in flight for
// takes; decisions that arrive while they are busy wait and go together in
// the next call.
const maxInflight = 2

// batcher groups the takes of concurrent callers into one script call
// (group commit): a caller that finds fewer than maxInflight calls in
// flight sends its own decision at once; one that does not waits, and the
// first waiter is handed the lead when a call returns, sending every
// waiting decision (up to maxBatch) in one call. Each decision is still
// evaluated atomically, in order; the batch only saves round trips and
// per-call server work.
type batcher struct {
	mu       sync.Mutex
	inflight int
	pending  []*batchCall
	node     *goredis.Client // a cluster node's batcher (spread layout); nil: the Backend's
}

// batchCall is one waiting decision.
type batchCall struct {
	ctx   context.Context
	keys  []string
	args  []any // request's: mode, now, then NF per op
	nops  int
	ops   []stack.Op // a node batcher's: to redo the decision slot by slot
	slot  int        // a node batcher's: the slot of every key, or -1
	now   int64      // the instant of the call that decided (callInstant)
	out   stack.Outcome
	err   error
	batch []*batchCall  // set when this call is handed the lead
	done  chan struct{} // one signal: the outcome is in, or the lead is handed over
}

// callPool keeps batchCalls, each with its channel (buffered: a signal
// never blocks its sender, and a pooled call's channel is always empty).
var callPool = sync.Pool{New: func() any { return &batchCall{done: make(chan struct{}, 1)} }}

func getCall() *batchCall { return callPool.Get().(*batchCall) }

// putCall returns c to the pool once its caller has read its outcome.
func putCall(c *batchCall) {
	done := c.done
	*c = batchCall{done: done}
	callPool.Put(c)
}

// takeBatchedAt is takeRedis through the batcher, returning also the
// instant of the call that decided (callInstant): what the near-cache of
// denials measures an entry from.
func (b *Backend) takeBatchedAt(ctx context.Context, keys []string, args []any, nops int) (stack.Outcome, int64, error) {
	if b.maxBatch <= 1 {
		at := b.callInstant(args[1])
		out, err := b.takeRedis(ctx, keys, args, nops)
		return out, at, err
	}
	c := getCall()
	c.ctx, c.keys, c.args, c.nops = ctx, keys, args, nops
	out, err := b.takeVia(&b.batch, c)
	now := c.now
	putCall(c)
	return out, now, err
}

// takeVia sends c's decision through batcher bt.
func (b *Backend) takeVia(bt *batcher, c *batchCall) (stack.Outcome, error) {
	bt.mu.Lock()
	if bt.inflight < maxInflight {
		bt.inflight++
		bt.mu.Unlock()
		b.sendOne(bt, c)
		b.handOff(bt)
		return c.out, c.err
	}
	bt.pending = append(bt.pending, c)
	bt.mu.Unlock()
	<-c.done
	if c.batch != nil { // this call leads the next batch
		b.runBatch(bt, c.batch)
		b.handOff(bt)
	}
	return c.out, c.err
}

// callInstant is, read just before a script call is sent, its instant
// in µs for the near-cache of denials: with WithClock the script's own
// (now, the call's instant argument), else this process's monotonic clock,
// which the script's reading of the server's TIME cannot precede.
func (b *Backend) callInstant(now any) int64 {
	if b.clock != nil {
		v, _ := argNum(now)
		return v
	}
	if b.dc == nil {
		return 0
	}
	return b.realMono() / 1000
}

// sendOne sends a lone decision.
func (b *Backend) sendOne(bt *batcher, c *batchCall) {
	c.now = b.callInstant(c.args[1])
	if bt.node == nil {
		c.out, c.err = b.takeRedis(c.ctx, c.keys, c.args, c.nops)
		return
	}
	c.out, c.err = b.takePart(c.ctx, c.ops, c.keys, c.args, part{slot: c.slot, node: bt.node})
}

// handOff ends a call in flight: the first waiting decision, if any, is
// handed the lead of a batch of the waiting decisions.
func (b *Backend) handOff(bt *batcher) {
	bt.mu.Lock()
	if len(bt.pending) == 0 {
		bt.inflight--
		bt.mu.Unlock()
		return
	}
	n := min(len(bt.pending), b.maxBatch)
	batch := make([]*batchCall, n)
	copy(batch, bt.pending)
	rest := copy(bt.pending, bt.pending[n:])
	clear(bt.pending[rest:])
	bt.pending = bt.pending[:rest]
	bt.mu.Unlock()
	lead := batch[0]
	lead.batch = batch
	lead.done <- struct{}{}
}

// runBatch sends batch in one script call (mode "m") and gives each call
// its outcome; the lead has already been signalled.
func (b *Backend) runBatch(bt *batcher, batch []*batchCall) {
	lead := batch[0]
	if len(batch) == 1 {
		b.sendOne(bt, lead)
		return
	}
	nkeys, nargs := 0, 3
	var now any = ""
	for _, c := range batch {
		nkeys += len(c.keys)
		nargs += 1 + len(c.args) - 2
		if t, ok := argNum(c.args[1]); ok {
			if n, ok := argNum(now); !ok || t > n {
				now = c.args[1] // the latest instant of the batch
			}
		}
	}
	keys := make([]string, 0, nkeys)
	args := make([]any, 0, nargs)
	args = append(args, "m", now, len(batch))
	for _, c := range batch {
		keys = append(keys, c.keys...)
		args = append(args, c.nops)
		args = append(args, c.args[2:]...)
	}
	// The batch is not the lead's alone: its caller giving up must not
	// fail the others.
	bctx := context.WithoutCancel(lead.ctx)
	callAt := b.callInstant(now) // the latest instant of the batch: the script's
	var cmd *goredis.Cmd
	var err error
	if bt.node == nil {
		cmd, err = b.run(bctx, keys, args)
	} else {
		cmd, err = b.runNodeBatch(bctx, bt.node, batch, keys, args)
		if errors.Is(err, errRegroup) {
			// A slot moved: each decision again, slot by slot.
			for k, c := range batch {
				c.out, c.err = b.takeParts(c.ctx, c.ops, c.keys, c.args, true)
				if k > 0 {
					c.done <- struct{}{}
				}
			}
			return
		}
	}
	var vals []int64
	if err == nil {
		if vals, err = replyInts(cmd); err != nil {
			err = fmt.Errorf("sluice/redis: unexpected script reply: %w", err)
		}
	}
	i := 0
	for k, c := range batch {
		c.now = callAt
		switch {
		case err != nil:
			c.err = err
		case i < len(vals) && vals[i] < 0 && c.nops == 1:
			// a one-op decision admitted: -1 - what its bucket holds
			vals[i] = -1 - vals[i]
			c.out, c.err = stack.Outcome{Denied: -1, Remaining: vals[i : i+1 : i+1]}, nil
			i++
		case i >= len(vals) || vals[i] < 0 || vals[i] > int64(len(vals)-i-1):
			c.err = fmt.Errorf("sluice/redis: malformed batch reply at decision %d of %d", k, len(batch))
			err = c.err
		default:
			n := int(vals[i])
			c.out, c.err = parseOutcome(vals[i+1:i+1+n], c.nops)
			i += 1 + n
		}
		if k > 0 {
			c.done <- struct{}{}
		}
	}
}

// runNodeBatch sends a batch of decisions that one cluster node holds:
// one call, with the cross-slot form when they span several slots.
func (b *Backend) runNodeBatch(ctx context.Context, node *goredis.Client, batch []*batchCall, keys []string, args []any) (*goredis.Cmd, error) {
	if err := b.nodeDownErr(node); err != nil {
		return nil, err
	}
	slot := batch[0].slot
	for _, c := range batch {
		if c.slot != slot {
			slot = -1
		}
	}
	var cmd *goredis.Cmd
	var err error
	if slot >= 0 {
		cmd, err = b.run(ctx, keys, args)
	} else {
		cmd, err = b.runCross(ctx, keys, args)
	}
	if errors.Is(err, ErrUnavailable) {
		b.nodeFailed(node, err)
	} else if err == nil && b.anyDown.Load() {
		b.nodeFailed(node, nil)
	}
	return cmd, err
}

// nodeBatcher returns the batcher of a cluster node, or nil when too many
// nodes have one already.
func (b *Backend) nodeBatcher(node *goredis.Client) *batcher {
	b.nodesMu.Lock()
	defer b.nodesMu.Unlock()
	bt := b.nodeBatch[node]
	if bt == nil {
		if len(b.nodeBatch) >= maxNodesDown {
			return nil
		}
		if b.nodeBatch == nil {
			b.nodeBatch = map[*goredis.Client]*batcher{}
		}
		bt = &batcher{node: node}
		b.nodeBatch[node] = bt
	}
	return bt
}

package redisbackend

import (
	"context"
	"fmt"
	"sync"

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
}

// batchCall is one waiting decision.
type batchCall struct {
	ctx   context.Context
	keys  []string
	args  []any // request's: mode, now, then NF per op
	nops  int
	out   stack.Outcome
	err   error
	batch []*batchCall // set when this call is handed the lead
	done  chan struct{}
}

// takeBatched is takeRedis through the batcher.
func (b *Backend) takeBatched(ctx context.Context, keys []string, args []any, nops int) (stack.Outcome, error) {
	if b.maxBatch <= 1 {
		return b.takeRedis(ctx, keys, args, nops)
	}
	bt := &b.batch
	bt.mu.Lock()
	if bt.inflight < maxInflight {
		bt.inflight++
		bt.mu.Unlock()
		out, err := b.takeRedis(ctx, keys, args, nops)
		b.handOff()
		return out, err
	}
	c := &batchCall{ctx: ctx, keys: keys, args: args, nops: nops, done: make(chan struct{})}
	bt.pending = append(bt.pending, c)
	bt.mu.Unlock()
	<-c.done
	if c.batch != nil { // this call leads the next batch
		b.runBatch(c.batch)
		b.handOff()
	}
	return c.out, c.err
}

// handOff ends a call in flight: the first waiting decision, if any, is
// handed the lead of a batch of the waiting decisions.
func (b *Backend) handOff() {
	bt := &b.batch
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
	close(lead.done)
}

// runBatch sends batch in one script call (mode "m") and gives each call
// its outcome; the lead's done channel is already closed.
func (b *Backend) runBatch(batch []*batchCall) {
	lead := batch[0]
	if len(batch) == 1 {
		lead.out, lead.err = b.takeRedis(lead.ctx, lead.keys, lead.args, lead.nops)
		return
	}
	nkeys, nargs := 0, 3
	var now any = ""
	for _, c := range batch {
		nkeys += len(c.keys)
		nargs += 1 + len(c.args) - 2
		if t, ok := c.args[1].(int64); ok {
			if n, ok := now.(int64); !ok || t > n {
				now = t // the latest instant of the batch
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
	cmd, err := b.run(context.WithoutCancel(lead.ctx), keys, args)
	var vals []int64
	if err == nil {
		if vals, err = cmd.Int64Slice(); err != nil {
			err = fmt.Errorf("redisbackend: unexpected script reply: %w", err)
		}
	}
	i := 0
	for k, c := range batch {
		switch {
		case err != nil:
			c.err = err
		case i >= len(vals) || vals[i] < 0 || vals[i] > int64(len(vals)-i-1):
			c.err = fmt.Errorf("redisbackend: malformed batch reply at decision %d of %d", k, len(batch))
			err = c.err
		default:
			n := int(vals[i])
			c.out, c.err = parseOutcome(vals[i+1:i+1+n], c.nops)
			i += 1 + n
		}
		if k > 0 {
			close(c.done)
		}
	}
}

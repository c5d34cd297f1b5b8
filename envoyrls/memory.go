package envoyrls

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/bucket"
	"github.com/sluicehq/sluice/stack"
)

// DefaultMaxBuckets bounds the live buckets of the in-memory backend unless
// WithMaxBuckets says otherwise. A bucket that has refilled is reclaimed;
// when the bound is reached and nothing can be reclaimed, a request that
// needs a new bucket is denied (never admitted beyond a limit); see
// bucket.Budget.
const DefaultMaxBuckets = 1 << 20

// maxTables bounds the distinct (rate, period, burst) triples the in-memory
// backend keeps a table for: the configuration's rules plus the limits
// requests send in their overrides.
const maxTables = 4096

// errTooManyRates is the in-memory backend's error when requests' limit
// overrides have asked for more distinct rates than it keeps tables for.
var errTooManyRates = errors.New("envoyrls: more than 4096 distinct rates (limit overrides) in memory")

type tableKey struct {
	rate, burst int64
	period      time.Duration
}

// memoryBackend is a stack.Backend on package bucket's lock-free tables:
// one Table per distinct rate, all sharing one Budget, so memory is bounded
// whatever the descriptors' values. Buckets are keyed by a digest of the op's
// key (the Table never stores the key itself).
type memoryBackend struct {
	budget *bucket.Budget
	mu     sync.Mutex
	tables atomic.Pointer[map[tableKey]*bucket.Table]
}

func newMemoryBackend(maxBuckets int) *memoryBackend {
	m := &memoryBackend{budget: bucket.NewBudget(maxBuckets)}
	m.tables.Store(&map[tableKey]*bucket.Table{})
	return m
}

func (m *memoryBackend) table(op *stack.Op) (*bucket.Table, error) {
	k := tableKey{rate: op.Rate, burst: op.Burst, period: op.Period}
	if t := (*m.tables.Load())[k]; t != nil {
		return t, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := *m.tables.Load()
	if t := cur[k]; t != nil {
		return t, nil
	}
	if len(cur) >= maxTables {
		return nil, errTooManyRates
	}
	lim := rate.Limit(0)
	if op.Period > 0 && op.Rate > 0 {
		lim = rate.Limit(float64(op.Rate) / op.Period.Seconds())
	}
	t := bucket.NewTable(lim, int(op.Burst), bucket.WithBudget(m.budget))
	next := make(map[tableKey]*bucket.Table, len(cur)+1)
	for kk, v := range cur {
		next[kk] = v
	}
	next[k] = t
	m.tables.Store(&next)
	return t, nil
}

// Take implements stack.Backend: all or nothing, in order. Units taken from
// the ops before a denying one are given back at the same instant, which
// package bucket makes an exact inverse (see bucket.Bucket.RefundN).
func (m *memoryBackend) Take(ctx context.Context, at time.Time, ops []stack.Op) (stack.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return stack.Outcome{}, err
	}
	out := stack.Outcome{Denied: -1, Remaining: make([]int64, len(ops))}
	tabs := make([]*bucket.Table, len(ops))
	taken := make([]bool, len(ops))
	giveBack := func(upto int) {
		for j := upto - 1; j >= 0; j-- {
			if taken[j] {
				tabs[j].RefundN(ops[j].Key, at, int(ops[j].Cost))
			}
		}
	}
	for i := range ops {
		op := &ops[i]
		t, err := m.table(op)
		if err != nil {
			giveBack(i)
			return stack.Outcome{}, err
		}
		tabs[i] = t
		res := t.TakeN(op.Key, at, int(op.Cost))
		if res.OK {
			taken[i] = op.Cost > 0
			out.Remaining[i] = res.Remaining
			continue
		}
		if op.Shadow {
			out.ShadowDenied = append(out.ShadowDenied, i)
			continue
		}
		out.Denied = i
		out.RetryAfter = res.RetryAfter
		out.Permanent = res.Permanent || res.OverBurst
		out.OverBurst = res.OverBurst && op.Burst > 0
		giveBack(i)
		// The wait after which every op would pass: probe the rest (take,
		// then give back at once).
		for j := i + 1; j < len(ops) && !out.Permanent; j++ {
			if ops[j].Shadow {
				continue
			}
			tj, err := m.table(&ops[j])
			if err != nil {
				break
			}
			r := tj.TakeN(ops[j].Key, at, int(ops[j].Cost))
			switch {
			case r.OK:
				if ops[j].Cost > 0 {
					tj.RefundN(ops[j].Key, at, int(ops[j].Cost))
				}
			case r.Permanent || r.OverBurst:
				out.Permanent, out.RetryAfter = true, 0
				out.OverBurst = r.OverBurst && ops[j].Burst > 0
			default:
				out.RetryAfter = max(out.RetryAfter, r.RetryAfter)
			}
		}
		out.Remaining = nil
		return out, nil
	}
	return out, nil
}

// Adjust implements stack.Backend: a positive cost is a forced charge, a
// negative one a refund that never fills a bucket above its burst.
func (m *memoryBackend) Adjust(ctx context.Context, at time.Time, ops []stack.Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range ops {
		op := &ops[i]
		t, err := m.table(op)
		if err != nil {
			return err
		}
		switch {
		case op.Cost > 0:
			t.ChargeN(op.Key, at, int(op.Cost))
		case op.Cost < 0:
			t.RefundN(op.Key, at, int(-op.Cost))
		}
	}
	return nil
}

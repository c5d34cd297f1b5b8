package envoyrls

import (
	"context"
	"errors"
	"github.com/sluicehq/sluice/internal/stackhook"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/internal/bucket"
	"github.com/sluicehq/sluice/stack"
)

// DefaultMaxBuckets bounds the live buckets of the in-memory backend unless
// WithMaxBuckets says otherwise. A bucket that has refilled is reclaimed;
// when the bound is reached and nothing can be reclaimed, a request that
// needs a new bucket is denied (never admitted beyond a limit); see
// bucket.Budget.
const DefaultMaxBuckets = 1 << 20

// maxTables bounds the tables the in-memory backend keeps: one per rule of
// the configuration, gateway rate, and distinct limit override (domain and
// rate) that requests have sent.
const maxTables = 4096

// errTooManyTables is the in-memory backend's error when requests' limit
// overrides have asked for more distinct rates than it keeps tables for.
var errTooManyTables = errors.New("envoyrls: more than 4096 rules and distinct limit overrides in memory")

type tableKey struct {
	rate, burst int64
	period      time.Duration
}

// memTable is one table and the parameters it was last configured with.
type memTable struct {
	t *bucket.Table
	k tableKey
}

// memoryBackend is a stack.Backend on package bucket's keyed tables (each
// take locks one shard of its table): one Table per rule (the "kind|scope" prefix of the op's key, see
// bucketKey), all sharing one Budget, so memory is bounded whatever the
// descriptors' values. Buckets are keyed by a digest of the op's key (the
// Table never stores the key itself). When a reload changes a rule's rate,
// its table is reconfigured and every bucket keeps the units it holds.
type memoryBackend struct {
	budget *bucket.Budget
	mu     sync.Mutex
	tables atomic.Pointer[map[string]*memTable]
}

func newMemoryBackend(maxBuckets int) *memoryBackend {
	m := &memoryBackend{budget: bucket.NewBudget(maxBuckets)}
	m.tables.Store(&map[string]*memTable{})
	return m
}

// scopeOf returns the "kind|len:scope" prefix of a key bucketKey built, or
// the whole key for any other.
func scopeOf(key string) string {
	i := strings.IndexByte(key, '|')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], ':')
	if j < 0 {
		return key
	}
	n, err := strconv.Atoi(key[i+1 : i+1+j])
	end := i + 1 + j + 1 + n
	if err != nil || n < 0 || end > len(key) {
		return key
	}
	return key[:end]
}

func limitOf(k tableKey) rate.Limit {
	if k.period > 0 && k.rate > 0 {
		return rate.Limit(float64(k.rate) / k.period.Seconds())
	}
	return 0
}

func (m *memoryBackend) table(at time.Time, op *stack.Op) (*bucket.Table, error) {
	k := tableKey{rate: op.Rate, burst: op.Burst, period: op.Period}
	scope := scopeOf(op.Key)
	if e := (*m.tables.Load())[scope]; e != nil && e.k == k {
		return e.t, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := *m.tables.Load()
	e := cur[scope]
	switch {
	case e != nil && e.k == k:
		return e.t, nil
	case e != nil: // a reload changed the rule's rate: keep what the buckets hold
		e.t.Reconfigure(at, limitOf(k), int(k.burst))
		e = &memTable{t: e.t, k: k}
	case len(cur) >= maxTables:
		return nil, errTooManyTables
	default:
		e = &memTable{t: bucket.NewTable(limitOf(k), int(k.burst), bucket.WithBudget(m.budget)), k: k}
	}
	next := make(map[string]*memTable, len(cur)+1)
	for kk, v := range cur {
		next[kk] = v
	}
	next[scope] = e
	m.tables.Store(&next)
	return e.t, nil
}

// Take implements stack.Backend: all or nothing, in order, decided by the
// Stack's own in-memory decider (reached through internal/stackhook) on this backend's tables.
// Units taken from the ops before a denying one are given back through
// their takes' Grants at once, which package bucket makes exact when no
// later take intervened. On a denial, Remaining holds what each bucket
// holds, nothing taken.
func (m *memoryBackend) Take(ctx context.Context, at time.Time, ops []stack.Op) (stack.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return stack.Outcome{}, err
	}
	out, err := decideOps(at, ops, func(op *stack.Op) (*bucket.Table, error) { return m.table(at, op) })
	if err != nil || out.Denied < 0 {
		return out, err
	}
	// What each bucket holds, nothing taken (a check takes nothing and
	// creates no bucket).
	out.Remaining = make([]int64, len(ops))
	for j := range ops {
		t, err := m.table(at, &ops[j])
		if err != nil {
			out.Remaining = nil
			break
		}
		out.Remaining[j] = t.TakeN(at, ops[j].Key, 0).Remaining
	}
	return out, nil
}

// Adjust implements stack.Backend: a positive cost is a forced charge; a
// negative one gives back units taken at op.TakenAt (is_negative_hits),
// bounded as any give-back by the takes since (bucket.Grant), and never
// beyond a full bucket. A zero TakenAt gives nothing back.
func (m *memoryBackend) Adjust(ctx context.Context, at time.Time, ops []stack.Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range ops {
		op := &ops[i]
		t, err := m.table(at, op)
		if err != nil {
			return err
		}
		switch {
		case op.Cost > 0:
			t.ChargeN(at, op.Key, int(op.Cost))
		case op.Cost < 0 && !op.TakenAt.IsZero():
			g := t.GrantFor(op.TakenAt, op.Key, int(-op.Cost))
			_ = t.GiveBack(op.Key, &g, int(-op.Cost))
		}
	}
	return nil
}

// decideOps is the Stack's own in-memory decider on a caller's tables
// (package stack sets the hook when it is initialized, before this package).
var decideOps = stackhook.DecideOps.(func(time.Time, []stack.Op, func(*stack.Op) (*bucket.Table, error)) (stack.Outcome, error))

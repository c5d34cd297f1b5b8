package stack_test

import (
	"context"
	"errors"
	"github.com/sluicehq/sluice/internal/stackhook"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucket"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// tableBackend is a Backend on its own Tables, one per op key, deciding
// through stackhook.DecideOps, as envoyrls' in-memory backend does.
type tableBackend struct {
	mu     sync.Mutex
	tables map[string]*bucket.Table
	fail   map[string]error // a key whose lookup fails
}

func (b *tableBackend) table(op *stack.Op) (*bucket.Table, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.fail[op.Key]; err != nil {
		return nil, err
	}
	lim := rate.Limit(0)
	if op.Period > 0 {
		lim = rate.Limit(float64(op.Rate) / op.Period.Seconds())
	}
	t := b.tables[op.Key]
	if t == nil {
		t = bucket.NewTable(lim, int(op.Burst))
		if b.tables == nil {
			b.tables = map[string]*bucket.Table{}
		}
		b.tables[op.Key] = t
	}
	return t, nil
}

func (b *tableBackend) Take(ctx context.Context, at time.Time, ops []stack.Op) (stack.Outcome, error) {
	return decideOps(at, ops, b.table)
}

func (b *tableBackend) Adjust(ctx context.Context, at time.Time, ops []stack.Op) error {
	for i := range ops {
		op := &ops[i]
		t, err := b.table(op)
		if err != nil {
			return err
		}
		switch {
		case op.Cost > 0:
			t.ChargeN(at, op.Key, int(op.Cost))
		case op.Cost < 0 && !op.TakenAt.IsZero():
			g := t.GrantFor(op.TakenAt, op.Key, int(max(op.Taken, -op.Cost)))
			_ = t.GiveBack(op.Key, &g, int(-op.Cost))
		}
	}
	return nil
}

// A Backend deciding through DecideOps decides as a Stack does in memory
// (every case but connections limits, which need a ConnBackend).
func TestConformanceThroughDecideOps(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, cfg stack.Config, clock *limitertest.Clock) sluice.Limiter {
		for _, l := range append(append([]stack.RateLimit(nil), cfg.RateLimits...), cfg.ServiceLimits...) {
			for _, e := range l.Entries {
				if len(e.Connections) > 0 {
					t.Skip("connections limits: DecideOps holds no slots")
				}
			}
		}
		s, err := stack.New(cfg, stack.WithClock(clock), stack.WithBackend(&tableBackend{}))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestDecideOpsLookupErrors(t *testing.T) {
	at := time.Unix(1000, 0)
	errDown := errors.New("no table")
	op := func(key string, burst int64, shadow bool) stack.Op {
		return stack.Op{Key: key, Rate: 1, Period: time.Second, Burst: burst, Cost: 1, Shadow: shadow}
	}
	for _, shadow := range []bool{false, true} {
		// A failed lookup before the decision: the error, and what was
		// taken before it given back.
		b := &tableBackend{fail: map[string]error{"bad": errDown}}
		out, err := b.Take(context.Background(), at, []stack.Op{op("a", 1, false), op("bad", 1, shadow)})
		if !errors.Is(err, errDown) || out.Denied != 0 || out.Remaining != nil {
			t.Fatalf("shadow=%v: Take = %+v, %v; want a zero Outcome and the lookup error", shadow, out, err)
		}
		if out, err := b.Take(context.Background(), at, []stack.Op{op("a", 1, false)}); err != nil || out.Denied != -1 {
			t.Fatalf("shadow=%v: a's unit was not given back: %+v, %v", shadow, out, err)
		}
	}
	// A failed lookup while probing after a denial ends the probing: the
	// denial stands, without the error.
	b := &tableBackend{fail: map[string]error{"bad": errDown}}
	ops := []stack.Op{op("a", 1, false), op("c", 1, false)}
	if out, err := b.Take(context.Background(), at, ops); err != nil || out.Denied != -1 {
		t.Fatalf("first take: %+v, %v", out, err)
	}
	out, err := b.Take(context.Background(), at, []stack.Op{op("a", 1, false), op("bad", 1, false)})
	if err != nil || out.Denied != 0 || out.RetryAfter != time.Second || out.Permanent {
		t.Fatalf("probe of a failing lookup: %+v, %v; want the denial of op 0, RetryAfter 1s", out, err)
	}
	// Connections slots are not a Table's.
	if _, err := decideOps(at, []stack.Op{{Key: "k", Burst: 1, Cost: 1, Conn: true}}, b.table); err == nil {
		t.Fatal("DecideOps took a connections op")
	}
}

// decideOps is stack's decider on a caller's tables, as envoyrls reaches it.
var decideOps = stackhook.DecideOps.(func(time.Time, []stack.Op, func(*stack.Op) (*bucket.Table, error)) (stack.Outcome, error))

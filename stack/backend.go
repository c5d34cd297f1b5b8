package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucket"
	"github.com/sluicehq/sluice/internal/stackhook"
	"github.com/sluicehq/sluice/match"
)

// Backend computes bucket decisions outside this process's memory, so that
// several processes share one limit (the Redis backend implements it).
// Users pass one to WithBackend; the rest of this doc, and Op, Outcome and
// ConnBackend, are for backend implementers. A
// Stack resolves entries and orders the applicable buckets itself, then hands
// the ordered list to the backend in one call per decision.
//
// Implementations must give every Op the GCRA semantics of package bucket:
// a new bucket is full, Burst is the capacity, Rate units refill per Period,
// Rate 0 blocks, a cost above the burst is a permanent denial, RetryAfter is
// never early. They must be safe for concurrent use.
type Backend interface {
	// Take takes ops[i].Cost from each bucket, in order, all or nothing: it
	// stops at the first non-shadow op that cannot give its cost, and then
	// nothing is taken from any bucket. A shadow op that cannot give its cost
	// is reported in Outcome.ShadowDenied and takes nothing; evaluation goes on.
	Take(ctx context.Context, at time.Time, ops []Op) (Outcome, error)
	// Adjust adds ops[i].Cost to each bucket without any check: a positive
	// cost is a forced charge (the bucket may go into debt). A negative cost
	// gives back units that a Take at ops[i].TakenAt took from that bucket
	// (ops[i].Taken of them still outstanding): at most -Cost of them, and
	// fewer when a take since then, at an instant later than TakenAt, may
	// have started over from the bucket's state (see package bucket's
	// Grant): a give-back never hands out a unit that was not refilled,
	// whatever the order in which processes' calls arrive. Given with no
	// take since, it returns all -Cost. Used to settle reservations.
	Adjust(ctx context.Context, at time.Time, ops []Op) error
}

// Op is one bucket of one decision. For backend implementers: a Stack
// hands its Backend the Ops of a decision; users never build one.
type Op struct {
	// Key identifies the bucket. It is stable for as long as the limit keeps
	// its id and dimension keys and the entry keeps its values, so state
	// survives a reload. It is readable:
	// "<rateLimitId>|<metric>|<rate index>|<entry values>|<request values>",
	// each value length-prefixed ("9:my-target", values of a group
	// separated by ","), so that no two buckets share a key whatever their
	// values contain; request values are those at the entry's "*"
	// positions, empty for an exact entry ("per-caller|requests|0|1:*|5:alice").
	Key string
	// Rate units refill every Period; Burst is the capacity.
	Rate   int64
	Period time.Duration
	Burst  int64
	// Cost is the number of units to take (Take) or add (Adjust).
	Cost int64
	// TakenAt is, for a give-back (Adjust with a negative Cost), the
	// instant of the Take that took the units (its at argument). A backend
	// bounds the give-back by it; the zero time gives nothing back.
	TakenAt time.Time
	// Taken is, for a give-back, how many units of the take at TakenAt were
	// still outstanding before it: a reservation's estimate when it is
	// reconciled for less. The give-back returns at most -Cost units, and
	// at most what is left of Taken once the refill between TakenAt and the
	// bucket's latest take is counted (as package bucket's Grant bounds
	// it), so a part of a take given back after a later take returns all
	// that the rule allows, not less. Zero (or less than -Cost) means the
	// whole take is given back: Taken is -Cost.
	Taken int64
	// Shadow marks an op of a shadow-mode limit: reported, never denying.
	Shadow bool
	// Conn marks a connections slot instead of a bucket (only for a
	// ConnBackend): Burst is the number of slots, Rate and Period are
	// unused. Take with Cost 1 holds a slot for Lease if fewer than Burst
	// are held (a denial has RetryAfter one second, or is permanent when
	// Burst is 0); the slot is freed by Adjust with Cost -1 and the same
	// Lease, or when TTL has passed since it was taken.
	Conn  bool
	Lease string
	TTL   time.Duration
}

// ConnBackend is, for backend implementers, a Backend that also holds
// connections slots (Op.Conn)
// shared by every process using it. A Stack with a backend that is not a
// ConnBackend, or whose SharesConnections reports false, refuses
// configurations with connections limits.
type ConnBackend interface {
	Backend
	SharesConnections() bool
}

// Outcome is the result of Backend.Take. For backend implementers: a
// Backend returns it; users see Decisions instead.
type Outcome struct {
	// Denied is the index of the op that denied, or -1 when all passed.
	Denied int
	// RetryAfter is, on a denial, the wait after which the same ops would
	// all pass (the longest any of them needs), never early.
	RetryAfter time.Duration
	// Permanent reports a denial no wait can cure; OverBurst that the cause
	// is a cost above a burst.
	Permanent, OverBurst bool
	// Remaining holds, when all passed, the whole units left in each op's
	// bucket (same indexes as ops; for a shadow op that could not pass,
	// what its bucket holds, nothing taken); it may be nil if the backend
	// does not report them. On a denial it may hold what each bucket holds, nothing
	// having been taken (the Redis backend reports it in the decision's one
	// round trip, so that a caller telling its client needs no second
	// call), or be nil.
	Remaining []int64
	// ShadowDenied lists the indexes of shadow ops that could not give their cost.
	ShadowDenied []int
	// Notices are events for the Stack's error handler (WithErrorHandler)
	// that do not change the decision, such as a *FallbackError when the
	// backend enters or leaves its local fallback.
	Notices []error
}

// MemoryBackend is a Backend on in-process buckets. A Stack does not need it
// (it decides in memory by default, faster); it exists to test the Backend
// contract without a server and as a reference for other implementations.
type MemoryBackend struct {
	mu      sync.Mutex
	buckets map[string]*memBucket
	leases  map[string]map[string]int64 // conn key → lease → expiry (ns)
}

var _ ConnBackend = (*MemoryBackend)(nil)

// SharesConnections implements ConnBackend.
func (m *MemoryBackend) SharesConnections() bool { return true }

// acquire holds a slot of op for op.Lease at at, if one is free.
func (m *MemoryBackend) acquire(at time.Time, op Op) (bool, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := at.UnixNano()
	held := m.leases[op.Key]
	for id, exp := range held {
		if exp <= now {
			delete(held, id)
		}
	}
	if int64(len(held)) >= op.Burst {
		return false, 0
	}
	if held == nil {
		if m.leases == nil {
			m.leases = map[string]map[string]int64{}
		}
		held = map[string]int64{}
		m.leases[op.Key] = held
	}
	held[op.Lease] = now + int64(op.TTL)
	return true, op.Burst - int64(len(held))
}

// release frees op.Lease; freeing twice does nothing.
func (m *MemoryBackend) release(op Op) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if held := m.leases[op.Key]; held != nil {
		delete(held, op.Lease)
		if len(held) == 0 {
			delete(m.leases, op.Key)
		}
	}
}

type memBucket struct {
	b                   *bucket.Bucket
	rate, burst, period int64
	// The Grant of the latest take and its instant: a give-back of a take
	// at that instant with nothing taken since is then exact (see Adjust).
	last   bucket.Grant
	lastAt time.Time
}

// NewMemoryBackend returns an empty MemoryBackend.
func NewMemoryBackend() *MemoryBackend { return &MemoryBackend{buckets: map[string]*memBucket{}} }

func (m *MemoryBackend) get(at time.Time, op Op) *bucket.Bucket {
	m.mu.Lock()
	defer m.mu.Unlock()
	lim := rate.Limit(0)
	if op.Period > 0 {
		lim = rate.Limit(float64(op.Rate) / op.Period.Seconds())
	}
	burst := op.Burst
	mb := m.buckets[op.Key]
	switch {
	case mb == nil:
		mb = &memBucket{b: bucket.New(lim, int(burst)), rate: op.Rate, burst: burst, period: int64(op.Period)}
		m.buckets[op.Key] = mb
	case mb.rate != op.Rate || mb.burst != burst || mb.period != int64(op.Period):
		mb.b.Reconfigure(at, lim, int(burst))
		mb.rate, mb.burst, mb.period = op.Rate, burst, int64(op.Period)
	}
	return mb.b
}

// Take implements Backend. It decides through the Stack's own decider
// (decide.go): the ops' buckets taken in order, the first refusal of a
// non-shadow op decided once, what was taken before it given back through
// its take's Grant, the ops after it probed for RetryAfter.
func (m *MemoryBackend) Take(ctx context.Context, at time.Time, ops []Op) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	out, items, _ := decideOps(at, ops, m, nil)
	if out.Denied >= 0 {
		for i := range ops[:out.Denied] {
			if !ops[i].Conn && !items[i].shadowed { // taken, then given back
				m.remember(ops[i].Key, time.Time{}, bucket.Grant{}) // given back: nothing to remember
			}
		}
		return out, nil
	}
	for i := range items {
		if items[i].taken && !ops[i].Conn {
			m.remember(ops[i].Key, at, items[i].grant)
		}
	}
	return out, nil
}

// decideOnTables decides ops at at as a Backend's Take must (all or nothing, in
// order; see Backend.Take), through the same in-memory decider as a
// Stack's plans and MemoryBackend, on buckets the caller keeps: op's bucket
// is the one keyed op.Key in the Table that table returns for op. The
// repository's other in-memory Backends (envoyrls', with its tables under
// one bucket bound) reach it through internal/stackhook, so that they
// decide exactly as a Stack does; it is not part of stack's API.
//
// table is called when the decider reaches the op (taken, or probed after
// a denial), not before. An error from it before the decision is made
// gives back what was taken and is returned with a zero Outcome; an error
// while probing after a denial ends the probing (RetryAfter covers the ops
// probed until then). On a denial Outcome.Remaining is nil. Ops must not
// be connections slots (Op.Conn): a Table holds no slots.
func init() { stackhook.DecideOps = decideOnTables }

func decideOnTables(at time.Time, ops []Op, table func(op *Op) (*bucket.Table, error)) (Outcome, error) {
	for i := range ops {
		if ops[i].Conn {
			return Outcome{}, errors.New("stack: decideOnTables: op " + strconv.Itoa(i) + " is a connections slot (Op.Conn); a Table holds none")
		}
	}
	sc := opsScratch.Get().(*opsBufs)
	out, _, err := sc.decide(at, ops, nil, table)
	clear(sc.items)
	clear(sc.rbs)
	clear(sc.conns)
	opsScratch.Put(sc)
	return out, err
}

// opsBufs are decideOps' buffers, reused by decideOnTables (an in-memory
// backend's hot path) so that a decision allocates no per-op state.
type opsBufs struct {
	items []item
	rbs   []rateBucket
	conns []memConn
}

var opsScratch = sync.Pool{New: func() any { return new(opsBufs) }}

// decideOps decides ops on fresh buffers: the items it returns are the caller's.
func decideOps(at time.Time, ops []Op, m *MemoryBackend, table func(*Op) (*bucket.Table, error)) (Outcome, []item, error) {
	var sc opsBufs
	return sc.decide(at, ops, m, table)
}

// decide decides ops through the decider on a MemoryBackend's buckets
// (m) or on the Tables that table supplies, and returns the Outcome (its
// Remaining nil on a denial) and the items decided.
func (sc *opsBufs) decide(at time.Time, ops []Op, m *MemoryBackend, table func(*Op) (*bucket.Table, error)) (Outcome, []item, error) {
	if cap(sc.items) < len(ops) {
		sc.items, sc.rbs, sc.conns = make([]item, len(ops)), make([]rateBucket, len(ops)), make([]memConn, len(ops))
	}
	items, rbs, conns := sc.items[:len(ops)], sc.rbs[:len(ops)], sc.conns[:len(ops)]
	sc.items, sc.rbs, sc.conns = items, rbs, conns
	var lookupErr error
	for i := range ops {
		op := &ops[i]
		rb := &rbs[i]
		rb.shadow, rb.burst, rb.metric = op.Shadow, op.Burst, sluice.MetricRequests
		if op.Conn {
			rb.metric, rb.kind = sluice.MetricConnections, kindConnections
		}
		// The op's bucket is looked up when the decider reaches it, not
		// before: a bucket named under other parameters is converted to
		// them only when taken or probed, as the Redis script does, so an
		// op after a permanent denial leaves its bucket as it was.
		conns[i] = memConn{m: m, table: table, err: &lookupErr, op: op}
		rb.memConn = &conns[i]
		items[i].rb, items[i].cost = rb, int(op.Cost)
	}
	var d sluice.Decision
	dc := decider{t: at, ns: bucket.NsOf(at), denied: -1, reserve: true} // reserve: every take's full Result, for Remaining
	for i := range items {
		deciding := dc.denied < 0
		dc.take(items, nil, i, &d, nil)
		if lookupErr == nil {
			continue
		}
		if !deciding {
			break // probing: RetryAfter covers what was probed
		}
		// No decision: give back what was taken (a shadow op's failed
		// lookup did not deny, so nothing was given back yet).
		for j := i; j >= 0; j-- {
			if items[j].taken {
				items[j].refund(nil)
				items[j].taken = false
			}
		}
		return Outcome{}, items, lookupErr
	}
	out := Outcome{Denied: dc.denied}
	for i := range items {
		if items[i].shadowed {
			out.ShadowDenied = append(out.ShadowDenied, i)
		}
	}
	if dc.denied >= 0 {
		out.RetryAfter, out.Permanent, out.OverBurst = d.RetryAfter, d.Permanent, d.OverBurst
		return out, items, nil
	}
	out.Remaining = make([]int64, len(ops))
	for i := range items {
		out.Remaining[i] = items[i].left // what a shadow op that could not pass holds: nothing was taken
	}
	return out, items, nil
}

// memConn is the bucket or connections slot of one op of decideOps, as the
// decider takes and gives it back: a MemoryBackend's (m), or one of the
// Tables that table supplies.
type memConn struct {
	m     *MemoryBackend
	table func(*Op) (*bucket.Table, error)
	err   *error // where a failed table lookup is recorded
	op    *Op
	b     *bucket.Bucket // the op's bucket, once taken (m, not a connections op)
	t     *bucket.Table  // the op's Table, once taken (table)
}

func (c *memConn) take(at time.Time, it *item) bucket.Result {
	if c.table != nil {
		t, err := c.table(c.op)
		if err != nil {
			*c.err = err
			return bucket.Result{} // a denial without a wait; decideOps returns err
		}
		c.t = t
		return t.TakeN(at, c.op.Key, it.cost)
	}
	if !c.op.Conn {
		c.b = c.m.get(at, *c.op)
		return c.b.TakeN(at, it.cost)
	}
	ok, left := c.m.acquire(at, *c.op)
	switch {
	case ok:
		return bucket.Result{OK: true, Remaining: left}
	case c.op.Burst == 0:
		return bucket.Result{Permanent: true}
	}
	return bucket.Result{RetryAfter: connRetryAfter}
}

func (c *memConn) release(it *item) {
	switch {
	case c.t != nil:
		_ = c.t.GiveBack(c.op.Key, &it.grant, int(it.grant.Outstanding())) // the item's own grant: never refused
	case !c.op.Conn:
		_ = c.b.GiveBack(&it.grant, int(it.grant.Outstanding()))
	default:
		c.m.release(*c.op)
	}
}

// remember records g, taken at at, as key's latest take.
func (m *MemoryBackend) remember(key string, at time.Time, g bucket.Grant) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mb := m.buckets[key]; mb != nil {
		mb.last, mb.lastAt = g, at
	}
}

// Adjust implements Backend.
func (m *MemoryBackend) Adjust(ctx context.Context, at time.Time, ops []Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, op := range ops {
		if op.Conn {
			if op.Cost < 0 {
				m.release(op)
			}
			continue
		}
		b := m.get(at, op)
		switch {
		case op.Cost > 0:
			b.ChargeN(at, int(op.Cost))
		case op.Cost < 0 && !op.TakenAt.IsZero():
			// Bounded by the takes since op.TakenAt (see Backend.Adjust):
			// through the latest take's own Grant when it is the one given
			// back, which makes a prompt give-back exact.
			m.mu.Lock()
			mb := m.buckets[op.Key]
			g := &mb.last
			if taken := max(op.Taken, -op.Cost); !mb.lastAt.Equal(op.TakenAt) || g.Outstanding() < taken {
				g = new(bucket.Grant)
				*g = b.GrantFor(op.TakenAt, int(taken))
			}
			_ = b.GiveBack(g, int(-op.Cost))
			m.mu.Unlock()
		}
	}
	return nil
}

// checkBackendConfig refuses, when a backend that does not share
// connections slots (ConnBackend) decides, a configuration with connections
// limits: a fleet sharing the backend would not share them. Refusing is
// better than enforcing a per-process limit the configuration does not say.
func checkBackendConfig(b Backend, cfg *Config) error {
	if b == nil {
		return nil
	}
	if cb, ok := b.(ConnBackend); ok && cb.SharesConnections() {
		return nil
	}
	var errs match.ConfigError
	layer := func(name string, limits []RateLimit) {
		for i := range limits {
			for j := range limits[i].Entries {
				if len(limits[i].Entries[j].Connections) > 0 {
					errs.Add(name+"["+strconv.Itoa(i)+"].entries["+strconv.Itoa(j)+"].connections",
						"connections limits need a backend that shares slots (stack.ConnBackend); this one would not share them with the fleet")
				}
			}
		}
	}
	layer("rateLimits", cfg.RateLimits)
	layer("serviceLimits", cfg.ServiceLimits)
	return errs.Err()
}

// leaseProcess makes lease ids unique across the processes of a fleet.
var leaseProcess = func() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// leaseSeq numbers the leases of this process, over all its Stacks.
var leaseSeq atomic.Uint64

// newLease returns a lease id no other Stack, process or call uses.
func (s *Stack) newLease() string {
	return leaseProcess + "-" + strconv.FormatUint(leaseSeq.Add(1), 10)
}

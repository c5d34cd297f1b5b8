package lincheck

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/redis/redistest"
	"github.com/sluicehq/sluice/stack"
)

// The seeded scheduler on connections limits (issue 34): logical callers,
// each on a goroutine of its own that acts only when the scheduler hands
// it the turn, acquire slots of a Stack's connections limits and release
// them at the steps the seed picks: in any order (not the order acquired),
// twice (a stale copy of a handle already released, possibly after its
// record was reused by another acquire), and after the lease expired (the
// scheduler's clock, which the Stack and its backend read, sometimes jumps
// by about the lease TTL). An oracle keeps the leases as a sequential
// model and checks every decision against it:
//
//   - an admission finds fewer than N unexpired, unreleased leases of each
//     limit value it applies to (no more than N ever stand admitted, and a
//     release, or a double release, never frees more than its own slot);
//   - a denial finds some limit value with N of them (a release frees its
//     slot, and an expired lease is reclaimed: no slot is lost);
//   - once every caller has released everything, a fresh caller takes
//     exactly what the limits allow from empty, and not one slot more.
//
// A lease taken at t with TTL d holds its slot at every instant before
// t + d: the Stack, MemoryBackend and the Redis script drop it at t + d.

// slotLimit is a connections limit of n slots on dim: per value ("*"), or
// for one value.
type slotLimit struct {
	id, dim, value string
	n              int64
}

// slotShape is a configuration of connections limits and the callers'
// values. Every request carries tenant=acme and caller=<value>; every
// value is under some limit, so every admission holds a slot. fresh is how
// many slots a fresh caller, asking for each value in turn until denied,
// takes once nothing is held.
type slotShape struct {
	name   string
	limits []slotLimit
	values []string
	fresh  int
}

func slotShapes() []slotShape {
	return []slotShape{
		// One Table of pools: the slots of each value are counted apart.
		{name: "per-value", values: []string{"alice", "bob"}, fresh: 6,
			limits: []slotLimit{{id: "in-flight", dim: "caller", value: "*", n: 3}}},
		// One pool for an exact value.
		{name: "exact", values: []string{"alice"}, fresh: 3,
			limits: []slotLimit{{id: "in-flight", dim: "caller", value: "alice", n: 3}}},
		// Two limits, all or nothing: 2 slots a caller and 4 for the
		// tenant, so a denial by one limit must release the other's slot.
		{name: "stacked", values: []string{"alice", "bob", "carol"}, fresh: 4,
			limits: []slotLimit{
				{id: "tenant-in-flight", dim: "tenant", value: "acme", n: 4},
				{id: "caller-in-flight", dim: "caller", value: "*", n: 2},
			}},
	}
}

func (sh slotShape) config() stack.Config {
	var cfg stack.Config
	for _, l := range sh.limits {
		cfg.RateLimits = append(cfg.RateLimits, stack.RateLimit{RateLimitID: l.id, DimensionKeys: []string{l.dim},
			Entries: []stack.Entry{{Dimensions: map[string]string{l.dim: l.value},
				Connections: []stack.Rate{{Rate: l.n, Period: stack.Second}}}}})
	}
	return cfg
}

func (sh slotShape) keys(v string) sluice.Keys { return sluice.NewKeys("tenant", "acme", "caller", v) }

// pools returns the pools a request for value v takes a slot of: the index
// of the limit and the value it counts.
func (sh slotShape) pools(v string) []slotPool {
	var out []slotPool
	for i, l := range sh.limits {
		val := "acme"
		if l.dim == "caller" {
			val = v
		}
		if l.value == "*" || l.value == val {
			out = append(out, slotPool{i, val})
		}
	}
	return out
}

type slotPool struct {
	limit int
	value string
}

// slotLease is the model of one admitted request's slots.
type slotLease struct {
	id       int   // in the trace: l<id>
	at, exp  int64 // acquired at, and held until exp (µs)
	pools    []slotPool
	released bool // released while held (a release after exp frees nothing)
}

// slotModel is the oracle's sequential model of the slots held.
type slotModel struct {
	sh     slotShape
	ttl    int64 // µs
	leases []*slotLease
}

// held returns the leases holding a slot of p at t.
func (m *slotModel) held(p slotPool, t int64) int64 {
	n := int64(0)
	for _, l := range m.leases {
		if !l.released && t < l.exp && slices.Contains(l.pools, p) {
			n++
		}
	}
	return n
}

// check returns what is wrong with a decision for v at t, or "".
func (m *slotModel) check(v string, t int64, allowed bool) string {
	full := ""
	for _, p := range m.sh.pools(v) {
		l := m.sh.limits[p.limit]
		h := m.held(p, t)
		if allowed && h >= l.n {
			return fmt.Sprintf("admitted for %s at %d µs with %d of %s's %d slots of %s already held: %d stand admitted",
				v, t, h, l.id, l.n, p.value, h+1)
		}
		if h >= l.n && full == "" {
			full = fmt.Sprintf("%s's %d slots of %s", l.id, l.n, p.value)
		}
	}
	if !allowed && full == "" {
		return fmt.Sprintf("denied for %s at %d µs with every limit value below its slots (%s): a slot was lost",
			v, t, m.counts(v, t))
	}
	return ""
}

// counts describes the slots held of v's pools at t.
func (m *slotModel) counts(v string, t int64) string {
	var out []string
	for _, p := range m.sh.pools(v) {
		l := m.sh.limits[p.limit]
		out = append(out, fmt.Sprintf("%s/%s %d of %d", l.id, p.value, m.held(p, t), l.n))
	}
	return strings.Join(out, ", ")
}

// slotAcquirer takes the slots of a request for keys and returns what
// releases them.
type slotAcquirer func(ctx context.Context, keys sluice.Keys) (slotHandle, sluice.Decision, error)

// slotHandle releases what an acquire took; a copy releases the same.
type slotHandle struct {
	held    bool
	release func(cancel bool) error // cancel: Cancel instead of Reconcile(0), where there is one
}

// admitterSlots acquires through sluice.Admitter, as the middlewares do,
// and releases with Reconcile(0).
func admitterSlots(st *stack.Stack) slotAcquirer {
	adm := sluice.NewAdmitter(st)
	return func(ctx context.Context, keys sluice.Keys) (slotHandle, sluice.Decision, error) {
		s, d, err := adm.Admit(ctx, keys)
		return slotHandle{held: s.Held(), release: func(bool) error { return s.Reconcile(0) }}, d, err
	}
}

// reserveSlots acquires with Reserve and no estimate, which holds the
// slots on a backend too, and releases with Reconcile(0) or Cancel.
func reserveSlots(st *stack.Stack) slotAcquirer {
	return func(ctx context.Context, keys sluice.Keys) (slotHandle, sluice.Decision, error) {
		r, d, err := st.Reserve(ctx, keys, 0)
		return slotHandle{held: r.Held(), release: func(cancel bool) error {
			if cancel {
				r.Cancel()
				return nil
			}
			return r.Reconcile(0)
		}}, d, err
	}
}

// slotSched is one seed's run: the scheduler, the model, and the failure.
type slotSched struct {
	*sched
	m         slotModel
	acquire   slotAcquirer
	violation string
	released  []slotHeld // handles released once, kept for a second release
	expired   int        // releases after the lease expired
	stale     int        // second releases
	denied    int        // acquires denied
}

type slotHeld struct {
	h     slotHandle
	lease *slotLease
}

func (s *slotSched) fail(format string, args ...any) {
	if s.violation == "" {
		s.violation = fmt.Sprintf("step %d: ", len(s.trace)-1) + fmt.Sprintf(format, args...)
	}
}

// acquireFor decides one request for v at the clock's instant and checks
// it against the model.
func (s *slotSched) acquireFor(who, v string) (slotHeld, bool) {
	t := s.now
	h, d, err := s.acquire(context.Background(), s.m.sh.keys(v))
	s.tracef("%s acquires for %s at %d µs: allowed=%v %s (%s)", who, v, t, d.Allowed, d.LimitID, s.m.counts(v, t))
	if err != nil {
		s.errs = append(s.errs, fmt.Sprintf("step %d: %s acquires for %s: %v", len(s.trace)-1, who, v, err))
		return slotHeld{}, false
	}
	if d.Allowed && !h.held {
		s.fail("%s admitted for %s holding nothing", who, v)
	}
	if msg := s.m.check(v, t, d.Allowed); msg != "" {
		s.fail("%s %s", who, msg)
	}
	if !d.Allowed {
		s.denied++
	}
	if !d.Allowed || !h.held {
		return slotHeld{}, false
	}
	l := &slotLease{id: len(s.m.leases), at: t, exp: t + s.m.ttl, pools: s.m.sh.pools(v)}
	s.m.leases = append(s.m.leases, l)
	s.tracef("  l%d held until %d µs", l.id, l.exp)
	return slotHeld{h, l}, true
}

// release releases h (a second time when again) and updates the model.
func (s *slotSched) release(who string, h slotHeld, again bool) {
	cancel := s.rng.IntN(2) == 0
	err := h.h.release(cancel)
	l := h.lease
	what := "releases"
	switch {
	case again:
		what = "releases again"
		s.stale++
	case s.now >= l.exp:
		what = "releases after its lease expired"
		s.expired++
	default:
		l.released = true
	}
	s.tracef("%s %s l%d (taken at %d µs) at %d µs, cancel=%v: %v", who, what, l.id, l.at, s.now, cancel, err)
	if err != nil {
		s.errs = append(s.errs, fmt.Sprintf("step %d: %s %s l%d: %v", len(s.trace)-1, who, what, l.id, err))
	}
	if !again {
		s.released = append(s.released, h)
	}
}

// slotCaller is one logical caller: it holds the slots it acquired and
// releases any of them, or a copy of one it released before.
type slotCaller struct {
	s    *slotSched
	id   int
	held []slotHeld
}

func (c *slotCaller) step() {
	s := c.s
	who := "c" + strconv.Itoa(c.id)
	switch r := s.rng.IntN(20); {
	case r < 8 || (len(c.held) == 0 && r < 17):
		v := s.m.sh.values[s.rng.IntN(len(s.m.sh.values))]
		if h, ok := s.acquireFor(who, v); ok {
			c.held = append(c.held, h)
		}
	case len(c.held) > 0 && r < 17:
		i := s.rng.IntN(len(c.held)) // any of them, not the oldest
		h := c.held[i]
		c.held = slices.Delete(c.held, i, i+1)
		s.release(who, h, false)
	case len(s.released) > 0:
		s.release(who, s.released[s.rng.IntN(len(s.released))], true)
	}
}

// slotTTL is the lease TTL: long in wall time (the Redis script expires a
// slot set PEXPIRE TTL + 1 s after its last acquire, on the server's
// clock), short for the scheduler's clock, which jumps by about as much.
const slotTTL = 60 * time.Second

// runSlots runs callers logical callers, each on its own goroutine, for
// steps steps under s's seed, then releases everything and has a fresh
// caller take what the limits allow. It returns the violation, if any.
func runSlots(s *slotSched, callers, steps int) string {
	cs := make([]*slotCaller, callers)
	var fns []func()
	done := make(chan struct{})
	for i := range cs {
		c := &slotCaller{s: s, id: i}
		cs[i] = c
		turn := make(chan struct{})
		defer close(turn)
		go func() {
			for range turn {
				c.step()
				done <- struct{}{}
			}
		}()
		fns = append(fns, func() { turn <- struct{}{}; <-done })
	}
	ttl := s.m.ttl
	fns = append(fns, func() { // the clock jumps by about a TTL, now and then
		if s.rng.IntN(6) == 0 {
			s.now += ttl/2 + s.rng.Int64N(ttl)
			s.tracef("the clock jumps to %d µs", s.now)
		}
	})
	for range steps {
		s.run(1, fns) // checked after every step: the trace ends at a violation
		if len(s.errs) > 0 {
			return s.errs[0]
		}
		if s.violation != "" {
			return s.violation
		}
	}
	// Everything still held is released, in an order the seed picks.
	for {
		var left []*slotCaller
		for _, c := range cs {
			if len(c.held) > 0 {
				left = append(left, c)
			}
		}
		if len(left) == 0 {
			break
		}
		c := left[s.rng.IntN(len(left))]
		i := s.rng.IntN(len(c.held))
		h := c.held[i]
		c.held = slices.Delete(c.held, i, i+1)
		s.release("c"+strconv.Itoa(c.id), h, false)
	}
	// A fresh caller takes each value's slots until denied: exactly what
	// the limits allow from empty.
	var fresh []slotHeld
	for _, v := range s.m.sh.values {
		for range 10 {
			h, ok := s.acquireFor("fresh", v)
			if !ok {
				break
			}
			fresh = append(fresh, h)
		}
	}
	for _, h := range fresh {
		s.release("fresh", h, false)
	}
	if len(s.errs) > 0 {
		return s.errs[0]
	}
	if s.violation == "" && len(fresh) != s.m.sh.fresh {
		s.fail("after every release a fresh caller took %d slots, want %d", len(fresh), s.m.sh.fresh)
	}
	return s.violation
}

// TestInterleavingsSlots runs the seeded scheduler on connections slots:
// a Stack acquiring through sluice.Admitter (as httplimit and grpclimit
// do) and through Reserve with no estimate, each in memory, on a
// MemoryBackend and on the Redis backend (an Admitter's slots are held on
// the backend, like a reservation's). Every
// decision is checked against the model of the leases (see above); a
// failure names its seed, and LINCHECK_SEED=<seed> replays it with every
// step printed.
func TestInterleavingsSlots(t *testing.T) {
	const callers, steps = 4, 300
	ttl := slotTTL.Microseconds()
	seeds := seedsToRun(t, seedsFor(60))
	type mode struct {
		name    string
		acquire func(*stack.Stack) slotAcquirer
		seeds   []uint64
		// backend, if set, returns what makes each seed's backend, given
		// the key prefix of the seed and the clock.
		backend func(t *testing.T) func(prefix string, now func() time.Time) stack.Backend
	}
	memoryBackend := func(*testing.T) func(string, func() time.Time) stack.Backend {
		return func(string, func() time.Time) stack.Backend { return stack.NewMemoryBackend() }
	}
	// Without redis-server the Redis modes are skipped, or fail when
	// SLUICE_REQUIRE_REDIS=1 (as in CI).
	redisBackend := func(t *testing.T) func(string, func() time.Time) stack.Backend {
		srv := redistest.Start(t)
		client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
		t.Cleanup(func() { client.Close() })
		return func(prefix string, now func() time.Time) stack.Backend {
			b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithClock(sluice.ClockFunc(now)),
				sluiceredis.WithTimeout(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	redisSeeds := seedsToRun(t, seedsFor(15))
	modes := []mode{
		{name: "admitter", acquire: admitterSlots, seeds: seeds},
		{name: "reserve", acquire: reserveSlots, seeds: seeds},
		{name: "memory-backend", acquire: reserveSlots, seeds: seeds, backend: memoryBackend},
		{name: "memory-backend-admitter", acquire: admitterSlots, seeds: seeds, backend: memoryBackend},
		{name: "redis", acquire: reserveSlots, seeds: redisSeeds, backend: redisBackend},
		{name: "redis-admitter", acquire: admitterSlots, seeds: redisSeeds, backend: redisBackend},
	}
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			var backend func(string, func() time.Time) stack.Backend
			if md.backend != nil {
				backend = md.backend(t)
			}
			for _, sh := range slotShapes() {
				t.Run(sh.name, func(t *testing.T) {
					expired, stale, denied, leases, failed := 0, 0, 0, 0, 0
					for _, seed := range md.seeds {
						s := &slotSched{sched: newSched(seed, 400), m: slotModel{sh: sh, ttl: ttl}}
						now := func() time.Time { return at(s.now) }
						opts := []stack.Option{stack.WithClock(sluice.ClockFunc(now)), stack.WithLeaseTTL(slotTTL)}
						if backend != nil {
							prefix := "lincheck-slots-" + sh.name + "-" + strconv.FormatUint(seed, 10)
							opts = append(opts, stack.WithBackend(backend(prefix, now)), stack.WithFailClosed())
						}
						st, err := stack.New(sh.config(), opts...)
						if err != nil {
							t.Fatal(err)
						}
						s.acquire = md.acquire(st)
						v := runSlots(s, callers, steps)
						if _, ok := replaySeed(t); ok {
							t.Logf("seed %d:\n%s", seed, strings.Join(s.trace, "\n"))
						}
						if v != "" {
							failed++
							msg := fmt.Sprintf("seed %d: %s (replay: LINCHECK_SEED=%d)", seed, v, seed)
							if failed == 1 {
								msg += "; last steps:\n" + tail(strings.Join(s.trace, "\n"), 30)
							}
							t.Error(msg)
						}
						expired += s.expired
						stale += s.stale
						denied += s.denied
						leases += len(s.m.leases)
					}
					if expired == 0 || stale == 0 || denied == 0 {
						t.Errorf("%d releases after a lease expired, %d second releases, %d denials: the scheduler did not exercise them all",
							expired, stale, denied)
					}
					t.Logf("%d seeds: %d leases, %d denials, %d releases after a lease expired, %d second releases",
						len(md.seeds), leases, denied, expired, stale)
				})
			}
		})
	}
}

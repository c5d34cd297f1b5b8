package lincheck

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
)

// The seeded interleaving test: logical callers, each a small state
// machine (read the instant, take, give back), are stepped one step at a
// time in an order drawn from a seeded generator, on one goroutine. The
// same seed replays the same interleaving exactly, so a failure names its
// seed and replays with LINCHECK_SEED=<seed> (which also prints the steps).
// An oracle checks the promise over every sequence of kept decisions: in
// every window [t1, t2] of instants, the units kept (taken and not given
// back) are at most burst + rate·(t2 − t1). Instants are whole µs and the
// rate is exact in the buckets' ticks, so the bound is checked exactly.

// keptDecision is a take as its caller keeps it: its instant, the bucket,
// and the units taken less those given back.
type keptDecision struct {
	at, units int64
	b         int
}

// windowViolation returns a description of a window [t1, t2] of one bucket
// whose kept units exceed burst + (t2 − t1)/unit, or "".
func windowViolation(kept []keptDecision, buckets []Params) string {
	for b, p := range buckets {
		var ds []keptDecision
		for _, k := range kept {
			if k.b == b && k.units > 0 {
				ds = append(ds, k)
			}
		}
		slices.SortFunc(ds, func(x, y keptDecision) int { return int(x.at - y.at) })
		for i := range ds {
			sum := int64(0)
			for j := i; j < len(ds); j++ {
				sum += ds[j].units
				if j+1 < len(ds) && ds[j+1].at == ds[j].at {
					continue // a window ends after every decision at its instant
				}
				if sum*p.Unit > p.tau()+(ds[j].at-ds[i].at) {
					return fmt.Sprintf("bucket %d: window [%d µs, %d µs] kept %d units > burst %d + %d µs at %d µs a unit",
						b, ds[i].at, ds[j].at, sum, p.Burst, ds[j].at-ds[i].at, p.Unit)
				}
			}
		}
	}
	return ""
}

// sched steps logical callers in a seeded order and keeps a trace.
type sched struct {
	rng   *rand.Rand
	now   int64 // the shared clock, µs
	step  int64 // the clock advances by up to this much per step
	trace []string
	kept  []keptDecision
	errs  []string // calls that returned an error
}

func newSched(seed uint64, step int64) *sched {
	return &sched{rng: rand.New(rand.NewPCG(seed, 0x5eed)), step: step}
}

func (s *sched) tracef(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf("%4d ", len(s.trace))+fmt.Sprintf(format, args...))
}

// run steps one of callers, chosen at random, steps times; every step moves
// the clock on.
func (s *sched) run(steps int, callers []func()) {
	for range steps {
		s.now += s.rng.Int64N(s.step)
		callers[s.rng.IntN(len(callers))]()
	}
}

// replaySeed returns the seed LINCHECK_SEED asks to replay, if any.
func replaySeed(t *testing.T) (uint64, bool) {
	v := os.Getenv("LINCHECK_SEED")
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("LINCHECK_SEED=%q: %v", v, err)
	}
	return n, true
}

// seedsToRun returns the seeds a scheduler test runs: n of them from
// first, or the one LINCHECK_SEED names.
func seedsToRun(t *testing.T, n int) []uint64 {
	if s, ok := replaySeed(t); ok {
		return []uint64{s}
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i)
	}
	return out
}

// targetCaller is one logical caller of a target: it reads the instant
// (possibly long before it takes: a stale instant), takes, and when it
// holds its grant gives it back later, in full or in parts.
type targetCaller struct {
	s     *sched
	tg    target
	id    int
	keys  int
	burst int
	state int // 0 read the instant, 1 take, 2 give back
	t     int64
	key   int
	g     grant
	left  int64
	kept  int // index in s.kept of the decision held
}

func (c *targetCaller) step() {
	s := c.s
	switch c.state {
	case 0:
		c.t = s.now
		c.state = 1
		s.tracef("c%d reads %d µs", c.id, c.t)
	case 1:
		n := 1 + s.rng.IntN(c.burst)
		c.key = s.rng.IntN(c.keys)
		ok, rem, g := c.tg.take(tableKeys[c.key], at(c.t), n)
		s.tracef("c%d takes %d of b%d at %d µs: ok=%v, %d left", c.id, n, c.key, c.t, ok, rem)
		c.state = 0
		if !ok {
			return
		}
		s.kept = append(s.kept, keptDecision{at: c.t, units: int64(n), b: c.key})
		if s.rng.IntN(2) == 0 {
			c.g, c.left, c.kept, c.state = g, int64(n), len(s.kept)-1, 2
		}
	case 2:
		n := c.left
		if n > 1 && s.rng.IntN(3) == 0 {
			n = 1 + s.rng.Int64N(n-1)
		}
		if err := c.tg.giveBack(tableKeys[c.key], &c.g, int(n)); err != nil {
			s.errs = append(s.errs, fmt.Sprintf("step %d: c%d gives back %d: %v", len(s.trace), c.id, n, err))
		}
		c.left -= n
		s.kept[c.kept].units -= n
		s.tracef("c%d gives back %d of b%d (taken at %d µs), %d still held", c.id, n, c.key, c.t, c.left)
		if c.left == 0 {
			c.state = 0
		}
	}
}

// interleave runs callers logical callers of a fresh target from mk for
// steps steps under seed and returns the violation found, if any, with the
// trace.
func interleave(mk func() target, keys, burst, callers, steps int, seed uint64) (string, []string) {
	s := newSched(seed, 400)
	tg := mk()
	var fns []func()
	for i := range callers {
		c := &targetCaller{s: s, tg: tg, id: i, keys: keys, burst: burst}
		fns = append(fns, c.step)
	}
	params := targetSpec(keys, burst).Params
	for range steps / 20 {
		s.run(20, fns)
		if len(s.errs) > 0 {
			return s.errs[0], s.trace
		}
		if v := windowViolation(s.kept, params); v != "" {
			return v, s.trace
		}
	}
	return "", s.trace
}

// TestInterleavings runs the seeded scheduler over every public give-back
// form. A safe form must keep the window bound on every seed; a form known
// to be unsafe must be caught on some seed (the test reports the first).
func TestInterleavings(t *testing.T) {
	const callers, steps = 5, 400
	seeds := seedsToRun(t, seedsFor(300))
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			keys := 1
			if f.table {
				keys = len(tableKeys)
			}
			first, caught := -1, 0
			for _, seed := range seeds {
				v, trace := interleave(func() target { return f.make(testRate, 3) }, keys, 3, callers, steps, seed)
				if _, ok := replaySeed(t); ok {
					t.Logf("seed %d:\n%s", seed, strings.Join(trace, "\n"))
				}
				if v == "" {
					continue
				}
				caught++
				if first < 0 {
					first = int(seed)
					if f.unsafe {
						t.Logf("seed %d: %s; last steps:\n%s", seed, v, tail(strings.Join(trace, "\n"), 12))
					}
				}
				if !f.unsafe {
					t.Errorf("seed %d: %s (replay: LINCHECK_SEED=%d); last steps:\n%s", seed, v, seed, tail(strings.Join(trace, "\n"), 30))
				}
			}
			if f.unsafe && caught == 0 && len(seeds) > 1 {
				t.Errorf("%s is known to over-admit, but no seed of %d caught it", f.name, len(seeds))
			}
			t.Logf("%d of %d seeds broke the window bound", caught, len(seeds))
		})
	}
}

// TestInterleavingsReference runs the scheduler on the reference buckets
// (reference_test.go): the ideal give-back and the instant rule keep the
// bound on every seed (the oracle does not cry wolf), and the end rule,
// which bounds a give-back by the state its take left, is caught.
func TestInterleavingsReference(t *testing.T) {
	const callers, steps = 5, 400
	seeds := seedsToRun(t, seedsFor(300))
	for _, rule := range []refRule{refIdeal, refInstantRule, refEndRule} {
		caught := 0
		for _, seed := range seeds {
			v, trace := interleave(func() target { return newRefBucket(3, rule) }, 1, 3, callers, steps, seed)
			if v == "" {
				continue
			}
			caught++
			if rule != refEndRule {
				t.Errorf("reference rule %d, seed %d: %s; last steps:\n%s", rule, seed, v, tail(strings.Join(trace, "\n"), 30))
			} else if caught == 1 {
				t.Logf("end rule, seed %d: %s", seed, v)
			}
		}
		if rule == refEndRule && caught == 0 && len(seeds) > 1 {
			t.Errorf("the end rule over-admits, but none of %d seeds caught it", len(seeds))
		}
		t.Logf("reference rule %d: %d of %d seeds broke the window bound", rule, caught, len(seeds))
	}
}

// stackCaller is one logical caller of a Stack: it reads the instant, then
// decides with AllowAt, or reserves with ReserveAt and settles later (at
// the Stack's clock, the scheduler's) by Cancel or by Reconcile at or below
// the estimate (a charge above it may put a bucket into debt, which the
// window bound does not allow for).
type stackCaller struct {
	s       *sched
	st      *stack.Stack
	sh      stackShape
	id      int
	reserve bool
	inOrder bool // decide at the clock's instant, not the one read before
	// own, if set, is the clock of the caller's process (its Stack's and
	// backend's): set to the instant of each decision, and to the shared
	// clock's for a settlement.
	own   *int64
	state int // 0 read the instant, 1 decide, 2 settle
	t     int64
	r     sluice.Reservation
	est   int64
	kept  []int // indexes in s.kept of the reservation's decisions
}

func (c *stackCaller) step() {
	s := c.s
	ctx := context.Background()
	if c.sh.evaluated {
		ctx = sluice.WithEvaluated(ctx)
	}
	switch c.state {
	case 0:
		c.t = s.now
		c.state = 1
		s.tracef("c%d reads %d µs", c.id, c.t)
	case 1:
		n := 1 + s.rng.Int64N(4)
		if c.inOrder {
			c.t = s.now
		}
		c.state = 0
		var d sluice.Decision
		var err error
		reserving := c.reserve && s.rng.IntN(2) == 0
		allow := c.sh.allow && !reserving && c.own == nil
		if allow {
			c.t = s.now // Allow reads the Stack's clock: the scheduler's
		}
		if c.own != nil {
			*c.own = c.t
		}
		switch {
		case reserving:
			c.r, d, err = c.st.ReserveAt(ctx, at(c.t), c.sh.keys(), int(n))
		case allow:
			d, err = c.st.Allow(ctx, c.sh.keys())
		default:
			d, err = c.st.AllowAt(ctx, at(c.t), c.sh.keys(), int(n))
		}
		s.tracef("c%d %s %d at %d µs: allowed=%v %s %v", c.id, map[bool]string{true: "reserves", false: "takes"}[reserving], n, c.t, d.Allowed, d.LimitID, err)
		if err != nil {
			s.errs = append(s.errs, fmt.Sprintf("step %d: c%d: %v", len(s.trace), c.id, err))
		}
		if err != nil || !d.Allowed {
			return
		}
		c.kept = c.kept[:0]
		for _, it := range c.sh.items(n) {
			s.kept = append(s.kept, keptDecision{at: c.t, units: it.N, b: it.B})
			c.kept = append(c.kept, len(s.kept)-1)
		}
		if reserving {
			c.est, c.state = n, 2
		}
	case 2:
		c.state = 0
		if c.own != nil {
			*c.own = s.now
		}
		if s.rng.IntN(2) == 0 {
			c.r.Cancel()
			for _, k := range c.kept {
				s.kept[k].units = 0
			}
			s.tracef("c%d cancels its reservation of %d at %d µs", c.id, c.est, c.t)
			return
		}
		actual := s.rng.Int64N(c.est + 1)
		err := c.r.Reconcile(int(actual))
		if err != nil {
			s.errs = append(s.errs, fmt.Sprintf("step %d: c%d reconciles: %v", len(s.trace), c.id, err))
		}
		for i, k := range c.kept {
			if c.sh.limits[i].tokens {
				s.kept[k].units = actual
			}
		}
		s.tracef("c%d reconciles its reservation of %d at %d µs to %d: %v", c.id, c.est, c.t, actual, err)
	}
}

// TestInterleavingsStack runs the seeded scheduler over the Stack's
// give-backs: a denial's (inside one call, so never interleaved here),
// and a reservation's Cancel and Reconcile below the estimate, interleaved
// with other callers' decisions.
func TestInterleavingsStack(t *testing.T) {
	const callers, steps = 5, 400
	seeds := seedsToRun(t, seedsFor(100))
	for _, sh := range stackShapes() {
		for _, mode := range []string{"", "-reserve", "-memory-backend", "-memory-backend-reserve"} {
			name := sh.name + mode
			reserve := strings.HasSuffix(mode, "reserve")
			var opts []stack.Option
			if strings.HasPrefix(mode, "-memory") {
				if sh.evaluated {
					continue // a backend decides on one path
				}
				opts = append(opts, stack.WithBackend(stack.NewMemoryBackend()))
			}
			t.Run(name, func(t *testing.T) {
				caught := 0
				for _, seed := range seeds {
					s := newSched(seed, 400)
					st, err := stack.New(sh.config(), append(opts, stack.WithClock(sluice.ClockFunc(func() time.Time { return at(s.now) })))...)
					if err != nil {
						t.Fatal(err)
					}
					var fns []func()
					for i := range callers {
						c := &stackCaller{s: s, st: st, sh: sh, id: i, reserve: reserve}
						fns = append(fns, c.step)
					}
					v := ""
					for range steps / 20 {
						s.run(20, fns)
						if len(s.errs) > 0 {
							t.Fatalf("seed %d: %s", seed, s.errs[0])
						}
						if v = windowViolation(s.kept, sh.spec().Params); v != "" {
							break
						}
					}
					if _, ok := replaySeed(t); ok {
						t.Logf("seed %d:\n%s", seed, strings.Join(s.trace, "\n"))
					}
					if v == "" {
						continue
					}
					caught++
					if stackGiveBacksSafe || caught == 1 {
						msg := fmt.Sprintf("seed %d: %s (replay: LINCHECK_SEED=%d); last steps:\n%s", seed, v, seed, tail(strings.Join(s.trace, "\n"), 30))
						if stackGiveBacksSafe {
							t.Error(msg)
						} else {
							t.Log(msg)
						}
					}
				}
				t.Logf("%d of %d seeds broke the window bound", caught, len(seeds))
			})
		}
	}
}

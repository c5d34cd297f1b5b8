package lincheck

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
)

// A stack of up to three limits, each one bucket for the request's value.
// They are evaluated stricter rate first: region (250 tokens/s), tenant
// (500 requests/s), user (1000 tokens/s). Every rate is exact in µs.
type stackLimit struct {
	id, key, value string
	rate           int64 // per second
	burst          int64
	tokens         bool // a tokens limit (else requests: cost 1)
}

var stackLimits = []stackLimit{
	{id: "per-region", key: "region", value: "eu", rate: 250, burst: 8, tokens: true},
	{id: "per-tenant", key: "tenant", value: "acme", rate: 500, burst: 3},
	{id: "per-user", key: "user", value: "ann", rate: 1000, burst: 4, tokens: true},
}

// stackShape is one configuration of limits, chosen for the decision path
// it takes: per-value ("*") entries only and exact entries (one shared
// bucket each) make ordered plans (one limit: the one-limit plan); a
// context asking for the evaluated list, or a reservation, the general
// path. All decide through the one decider.
type stackShape struct {
	name      string
	limits    []stackLimit
	exact     bool // exact entries: Buckets, not Tables
	evaluated bool // ask for Decision.Evaluated: the general path
	// allow: the seeded scheduler decides with Allow, on the Stack's
	// clock, instead of AllowAt (Allow's one-limit path); only for
	// requests limits, where Allow's cost is AllowAt's.
	allow bool
}

func stackShapes() []stackShape {
	two := []stackLimit{stackLimits[1], stackLimits[2]}
	three := stackLimits
	return []stackShape{
		{name: "singles-1", limits: []stackLimit{stackLimits[1]}, allow: true},
		{name: "singles-2", limits: two},
		{name: "singles-3", limits: three},
		{name: "direct-2", limits: two, exact: true},
		{name: "direct-3", limits: three, exact: true},
		{name: "general-2", limits: two, evaluated: true},
		{name: "general-3", limits: three, exact: true, evaluated: true},
	}
}

func (sh stackShape) config() stack.Config {
	var cfg stack.Config
	for _, l := range sh.limits {
		v := "*"
		if sh.exact {
			v = l.value
		}
		r := []stack.Rate{{Rate: l.rate, Period: stack.Second, Burst: l.burst}}
		e := stack.Entry{Dimensions: map[string]string{l.key: v}}
		if l.tokens {
			e.Tokens = r
		} else {
			e.Requests = r
		}
		cfg.RateLimits = append(cfg.RateLimits, stack.RateLimit{RateLimitID: l.id, DimensionKeys: []string{l.key}, Entries: []stack.Entry{e}})
	}
	return cfg
}

func (sh stackShape) keys() sluice.Keys {
	var kv []string
	for _, l := range sh.limits {
		kv = append(kv, l.key, l.value)
	}
	return sluice.NewKeys(kv...)
}

func (sh stackShape) spec() *Spec {
	s := &Spec{Slack: instantSlack}
	for i, l := range sh.limits {
		s.Params = append(s.Params, Params{Unit: 1_000_000 / l.rate, Burst: l.burst, Group: i})
	}
	return s
}

// items are the buckets a request costing n tokens takes, in order.
func (sh stackShape) items(n int64) []Item {
	var out []Item
	for i, l := range sh.limits {
		c := int64(1)
		if l.tokens {
			c = n
		}
		out = append(out, Item{B: i, N: c})
	}
	return out
}

// decision turns a stack's decision into the specification's output.
func (sh stackShape) decision(d sluice.Decision) Decision {
	if d.Allowed {
		return Decision{OK: true, Remaining: int64(d.Remaining)}
	}
	for i, l := range sh.limits {
		if l.id == d.LimitID {
			return Decision{Denied: i, RemainingUnknown: true}
		}
	}
	return Decision{Denied: -1, RemainingUnknown: true} // impossible: the check fails
}

// stackGiveBacksSafe says whether the stack's give-backs (on a denial, and
// when a reservation is settled) keep the promise. Until issue 21's fix
// lands they do not, and the checks report what they find without failing.
const stackGiveBacksSafe = true

// pod is the Stack a caller decides on. With own set, the Stack (and its
// backend) read that clock, which the caller sets to each operation's
// instant: a process of a fleet. Without, the Stack reads the shared clock.
type pod struct {
	s   *stack.Stack
	own *atomic.Int64
}

var stackLoad = workload{callers: 5, ops: 20, burst: 4, step: 900, stale: 3000}

// recordStack runs w on s from w.callers goroutines: AllowAt with 1 to 4
// tokens at an instant from a shared clock (sometimes stale) and, with
// reserve, ReserveAt with an estimate of 1 to 4, settled later by Cancel
// or by Reconcile with an actual cost below, at or above the estimate. The
// Stack settles at its own clock: the shared clock, whose range of
// instants during the call the history records, or a pod's own clock (a
// process of a fleet), set to the shared clock's instant just before.
func recordStack(pods func(c int) pod, clock *atomic.Int64, sh stackShape, w workload, reserve bool, seed uint64) []porcupine.Operation {
	var rec recorder
	var ids atomic.Int64
	ctx := context.Background()
	if sh.evaluated {
		ctx = sluice.WithEvaluated(ctx)
	}
	keys := sh.keys()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for c := range w.callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := rec.client(c)
			defer cl.done()
			p := pods(c)
			s := p.s
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			type res struct {
				id  int
				est int64
				r   sluice.Reservation
			}
			var held []res
			settle := func() {
				h := held[0]
				held = held[1:]
				in := Give{ID: h.id, Last: true}
				actual := int64(-1) // cancel
				if rng.IntN(3) > 0 {
					actual = rng.Int64N(2*h.est + 1)
				}
				for i, it := range sh.items(h.est) {
					switch {
					case actual < 0:
						in.Gives = append(in.Gives, it)
					case !sh.limits[i].tokens:
					case actual < h.est:
						in.Gives = append(in.Gives, Item{B: i, N: h.est - actual})
					case actual > h.est:
						in.Charges = append(in.Charges, Item{B: i, N: actual - h.est})
					}
				}
				in.ChargeLo = clock.Load()
				if p.own != nil {
					p.own.Store(in.ChargeLo)
				}
				cl.do(in, func() any {
					if actual < 0 {
						h.r.Cancel()
					} else if err := h.r.Reconcile(int(actual)); err != nil {
						return err.Error()
					}
					return nil
				})
				in.ChargeHi = clock.Load()
				if p.own != nil {
					in.ChargeHi = in.ChargeLo
				}
				in.At = in.ChargeHi
				cl.ops[len(cl.ops)-1].Input = in
			}
			<-start
			for range w.ops {
				if rng.IntN(3) == 0 {
					runtime.Gosched()
				}
				if len(held) > 0 && rng.IntN(2) == 0 {
					settle()
					continue
				}
				t := clock.Add(rng.Int64N(w.step))
				if rng.IntN(4) == 0 {
					t = max(0, t-rng.Int64N(w.stale))
				}
				n := 1 + rng.Int64N(int64(w.burst))
				in := Decide{ID: int(ids.Add(1)), At: t, Items: sh.items(n)}
				if p.own != nil {
					p.own.Store(t)
				}
				if reserve && rng.IntN(3) == 0 {
					in.Holds = true
					var r sluice.Reservation
					out := cl.do(in, func() any {
						var d sluice.Decision
						var err error
						r, d, err = s.ReserveAt(ctx, at(t), keys, int(n))
						if err != nil {
							return err.Error()
						}
						return sh.decision(d)
					})
					if d, ok := out.(Decision); ok && d.OK {
						held = append(held, res{id: in.ID, est: n, r: r})
					}
					continue
				}
				cl.do(in, func() any {
					d, err := s.AllowAt(ctx, at(t), keys, int(n))
					if err != nil {
						return err.Error()
					}
					return sh.decision(d)
				})
			}
			for len(held) > 0 {
				settle()
			}
		}()
	}
	close(start)
	wg.Wait()
	return rec.history()
}

// TestLinearizableStack records concurrent histories of the in-memory
// Stack on two and three stacked limits, through each decision path, and
// checks them against the specification: all or nothing across the
// limits, a denial gives back what the limits before it took.
func TestLinearizableStack(t *testing.T) {
	stackHistories(t, false)
}

// TestLinearizableReservations is TestLinearizableStack with reservations:
// ReserveAt, then Cancel, or Reconcile below (a give-back), at (nothing)
// or above (a charge, into debt if need be) the estimate.
func TestLinearizableReservations(t *testing.T) {
	stackHistories(t, true)
}

func stackHistories(t *testing.T, reserve bool) {
	seeds := seedsFor(30)
	for _, sh := range stackShapes() {
		t.Run(sh.name, func(t *testing.T) {
			bad := 0
			for seed := range uint64(seeds) {
				var clock atomic.Int64
				s, err := stack.New(sh.config(), stack.WithClock(sluice.ClockFunc(func() time.Time { return at(clock.Load()) })))
				if err != nil {
					t.Fatal(err)
				}
				h := recordStack(func(int) pod { return pod{s: s} }, &clock, sh, stackLoad, reserve, seed)
				checkOutputs(t, h)
				name := t.Name() + "-seed" + strconv.FormatUint(seed, 10)
				if res, msg := check(t, sh.spec(), h, name); res != porcupine.Ok {
					bad++
					if stackGiveBacksSafe {
						t.Error(msg)
					}
				}
			}
			if bad > 0 && stackGiveBacksSafe {
				t.Errorf("%d of %d histories are not linearizable", bad, seeds)
			}
			if !stackGiveBacksSafe {
				t.Logf("%d of %d histories are not linearizable (the stack's give-backs are known to over-admit)", bad, seeds)
			}
		})
	}
}

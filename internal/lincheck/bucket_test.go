package lincheck

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/anishathalye/porcupine"
	"golang.org/x/time/rate"
)

// The buckets under test refill 1000 tokens a second: one token every
// 1000 µs (ticks of the specification), exactly.
const (
	testRate = rate.Limit(1000)
	testUnit = 1000 // µs per token
)

var tableKeys = []string{"a", "b"}

// workload shapes a recorded history.
type workload struct {
	callers, ops int
	burst        int
	step         int64 // the shared clock advances by up to this much per take (µs)
	stale        int64 // a quarter of the takes use an instant up to this much older
	// charges makes about one take in six a charge (ChargeN) of one or two
	// tokens instead, on a target that has one (see charger).
	charges bool
}

var bucketLoad = workload{callers: 6, ops: 24, burst: 4, step: 700, stale: 3000}

// held is a take its caller may still give back.
type held struct {
	id   int
	key  int
	g    grant
	left int64
}

// recordTarget runs w on tg from w.callers goroutines and returns the
// history. Each caller takes from one of keys (one key for a Bucket) at an
// instant from a shared clock (sometimes stale), keeps a third of what it
// is granted to give back later, in full or in parts, and gives everything
// back before it ends.
func recordTarget(tg target, keys int, w workload, seed uint64) []porcupine.Operation {
	var rec recorder
	var now, ids atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for c := range w.callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := rec.client(c)
			defer cl.done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			var hs []held
			giveBack := func(last bool) {
				h := &hs[0]
				n := h.left
				if !last && n > 1 && rng.IntN(3) == 0 {
					n = 1 + rng.Int64N(n-1)
				}
				h.left -= n
				in := Give{ID: h.id, At: us(h.g.at), Gives: []Item{{B: h.key, N: n}}, Last: h.left == 0}
				cl.do(in, func() any {
					if err := tg.giveBack(tableKeys[h.key], &h.g, int(n)); err != nil {
						return err.Error()
					}
					return nil
				})
				if h.left == 0 {
					hs = hs[1:]
				}
			}
			<-start
			for range w.ops {
				if rng.IntN(3) == 0 {
					runtime.Gosched() // let the callers interleave
				}
				if len(hs) > 0 && rng.IntN(2) == 0 {
					giveBack(false)
					continue
				}
				t := now.Add(rng.Int64N(w.step))
				if rng.IntN(4) == 0 {
					t = max(0, t-rng.Int64N(w.stale))
				}
				if ch, ok := tg.(charger); ok && w.charges && rng.IntN(6) == 0 {
					// A charge takes unconditionally, into debt if need be:
					// the specification's settlement above an estimate,
					// at a known instant.
					n, key := 1+rng.IntN(2), rng.IntN(keys)
					in := Give{ID: int(ids.Add(1)), At: t, Charges: []Item{{B: key, N: int64(n)}}, ChargeLo: t, ChargeHi: t, Last: true}
					cl.do(in, func() any {
						ch.charge(tableKeys[key], at(t), n)
						return nil
					})
					continue
				}
				n := 1 + rng.IntN(w.burst)
				if rng.IntN(20) == 0 {
					n = w.burst + 1
				}
				key := rng.IntN(keys)
				in := Decide{ID: int(ids.Add(1)), At: t, Items: []Item{{B: key, N: int64(n)}}, Holds: rng.IntN(3) == 0}
				var g grant
				out := cl.do(in, func() any {
					ok, rem, gr := tg.take(tableKeys[key], at(t), n)
					g = gr
					return takeDecision(ok, rem)
				}).(Decision)
				if out.OK && in.Holds {
					hs = append(hs, held{id: in.ID, key: key, g: g, left: int64(n)})
				}
			}
			for len(hs) > 0 {
				giveBack(true)
			}
		}()
	}
	close(start)
	wg.Wait()
	return rec.history()
}

// instantSlack is the tolerance on exactness, in µs: a Bucket keeps its
// high-water instant in quanta of 1024 ns, rounded up, so a give-back
// bounded by it (a GrantFor's, or one after a take since) may return up to
// that much refill less than an exact one; the state is then a fraction of
// a µs off the integer instants, which the specification rounds up.
const instantSlack = 2

// targetSpec is the specification of a target with keys buckets (one Table
// shares its high-water mark across keys).
func targetSpec(keys, burst int) *Spec {
	s := &Spec{Slack: instantSlack}
	for range keys {
		s.Params = append(s.Params, Params{Unit: testUnit, Burst: int64(burst)})
	}
	return s
}

// seedsFor is how many histories a test records: fewer under the race
// detector, which slows the code under test about tenfold.
func seedsFor(n int) int {
	if raceEnabled {
		return max(1, n/3)
	}
	return n
}

// TestLinearizableBuckets records concurrent histories of takes and
// give-backs on a Bucket and a Table (two keys) through every public
// give-back form, and checks each against the specification. A form known
// to hand out tokens that were never refilled must be caught on some seed.
func TestLinearizableBuckets(t *testing.T) { checkForms(t, bucketLoad) }

// TestLinearizableCharges is TestLinearizableBuckets with charges among the
// takes (Bucket.ChargeN's compare-and-swap loop, Table.ChargeN and
// ChargeBytes under the shard's lock): a charge that lost a concurrent
// take's update, or that a take overwrote, admits more than the
// specification allows.
func TestLinearizableCharges(t *testing.T) {
	w := bucketLoad
	w.charges = true
	checkForms(t, w)
}

// checkForms records histories of w on every form and checks them; with
// w.charges, it also checks that the histories did charge.
func checkForms(t *testing.T, w workload) {
	seeds := seedsFor(60)
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			if _, ok := f.make(testRate, w.burst).(charger); w.charges && !ok {
				t.Skip("the form cannot charge (the public package has no ChargeN)")
			}
			keys := 1
			if f.table {
				keys = len(tableKeys)
			}
			caught, charged := 0, 0
			for seed := range uint64(seeds) {
				h := recordTarget(f.make(testRate, w.burst), keys, w, seed)
				for _, op := range h {
					if g, ok := op.Input.(Give); ok && len(g.Charges) > 0 {
						charged++
					}
				}
				checkOutputs(t, h)
				spec := targetSpec(keys, w.burst)
				// A Bucket raises its high-water instant before a take's
				// compare-and-swap; a Table raises a shard's under its lock,
				// with the take.
				spec.HighEarly = !f.table
				res, msg := check(t, spec, h, t.Name()+"-seed"+strconv.FormatUint(seed, 10))
				switch {
				case res == porcupine.Illegal && f.unsafe:
					caught++
				case res != porcupine.Ok:
					t.Error(msg)
				}
			}
			if f.unsafe {
				t.Logf("%s: %d of %d histories not linearizable", f.name, caught, seeds)
			}
			if w.charges && charged < seeds {
				t.Errorf("%d charges in %d histories: the form has no charge adapter, or the workload hardly charges", charged, seeds)
			}
		})
	}
}

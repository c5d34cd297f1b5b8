package lincheck

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// The shapes of the failing histories the checkers found in the give-backs
// sluice had before issue 21 was fixed, kept as deterministic cases: each
// replays on every public give-back form, one step after another, and the
// history it leaves must be linearizable and keep the window bound.

// regStep is one step of a regression: a take of n at instant at (µs)
// whose grant is kept as id when hold is set, or a give-back of n of the
// grant id.
type regStep struct {
	give bool
	id   int
	at   int64
	n    int
	hold bool
}

type regression struct {
	name  string
	burst int
	steps []regStep
}

var regressions = []regression{{
	// Issue 21's seeded interleaving: a take of 1 at 78 ms; the bucket has
	// refilled by 80 ms, when a second caller takes the whole burst; the
	// first take is given back (a later limit of its stack denied it); a
	// fourth token is then admitted at 80 ms from a burst of 3.
	name:  "fourth token from a burst of 3",
	burst: 3,
	steps: []regStep{
		{id: 1, at: 78_000, n: 1, hold: true},
		{id: 2, at: 80_000, n: 3},
		{give: true, id: 1, n: 1},
		{id: 3, at: 80_000, n: 1},
		{id: 4, at: 80_000, n: 1},
	},
}, {
	// A take given back in two parts, with a take in between that started
	// over from the state the first part left: the second part was bounded
	// by the state the take had left, not by what was still outstanding,
	// and handed out 0.636 of a token twice (Table.RefundTakeBytes).
	name:  "partial give-backs across a take that started over",
	burst: 4,
	steps: []regStep{
		{id: 1, at: 33_500, n: 2, hold: true},
		{give: true, id: 1, n: 1},
		{id: 2, at: 34_864, n: 3},
		{give: true, id: 1, n: 1},
		{id: 3, at: 34_864, n: 1},
		{id: 4, at: 35_500, n: 1},
		{id: 5, at: 35_500, n: 1},
	},
}}

// replayRegression runs r on tg and returns its history and the decisions
// kept, for the oracle.
func replayRegression(tg target, r regression) ([]porcupine.Operation, []keptDecision) {
	var rec recorder
	cl := rec.client(0)
	grants := map[int]*grant{}
	takes := map[int]int64{}
	keptAt := map[int]int{}
	left := map[int]int{}
	var kept []keptDecision
	for _, s := range r.steps {
		if s.give {
			g := grants[s.id]
			left[s.id] -= s.n
			cl.do(Give{ID: s.id, At: takes[s.id], Gives: []Item{{N: int64(s.n)}}, Last: left[s.id] == 0}, func() any {
				if err := tg.giveBack(tableKeys[0], g, s.n); err != nil {
					return err.Error()
				}
				return nil
			})
			kept[keptAt[s.id]].units -= int64(s.n)
			continue
		}
		var g grant
		out := cl.do(Decide{ID: s.id, At: s.at, Items: []Item{{N: int64(s.n)}}, Holds: s.hold}, func() any {
			ok, rem, gr := tg.take(tableKeys[0], at(s.at), s.n)
			g = gr
			return takeDecision(ok, rem)
		}).(Decision)
		if out.OK {
			kept = append(kept, keptDecision{at: s.at, units: int64(s.n)})
			keptAt[s.id], grants[s.id], takes[s.id], left[s.id] = len(kept)-1, &g, s.at, s.n
		}
	}
	cl.done()
	return rec.history(), kept
}

// TestRegressions replays the regression shapes on every give-back form.
// A form known to be unsafe must fail at least one of them, in both
// checkers; a safe form must pass all.
func TestRegressions(t *testing.T) {
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			failed := 0
			for _, r := range regressions {
				h, kept := replayRegression(f.make(testRate, r.burst), r)
				checkOutputs(t, h)
				res, msg := check(t, targetSpec(1, r.burst), h, f.name+"-"+r.name)
				v := windowViolation(kept, targetSpec(1, r.burst).Params)
				if (res == porcupine.Ok) != (v == "") {
					t.Errorf("%s: the checkers disagree: porcupine %s, window bound %q\n%s", r.name, res, v, dumpHistory(h))
				}
				if res == porcupine.Ok {
					continue
				}
				failed++
				if !f.unsafe {
					t.Errorf("%s: %s\n%s", r.name, v, msg)
				} else {
					t.Logf("%s: caught: %s", r.name, v)
				}
			}
			if f.unsafe && failed == 0 {
				t.Errorf("%s is known to over-admit, but no regression caught it", f.name)
			}
		})
	}
}

// TestFailingHistoryIsIllegal keeps the first regression as the history
// the give-backs before issue 21 produced, outputs and all: whatever the
// code does now, the specification must reject it.
func TestFailingHistoryIsIllegal(t *testing.T) {
	op := func(c int, call, ret int64, in, out any) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Call: call, Return: ret, Input: in, Output: out}
	}
	take := func(id int, atUs, n int64, hold bool) Decide {
		return Decide{ID: id, At: atUs, Items: []Item{{N: n}}, Holds: hold}
	}
	h := []porcupine.Operation{
		op(0, 1, 2, take(1, 78_000, 1, true), Decision{OK: true, Remaining: 2}),
		op(1, 3, 4, take(2, 80_000, 3, false), Decision{OK: true, Remaining: 0}),
		op(0, 5, 6, Give{ID: 1, At: 78_000, Gives: []Item{{N: 1}}, Last: true}, nil),
		op(2, 7, 8, take(3, 80_000, 1, false), Decision{OK: true, Remaining: 0}),
	}
	spec := targetSpec(1, 3)
	if res, _ := check(t, spec, h, "failing-history"); res != porcupine.Illegal {
		t.Fatalf("the history that over-admits is %s", res)
	}
	// Without the give-back's token the last take is denied: legal.
	h[3].Output = Decision{OK: false, Remaining: 0}
	if res, msg := check(t, spec, h, "fixed-history"); res != porcupine.Ok {
		t.Fatal(msg)
	}
	// And so is the history in which the give-back comes first, before
	// the second caller's take (the first take is then given back exactly).
	h2 := []porcupine.Operation{h[0], h[2], h[1], h[3]}
	for i := range h2 {
		h2[i].Call, h2[i].Return = int64(2*i+1), int64(2*i+2)
	}
	h2[3].Output = Decision{OK: false, Remaining: 0}
	if res, msg := check(t, spec, h2, "prompt-give-back"); res != porcupine.Ok {
		t.Fatal(msg)
	}
}

package lincheck

import (
	"fmt"
	"testing"
)

// TestBadGiveBacks interleaves invalid give-backs with the seeded
// scheduler's callers: more than a grant has outstanding, a negative
// count, a denied take's (zero) grant, a grant of another bucket or of
// another key of the Table. Each
// must return an error and change nothing: the window bound still holds
// over what the callers kept, and the valid give-backs after them still
// succeed.
func TestBadGiveBacks(t *testing.T) {
	const callers, steps = 4, 300
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			keys := 1
			if f.table {
				keys = len(tableKeys)
			}
			refused := 0
			for _, seed := range seedsToRun(t, seedsFor(60)) {
				s := newSched(seed, 400)
				tg := f.make(testRate, 3)
				other := f.make(testRate, 3)
				_, _, foreign := other.take(tableKeys[0], at(0), 1)
				var fns []func()
				var cs []*targetCaller
				for i := range callers {
					c := &targetCaller{s: s, tg: tg, id: i, keys: keys, burst: 3}
					cs = append(cs, c)
					fns = append(fns, c.step)
				}
				bad := func() {
					c := cs[s.rng.IntN(len(cs))]
					var err error
					var what string
					switch k := s.rng.IntN(5); {
					case k == 0 && c.state == 2:
						what = fmt.Sprintf("%d of %d outstanding", c.left+1, c.left)
						err = tg.giveBack(tableKeys[c.key], &c.g, int(c.left)+1)
					case k == 1 && c.state == 2:
						what = "-1"
						err = tg.giveBack(tableKeys[c.key], &c.g, -1)
					case k == 2:
						what = "a zero grant"
						err = tg.giveBack(tableKeys[s.rng.IntN(keys)], &grant{}, 1)
					case k == 3 && c.state == 2 && keys > 1:
						what = "a grant of another key"
						err = tg.giveBack(tableKeys[1-c.key], &c.g, 1)
					default:
						what = "another bucket's grant"
						g := foreign
						err = tg.giveBack(tableKeys[0], &g, 1)
					}
					s.tracef("bad give-back (%s): %v", what, err)
					if err == nil {
						s.errs = append(s.errs, fmt.Sprintf("step %d: a give-back of %s returned no error", len(s.trace), what))
					}
					refused++
				}
				fns = append(fns, bad)
				v := ""
				for range steps / 20 {
					s.run(20, fns)
					if len(s.errs) > 0 {
						v = s.errs[0]
						break
					}
					if v = windowViolation(s.kept, targetSpec(keys, 3).Params); v != "" {
						break
					}
				}
				if v != "" {
					t.Errorf("seed %d: %s (replay: LINCHECK_SEED=%d)", seed, v, seed)
				}
			}
			if refused == 0 {
				t.Error("no invalid give-back was tried")
			}
		})
	}
}

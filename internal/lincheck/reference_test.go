package lincheck

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// refBucket is a reference GCRA bucket (a mutex, integer µs) with one of
// three give-back rules, to check the specification itself:
//
//   - refIdeal keeps the takes still counted and, on a give-back, replays
//     them: the state is always that of the takes as kept. The
//     specification must accept every history of it.
//   - refNone never gives anything back. The specification must reject
//     its histories: a prompt give-back returns exactly what was taken.
//   - refEndRule gives back at most what of the take lies after the latest
//     instant any take has used (H), measured from the state the take
//     left: d ≤ min(n, end − H). It is unsafe when other grants were given
//     back after the take: the take's tokens then lie lower than end says,
//     a later take may have started over from them, and the give-back
//     hands them out again.
//   - refInstantRule bounds by the take's instant instead: d ≤ min(n,
//     a + c − H) for a take at a with c outstanding, and gives back
//     exactly when nothing touched the bucket since the take.
type refBucket struct {
	mu   sync.Mutex
	rule refRule
	unit int64
	tau  int64
	tat  int64
	high int64
	ver  int64 // operations so far
	// refIdeal's record of what is counted
	base int64
	kept []*refGrant
}

type refRule int

const (
	refIdeal refRule = iota
	refNone
	refEndRule
	refInstantRule
)

// refGrant is what a reference take leaves its caller.
type refGrant struct {
	at, cost  int64 // instant and tokens still counted (refIdeal)
	end, left int64 // state the take left and ticks not given back (refEndRule)
	ver       int64 // the bucket's ver after the take
}

func newRefBucket(burst int, rule refRule) *refBucket {
	return &refBucket{rule: rule, unit: testUnit, tau: testUnit * int64(burst), tat: Fresh, high: Fresh, base: Fresh}
}

func (b *refBucket) take(_ string, t time.Time, n int) (bool, int64, grant) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := us(t)
	b.high = max(b.high, now)
	b.ver++
	base := max(b.tat, now)
	c := int64(n) * b.unit
	if c > b.tau || base+c-now > b.tau {
		return false, floorDiv(b.tau-(base-now), b.unit), grant{}
	}
	b.tat = base + c
	g := &refGrant{at: now, cost: int64(n), end: b.tat, left: c, ver: b.ver}
	b.kept = append(b.kept, g)
	return true, floorDiv(b.tau-(b.tat-now), b.unit), grant{at: t, ref: g}
}

func (b *refBucket) giveBack(_ string, g *grant, n int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := g.ref
	if r == nil {
		return errors.New("reference: no grant")
	}
	b.ver++
	untouched := r.ver == b.ver-1
	switch b.rule {
	case refIdeal:
		r.cost -= min(int64(n), r.cost)
		tat := b.base
		for _, k := range b.kept {
			if k.cost > 0 {
				tat = max(tat, k.at) + k.cost*b.unit
			}
		}
		b.tat = tat
		b.kept = slices.DeleteFunc(b.kept, func(k *refGrant) bool { return k.cost == 0 })
	case refInstantRule:
		d := min(int64(n)*b.unit, r.left)
		if !untouched {
			d = min(d, r.at+r.left-b.high)
		}
		if d > 0 {
			r.left -= d
			b.tat -= d
		}
		if untouched {
			r.ver = b.ver // its own exact give-back touches nothing else
		}
	case refEndRule:
		d := min(int64(n)*b.unit, r.left, r.end-max(b.high, r.at))
		if d > 0 {
			r.end -= d
			r.left -= d
			b.tat -= d
		}
	}
	return nil
}

func floorDiv(a, d int64) int64 {
	q := a / d
	if a%d != 0 && a < 0 {
		q--
	}
	return q
}

// TestSpecAgainstReference checks the specification against the reference
// buckets: it accepts every history of the ideal one, and rejects those of
// one that never gives back (it demands exactness) and of the end rule on
// some seeds (it catches a give-back that is exact when prompt but hands
// out tokens later).
func TestSpecAgainstReference(t *testing.T) {
	seeds := seedsFor(40)
	rejected := map[refRule]int{}
	for seed := range uint64(seeds) {
		for _, rule := range []refRule{refIdeal, refNone, refEndRule, refInstantRule} {
			h := recordTarget(newRefBucket(bucketLoad.burst, rule), 1, bucketLoad, seed)
			res, msg := check(t, targetSpec(1, bucketLoad.burst), h, fmt.Sprintf("reference-rule%d-seed%d", rule, seed))
			if (rule == refIdeal || rule == refInstantRule) && res != porcupine.Ok {
				t.Error(msg)
			}
			if res == porcupine.Illegal {
				rejected[rule]++
			}
		}
	}
	if rejected[refNone] < seeds/2 {
		t.Errorf("only %d of %d histories of a bucket that never gives back were rejected", rejected[refNone], seeds)
	}
	t.Logf("histories rejected of %d: never gives back %d, end rule %d", seeds, rejected[refNone], rejected[refEndRule])
}

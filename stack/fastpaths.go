package stack

// evaluate: the one dispatch of every decision, and the two plans that
// decide without the general plan's list of buckets put in order first
// (one per-value limit; configurations whose buckets come in rank order
// limit by limit). Each plan finds the request's buckets its own way; a
// refusal goes to the same decider as the general path (decide.go), so
// they decide exactly as the general path would, denials included
// (FuzzPlansDecideAsTheGeneralPath checks it, bucket states included).

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucket"
	"github.com/sluicehq/sluice/internal/enginekit"
	"github.com/sluicehq/sluice/internal/words"
)

// evaluate decides one request against c: the one dispatch of every
// decision (Allow, AllowN, AllowAt, Reserve, ReserveSlots). The decision
// is written into *d (zero on entry), saving copies of a large struct on
// the hot path.
//
// A one-limit plan (compiled.single) and an ordered plan
// (compiled.ordered) are decided here, in line (a call fewer on the hot
// path); a request with r non-nil (Reserve), one whose context asks for
// the evaluated list, and one with a value whose bucket key is a digest
// go to the general plan (evaluateGeneral) before anything is taken, and
// so does every request of any other configuration or with a backend
// (compile sets neither plan then).
//
// One limit: the request's value is its bucket's key, and an admitted
// request is one TryTakeN.
//
// Ordered plan: each distinct dimension's value is looked up once; then
// each limit's entry is matched and its buckets taken at once, in the
// plan's order, which is the rank order the general path takes them in
// (so a request that a bucket refuses has created none of the per-value
// buckets ranked after it, except by probing them as the general path
// does). A Table's key is the value itself. The admitted path tries each
// take; at the first refusal the loop stops and orderedRefused hands that
// bucket and the rest of the plan's to the decider.
//
// The instant is ns, as bucket.NsOf gives it, and at, the same instant as
// a Time, or nil when the Stack's default clock was read as ns
// (bucket.NowNs): the one-limit and ordered plans take their buckets at
// ns, and no Time is built on their path; the general plan, whose backend
// and reservations take a Time, gets at (or, for nil, bucket.TimeOfNs(ns),
// the Time monoclock.Now would have given).
func (s *Stack) evaluate(ctx context.Context, c *compiled, keys *sluice.Keys, ns int64, at *time.Time, tokens int, r *reservation, d *sluice.Decision) error {
	if r != nil || c.ordered == nil || enginekit.EvaluatedRequested(ctx) {
		return s.evaluateGeneral(ctx, c, keys, ns, at, tokens, r, d)
	}
	if sl := c.single; sl != nil {
		// The request's first pair is usually the limit's (a one-pair
		// Keys): tried before looking the name up.
		var v string
		var found bool
		if keys.Len() > 0 {
			if kv := keys.At(0); sameName(kv.Name, sl.name) {
				v, found = kv.Value, true
			}
		}
		if !found {
			v, found = keys.Get(sl.name)
		}
		if !found {
			d.Allowed = true // a missing dimension skips the limit: none applied
			return nil
		}
		if len(v) > rawMax { // its bucket key is a digest
			return s.evaluateGeneral(ctx, c, keys, ns, at, tokens, nil, d)
		}
		rb := sl.rb
		ok, rem, why := rb.table.get().TryTakeGrantNs(ns, v, rb.cost(tokens), nil)
		if !ok {
			s.singleRefused(c, keys, ns, tokens, d, v, rem, why)
			return nil
		}
		tight, left := tighter(nil, 0, rb, rem)
		allowed(d, tight, left)
		return nil
	}

	// Each distinct dimension looked up once (a limit's keys are indices
	// into dv), whatever the number of limits that share it.
	var (
		dv      [inlineDims]string
		present uint64
	)
	next, nk := 0, keys.Len()
	for di, name := range c.dims { // at most inlineDims (orderedPlan)
		// Requests usually list their keys in one order, often the
		// configuration's: the pair after the last one found is tried
		// first, then all of them (Keys.Get).
		var v string
		var ok bool
		if next < nk {
			kv := keys.At(next)
			// kv.Name == name, a name of 4 to 16 bytes compared by two
			// overlapping word loads from each (== calls memequal, which
			// saves and reloads every live register here around it).
			same := false
			switch n := len(name); {
			case n != len(kv.Name):
			case n >= 8 && n <= 16:
				same = words.Le64(kv.Name) == words.Le64(name) && words.Le64(kv.Name[n-8:]) == words.Le64(name[n-8:])
			case n >= 4 && n < 8:
				same = words.Le32(kv.Name) == words.Le32(name) && words.Le32(kv.Name[n-4:]) == words.Le32(name[n-4:])
			default:
				same = kv.Name == name
			}
			if same {
				v, ok = kv.Value, true
				next++
			}
		}
		if !ok {
			if v, ok = keys.Get(name); !ok {
				continue
			}
		}
		bit := uint64(1) << uint(di)
		if len(v) > rawMax && c.keyDims&bit != 0 {
			return s.evaluateGeneral(ctx, c, keys, ns, at, tokens, nil, d) // its bucket key would be a digest
		}
		dv[di&(inlineDims-1)] = v
		present |= bit
	}
	var (
		items [inlineItems]item // at most inlineItems (orderedPlan: not big)
		n     int
		tight *rateBucket
		left  int64
		stop  [2]int // where a refusal stopped the loop: step, rate
		// The refusal's report (its one take: see decider.take).
		stopRem int64
		stopWhy bucket.Refusal
	)
	steps := c.ordered
	for si := range steps {
		st := &steps[si]
		if present&st.mask != st.mask {
			continue // a missing dimension skips the limit
		}
		if rb := st.rb; rb != nil { // a single limit with one rate
			k, cost := dv[st.di&(inlineDims-1)], rb.cost(tokens)
			it := &items[n&(inlineItems-1)]
			n++
			it.rb, it.key = rb, k
			g := &it.grant
			if si == len(steps)-1 {
				g = nil // nothing after the last can refuse: no give-back
			}
			ok, rem, why := rb.table.get().TryTakeGrantNs(ns, k, cost, g)
			if !ok {
				stop, stopRem, stopWhy = [2]int{si, -1}, rem, why
				goto refused
			}
			// tighter, knowing rb is no connections bucket.
			if !rb.shadow && (tight == nil || rem < left) {
				tight, left = rb, rem
			}
			continue
		}
		// st.entry, written out: not inlined, it would cost a call.
		var he *hotEntry
		var key string
		if l := st.l; l.single {
			he, key = &l.hot[l.all], dv[l.dim[0]&(inlineDims-1)]
		} else {
			var vals [inlineDims]string
			nk := len(l.keys)
			v := dv[:nk]
			if !st.inPlace {
				for k, di := range l.dim {
					vals[k] = dv[di&(inlineDims-1)]
				}
				v = vals[:nk]
			}
			idx, ok := l.matcher.Match(v)
			if !ok {
				continue // no entry: the limit does not apply
			}
			he, key = &l.hot[idx], v[nk-1] // the key of a wildcard entry's buckets (unused by an exact one)
		}
		for j := -1; j < len(he.more); j++ {
			rb := he.rb
			if j >= 0 {
				rb = he.more[j]
			}
			if rb == nil || rb.kind == kindConnections {
				continue // enforced by Reserve only
			}
			cost := rb.cost(tokens)
			it := &items[n&(inlineItems-1)]
			n++
			it.rb, it.key = rb, key
			var ok bool
			var rem int64
			var why bucket.Refusal
			if rb.shared != nil {
				ok, rem, why = rb.shared.TryTakeGrantNs(ns, cost, &it.grant)
			} else {
				ok, rem, why = rb.table.get().TryTakeGrantNs(ns, key, cost, &it.grant)
			}
			if !ok {
				stop, stopRem, stopWhy = [2]int{si, j}, rem, why
				goto refused
			}
			tight, left = tighter(tight, left, rb, rem)
		}
	}
	allowed(d, tight, left)
	return nil
refused:
	s.orderedRefused(c, keys, ns, tokens, d, &dv, present, &items, n, stop[0], stop[1], tight, left, stopRem, stopWhy)
	return nil
}

// entry returns the entry of st's limit that the request's values (dv)
// match, and the key of its per-value buckets.
func (st *orderedStep) entry(dv *[inlineDims]string) (*hotEntry, string, bool) {
	l := st.l
	if l.single {
		return &l.hot[l.all], dv[l.dim[0]&(inlineDims-1)], true
	}
	var vals [inlineDims]string
	nk := len(l.keys)
	v := dv[:nk]
	if !st.inPlace {
		for k, di := range l.dim {
			vals[k] = dv[di&(inlineDims-1)]
		}
		v = vals[:nk]
	}
	// Match hashes the values itself: one call from this loop, not
	// one per value besides (each saving and reloading its state).
	idx, ok := l.matcher.Match(v)
	if !ok {
		return nil, "", false
	}
	he := &l.hot[idx]
	if int(he.exact) < nk {
		return he, v[nk-1], true // the key of a wildcard entry's buckets
	}
	return he, "", true
}

// singleRefused decides, through the decider, the request whose one
// bucket refused evaluate's try, from that try's report (rem, why): the
// bucket is not asked again. (Kept out of evaluate, whose admitted path
// it would slow.)
//
//go:noinline
func (s *Stack) singleRefused(c *compiled, keys *sluice.Keys, ns int64, tokens int, d *sluice.Decision, v string, rem int64, why bucket.Refusal) {
	var items [1]item
	it := &items[0]
	it.rb, it.key, it.cost = c.single.rb, v, c.single.rb.cost(tokens)
	dc := decider{s: s, ns: ns, maxWindow: c.maxWindow, denied: -1} // no connections slot: t unused
	res := why.Result(rem)
	dc.decide(items[:], nil, 0, d, keys, &res)
	dc.finish(items[:], d, keys)
}

// orderedRefused decides, through the decider, the request whose try of
// items[n-1] an ordered plan's evaluate refused, having taken items[:n-1]
// (tight and left describe them): that item, from the try's report (rem,
// why; the bucket is not asked again), then every bucket the plan
// reaches after it — the rates after rate j of step si's entry (matched
// again here, which keeps the entry out of evaluate's live values; none
// for a single step's), then the steps after si.
//
//go:noinline
func (s *Stack) orderedRefused(c *compiled, keys *sluice.Keys, ns int64, tokens int, d *sluice.Decision,
	dv *[inlineDims]string, present uint64, items *[inlineItems]item, n, si, j int, tight *rateBucket, left int64, rem int64, why bucket.Refusal) {
	dc := decider{s: s, ns: ns, maxWindow: c.maxWindow, tight: tight, left: left, denied: -1}
	var he *hotEntry
	var key string
	if st := &c.ordered[si]; st.rb == nil {
		he, key, _ = st.entry(dv) // it matched in evaluate
	}
	for i := range items[:n-1] {
		items[i].taken = true // the admitted path sets neither taken nor cost: refund needs only the grant
	}
	items[n-1].cost = items[n-1].rb.cost(tokens)
	res := why.Result(rem)
	dc.decide(items[:n], nil, n-1, d, keys, &res)
	steps := c.ordered
	for {
		if he != nil {
			for j++; j < len(he.more); j++ {
				if rb := he.more[j]; rb.kind != kindConnections {
					n = dc.add(items, n, rb, key, tokens, d, keys)
				}
			}
		}
		if si++; si >= len(steps) {
			break
		}
		st := &steps[si]
		he = nil
		if present&st.mask != st.mask {
			continue // a missing dimension skips the limit
		}
		if st.rb != nil {
			n = dc.add(items, n, st.rb, dv[st.di&(inlineDims-1)], tokens, d, keys)
			continue
		}
		var ok bool
		if he, key, ok = st.entry(dv); !ok {
			he = nil
			continue
		}
		if he.rb != nil && he.rb.kind != kindConnections {
			n = dc.add(items, n, he.rb, key, tokens, d, keys)
		}
		j = -1 // the loop's j++ starts he.more at 0
	}
	dc.finish(items[:n], d, keys)
}

// add appends rb's item (keyed by key) as items[n] and decides it; it
// returns the new count.
func (dc *decider) add(items *[inlineItems]item, n int, rb *rateBucket, key string, tokens int, d *sluice.Decision, keys *sluice.Keys) int {
	it := &items[n&(inlineItems-1)]
	it.rb, it.key, it.cost = rb, key, rb.cost(tokens)
	dc.take(items[:n+1], nil, n, d, keys)
	return n + 1
}

// sameName is a == b for dimension names, as evaluate compares them
// inline: a name of 4 to 16 bytes by two overlapping word loads from each
// (== calls memequal, which saves and reloads every live register of its
// caller around it).
func sameName(a, b string) bool {
	switch n := len(b); {
	case n != len(a):
		return false
	case n >= 8 && n <= 16:
		return words.Le64(a) == words.Le64(b) && words.Le64(a[n-8:]) == words.Le64(b[n-8:])
	case n >= 4 && n < 8:
		return words.Le32(a) == words.Le32(b) && words.Le32(a[n-4:]) == words.Le32(b[n-4:])
	}
	return a == b
}

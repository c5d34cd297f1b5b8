package stack

// The shortcuts of evaluate for admitted requests of common configuration
// shapes: per-value limits only (evaluateSingles), matched configurations
// of a few buckets (evaluateDirect), and among those the ones whose
// buckets come in rank order limit by limit (evaluateOrdered). Each
// decides exactly as the general path would, and hands a denial back to
// it.

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/bucket"
	"github.com/sluicehq/sluice/internal/enginekit"
	"github.com/sluicehq/sluice/internal/hashmatch"
	"github.com/sluicehq/sluice/internal/words"
)

// evaluateSingles decides a request against a singles plan (see
// compiled.singles) when every bucket admits it: each limit's value is its
// bucket's key, taken directly, in rank order. On the first refusal it
// gives back what it took and returns false, leaving d untouched, and
// evaluate decides the request again on the general path, which reports the
// denial (a refused take takes nothing, so the state is as before the call,
// up to concurrent requests). It returns false at once when the context asks
// for the evaluated list, and for a value too long to be its own bucket key.
func (s *Stack) evaluateSingles(ctx context.Context, c *compiled, keys *sluice.Keys, t time.Time, tokens int, d *sluice.Decision) bool {
	if enginekit.EvaluatedRequested(ctx) {
		return false
	}
	if len(c.singles) == 1 {
		return evaluateSingle(&c.singles[0], keys, t, tokens, d)
	}
	var (
		taken [inlineItems]struct {
			tab *bucket.Table
			v   string
			g   bucket.Grant
		}
		n     int
		tight *rateBucket
		left  int64
	)
	for i := range c.singles {
		sl := &c.singles[i]
		v, found := keys.Get(sl.name)
		if !found {
			continue // a missing dimension skips the limit
		}
		rb := sl.rb
		cost := rb.cost(tokens)
		var ok bool
		var rem int64
		tab := rb.table.get()
		if len(v) <= rawMax { // a longer value's key is a digest: the general path
			ok, rem = tab.TryTakeGrant(t, v, cost, &taken[n].g)
		}
		if !ok {
			for j := n - 1; j >= 0; j-- {
				tk := &taken[j]
				_ = tk.tab.GiveBack(tk.v, &tk.g, int(tk.g.Outstanding())) // see item.refund
			}
			return false
		}
		taken[n].tab, taken[n].v = tab, v
		n++
		tight, left = tighter(tight, left, rb, rem)
	}
	allowed(d, tight, left)
	return true
}

// evaluateSingle is evaluateSingles for the commonest configuration, one
// per-value limit: nothing after its take can deny, so nothing is kept to
// give back (the many-limit form clears a Grant a limit on every call).
func evaluateSingle(sl *singleLimit, keys *sluice.Keys, t time.Time, tokens int, d *sluice.Decision) bool {
	// The request's first pair is usually the limit's (a one-pair Keys):
	// tried before looking the name up.
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
		return true
	}
	if len(v) > rawMax { // a longer value's key is a digest: the general path
		return false
	}
	rb := sl.rb
	ok, rem := rb.table.get().TryTakeN(t, v, rb.cost(tokens))
	if !ok {
		return false
	}
	tight, left := tighter(nil, 0, rb, rem)
	allowed(d, tight, left)
	return true
}

// directTake is one bucket evaluateDirect takes: its key is the per-value
// value itself, or kb[k0:k1] (a digest) when k1 > k0; none for a shared
// bucket.
type directTake struct {
	rb     *rateBucket
	key    string
	k0, k1 int32
	cost   int
	g      bucket.Grant
}

// evaluateDirect decides a request against a direct plan (see
// compiled.direct) when every bucket admits it: each limit's entry is
// matched (MatchHashed: no encoding built) and its buckets listed, at most
// inlineItems of them, kept in rank order by an insertion; a value that is
// its own bucket key is used in place (only digests are written out). They
// are taken in rank order, as on the general path: a request it denies
// never reaches, and so never creates, the per-value buckets ranked after
// the denying one, which a permanent denial does not even probe. When all
// succeed the tightest bucket reported is the one with the least left, the
// first among equals. On the first refusal it gives back what it took and
// returns false, leaving d untouched, and evaluate decides the request
// again on the general path, which reports the denial (as evaluateSingles
// does). It returns false at once when the context asks for the evaluated
// list.
func (s *Stack) evaluateDirect(ctx context.Context, c *compiled, keys *sluice.Keys, t time.Time, tokens int, d *sluice.Decision) bool {
	if enginekit.EvaluatedRequested(ctx) {
		return false
	}
	var (
		list   [inlineItems]directTake
		n      int
		kb     [inlineKeyBytes]byte
		kn     int32
		vals   [inlineDims]string
		hashes [inlineDims]uint64
		tight  *rateBucket
		left   int64
	)
plan:
	for _, l := range c.direct {
		var he *hotEntry
		var key string
		var k0, k1 int32
		nk := len(l.keys)
		for k, name := range l.keys {
			v, ok := keys.Get(name)
			if !ok {
				continue plan // a missing dimension skips the limit
			}
			vals[k] = v
		}
		if l.single {
			he = &l.hot[l.all]
		} else {
			for k := range l.depth {
				hashes[k] = hashmatch.Hash(vals[k])
			}
			idx, ok := l.matcher.MatchHashed(vals[:nk], hashes[:l.depth])
			if !ok {
				continue // no entry: the limit does not apply
			}
			he = &l.hot[idx]
		}
		if e := int(he.exact); e < nk {
			if w := vals[e:nk]; len(w) == 1 && len(w[0]) <= rawMax {
				key = w[0] // its own bucket key: no copy
			} else {
				k0 = kn
				kn = int32(len(appendBucketKey(kb[:kn], w)))
				k1 = kn
			}
		}
		for j := -1; j < len(he.more); j++ {
			rb := he.rb
			if j >= 0 {
				rb = he.more[j]
			}
			if rb == nil || rb.kind == kindConnections {
				continue // enforced by Reserve only
			}
			// Field by field: a struct literal copied in would be read back
			// in 16-byte moves from 8-byte stores (a store-forwarding stall).
			i := n
			tk := &list[i]
			tk.rb, tk.key, tk.k0, tk.k1, tk.cost = rb, key, k0, k1, rb.cost(tokens)
			n++
			for i > 0 && list[i].rb.rank < list[i-1].rb.rank {
				list[i], list[i-1] = list[i-1], list[i]
				i--
			}
		}
	}
	for i := range n {
		tk := &list[i]
		rb := tk.rb
		var ok bool
		var rem int64
		g := &tk.g
		if i == n-1 {
			g = nil // nothing after the last can deny: no give-back
		}
		switch {
		case rb.shared != nil:
			ok, rem = rb.shared.TryTakeGrant(t, tk.cost, g)
		case tk.k1 > tk.k0:
			ok, rem = rb.table.get().TryTakeGrantBytes(t, kb[tk.k0:tk.k1], tk.cost, g)
		default:
			ok, rem = rb.table.get().TryTakeGrant(t, tk.key, tk.cost, g)
		}
		if !ok {
			for j := i - 1; j >= 0; j-- { // see item.refund
				tk := &list[j]
				k := int(tk.g.Outstanding())
				switch {
				case tk.rb.shared != nil:
					_ = tk.rb.shared.GiveBack(&tk.g, k)
				case tk.k1 > tk.k0:
					tk.rb.table.GiveBackBytes(kb[tk.k0:tk.k1], &tk.g, k)
				default:
					_ = tk.rb.table.get().GiveBack(tk.key, &tk.g, k)
				}
			}
			return false
		}
		tight, left = tighter(tight, left, rb, rem)
	}
	allowed(d, tight, left)
	return true
}

// orderedTake is a bucket evaluateOrdered took: what to give back if a
// later one refuses.
type orderedTake struct {
	rb  *rateBucket
	key string // a Table's key (the request's value), none for a shared bucket
	g   bucket.Grant
}

// Outcomes of evaluateOrdered.
const (
	orderedAllowed = iota // decided: allowed, d filled
	orderedRefused        // a bucket refused (nothing is left taken): the general path decides
	orderedOther          // a value needs a digest key: evaluateDirect decides
)

// evaluateOrdered decides a request against an ordered plan (see
// compiled.ordered) when every bucket admits it. Each distinct dimension's
// value is looked up once; then each limit's entry is matched and its
// buckets taken at once, in the plan's order, which is the
// rank order the general path takes them in (so a request that a bucket
// refuses has created none of the per-value buckets ranked after it). A
// Table's key is the value itself: a value beyond rawMax, whose key is a
// digest, is left to evaluateDirect before anything is taken. On the first
// refusal it gives back what it took and leaves d untouched, and evaluate
// decides the request again on the general path (as evaluateDirect does).
// It leaves a request whose context asks for the evaluated list to
// evaluateDirect, which hands it on.
func (s *Stack) evaluateOrdered(ctx context.Context, c *compiled, keys *sluice.Keys, t time.Time, tokens int, d *sluice.Decision) int {
	if enginekit.EvaluatedRequested(ctx) {
		return orderedOther
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
			return orderedOther // its bucket key would be a digest
		}
		dv[di&(inlineDims-1)] = v
		present |= bit
	}
	var (
		taken [inlineItems]orderedTake
		n     int
		tight *rateBucket
		left  int64
	)
	steps := c.ordered
	for si := range steps {
		st := &steps[si]
		if present&st.mask != st.mask {
			continue // a missing dimension skips the limit
		}
		if rb := st.rb; rb != nil { // a single limit with one rate
			key := dv[st.di&(inlineDims-1)]
			tk := &taken[n]
			g := &tk.g
			if si == len(steps)-1 {
				g = nil // nothing after the last can refuse: no give-back
			}
			ok, rem := rb.table.get().TryTakeGrant(t, key, rb.cost(tokens), g)
			if !ok {
				giveBackOrdered(taken[:n])
				return orderedRefused
			}
			tk.rb, tk.key = rb, key
			n++
			// tighter, knowing rb is no connections bucket.
			if !rb.shadow && (tight == nil || rem < left) {
				tight, left = rb, rem
			}
			continue
		}
		l := st.l
		var he *hotEntry
		var key string
		if l.single {
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
			// Match hashes the values itself: one call from this loop, not
			// one per value besides (each saving and reloading its state).
			idx, ok := l.matcher.Match(v)
			if !ok {
				continue // no entry: the limit does not apply
			}
			he, key = &l.hot[idx], v[nk-1] // the key of a wildcard entry's buckets
		}
		for j := -1; j < len(he.more); j++ {
			rb := he.rb
			if j >= 0 {
				rb = he.more[j]
			}
			if rb == nil || rb.kind == kindConnections {
				continue // enforced by Reserve only
			}
			tk := &taken[n]
			var ok bool
			var rem int64
			if rb.shared != nil {
				ok, rem = rb.shared.TryTakeGrant(t, rb.cost(tokens), &tk.g)
			} else {
				ok, rem = rb.table.get().TryTakeGrant(t, key, rb.cost(tokens), &tk.g)
			}
			if !ok {
				giveBackOrdered(taken[:n])
				return orderedRefused
			}
			tk.rb, tk.key = rb, key
			n++
			tight, left = tighter(tight, left, rb, rem)
		}
	}
	allowed(d, tight, left)
	return orderedAllowed
}

// giveBackOrdered gives back what evaluateOrdered took, the last first
// (see item.refund).
func giveBackOrdered(taken []orderedTake) {
	for j := len(taken) - 1; j >= 0; j-- {
		tk := &taken[j]
		k := int(tk.g.Outstanding())
		if tk.rb.shared != nil {
			_ = tk.rb.shared.GiveBack(&tk.g, k)
		} else {
			_ = tk.rb.table.get().GiveBack(tk.key, &tk.g, k)
		}
	}
}

// sameName is a == b for dimension names, as evaluateOrdered compares them
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

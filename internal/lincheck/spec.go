package lincheck

import (
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Fresh is the state of a bucket never used: full at every instant. It is
// older than any instant a history uses, and far enough from the int64
// bounds that the arithmetic below never overflows.
const Fresh = -(int64(1) << 50)

// Params describe one GCRA bucket in the specification's units: instants
// are integer ticks (a history chooses what a tick is, for example 1 µs),
// Unit ticks refill one token, Burst tokens fit.
type Params struct {
	Unit  int64
	Burst int64
	// Group names the buckets that share a high-water mark H (the latest
	// instant of any take): the buckets of one Table, since a Table bounds
	// a give-back by its shard's latest take and keys share shards. Every
	// bucket with the same Group counts every take of the group.
	Group int
}

func (p Params) tau() int64 { return p.Unit * p.Burst }

// Item is one bucket of an operation: the bucket's index in the Spec and a
// number of tokens (a cost to take, or an amount to give back or charge).
type Item struct {
	B int
	N int64
}

// Decide is the input of a take: all or nothing over Items, in evaluation
// order, at instant At. A single item is a Bucket's or a Table's take; more
// are a stack's decision, where a denial gives back what the items before
// the denying one took. ID names the take for the give-backs that refer to
// it; Holds says that some later Give may refer to it (the caller keeps
// its grant or reservation).
type Decide struct {
	ID    int
	At    int64
	Items []Item
	Holds bool
	// Part says the Decide is one bucket's share of a decision over several
	// buckets that is not atomic (Model splits every such decision into
	// one Part per bucket): it is checked as one item of that decision is,
	// and linearized on its own.
	Part bool
}

// Decision is the output of a Decide: OK, the tokens Remaining (of the one
// bucket, or the least of a stack's buckets when OK), and on a denial the
// index in Items of the item that denied (Denied; 0 for one bucket).
// RemainingUnknown skips the check of Remaining (a denial of a stack, whose
// Remaining is always 0, sets it).
type Decision struct {
	OK               bool
	Remaining        int64
	Denied           int
	RemainingUnknown bool
}

// Give is the input of a give-back or settlement of the take ID: Gives
// returns Items[i].N of what that take took from bucket Items[i].B;
// Charges takes Charges[i].N more from bucket Charges[i].B unconditionally
// (debt allowed) at an instant in [ChargeLo, ChargeHi] (a reservation
// reconciled above its estimate, at a clock read the history cannot pin
// down exactly). Last says the take will never be referred to again. At is
// the instant passed to the give-back, if any (it only widens what the
// specification accepts: a give-back may leave a bucket full at any
// instant some operation has used). The output of a Give is ignored.
type Give struct {
	ID       int
	At       int64
	Gives    []Item
	Charges  []Item
	ChargeLo int64
	ChargeHi int64
	Last     bool
	// Racing is the latest instant of a take or charge on the Give's
	// Group whose interval overlaps the Give's (Fresh: none). Model sets
	// it when the Spec is HighEarly; it is ignored otherwise.
	Racing int64
}

// kept is a take the specification still counts: its instant, the tokens
// not given back, whether a Give may still refer to it, whether any
// operation has touched its group since it, and whether a take on the
// group had used a later instant before it.
type kept struct {
	id      int
	at      int64
	cost    int64
	out     bool
	touched bool
	stale   bool
}

// bstate is what the specification knows of one bucket: its GCRA state
// (the theoretical arrival time, tat) lies in [lo, hi]; base and kept
// replay the ideal state, in which every give-back returned exactly what
// was given; xmax is the latest instant any operation used, high the
// latest instant of any take on the bucket's group (H).
type bstate struct {
	lo, hi int64
	base   int64
	kept   []kept
	xmax   int64
	high   int64
}

// State is the specification's state: one bstate per bucket.
type State []bstate

// Spec is a sequential specification of a set of GCRA buckets (one
// Bucket, a Table's keys, or a stack's AND-stacked buckets), nondeterministic
// where the real code may choose:
//
// A take of c at instant t from a bucket in state tat is admitted iff
// max(tat, t) + c·Unit − t ≤ Burst·Unit, and then tat becomes
// max(tat, t) + c·Unit; Remaining is ⌊(Burst·Unit − (max(tat,t) [+ c·Unit] − t)) / Unit⌋.
// Time never moves backwards: a caller with an older instant sees no
// tokens a later caller has taken.
//
// A give-back of n tokens of a take of c outstanding tokens at instant a
// returns d ticks, where
//
//   - the state after it is never below the ideal state: the replay, by
//     the rule above, of every take still counted, with the given-back
//     tokens removed from the take they came from. This is the promise: no
//     give-back ever hands out a token that was not refilled. (It may go
//     below tat − n·Unit: the ideal forgets the instant a take that is
//     given back in full started from, which only callers with older
//     instants can see.)
//   - a prompt give-back, with no operation on the bucket's group in
//     between, of a take at an instant no earlier than any take on the
//     group before it, returns exactly what was taken (d = n·Unit).
//     Otherwise d ≥ min(n·Unit, c·Unit − (H − a)) where H is the latest
//     instant of any take on the group so far: a later take may have
//     started over from the bucket's refilled state, and then less comes
//     back. A give-back may also leave the bucket full at an instant some
//     operation has used (it need not reach further back), whatever d.
//
// Because the real amount is not observable, the state is an interval of
// tat values; takes narrow it by what they observe.
//
// A stack's decision is all or nothing over its items in order. If OK,
// every bucket admits and Remaining is the least left; if denied at item
// j, bucket j denies and nothing is taken. Unless the Spec is Atomic, a
// stack takes its buckets one by one and gives back on a denial, and a
// concurrent decision may see such a take for a moment and be denied by
// it, or see fewer tokens left. So a non-atomic decision is checked only
// from the side that matters: whatever it admits must fit the state
// (every bucket admits, each has at least Remaining left), and a denial,
// or an admission after a fast path's refusal, may leave on each bucket
// anything from nothing to its cost (see the give-back rule). Its buckets
// are taken one by one, each at a moment of its own: two overlapping
// decisions may reach one bucket in one order and the next in the other.
// So Model checks a non-atomic decision as one Part per bucket, each
// linearized on its own, and checks each Group's buckets apart from the
// others (a porcupine partition): nothing but a Group's takes moves its
// state.
type Spec struct {
	Params []Params
	// Atomic says that a decision over several buckets happens in one
	// step (a Redis script): its denials and its Remaining are then
	// checked exactly, and a denial leaves every bucket as it was.
	Atomic bool
	// HighEarly says that a take raises its Group's H before it takes
	// effect, not at its linearization point: a Bucket's lock-free take
	// raises its high-water instant before its compare-and-swap, so that a
	// give-back that finds the take's state also finds its instant. A
	// give-back that overlaps such a take (their intervals in the history
	// overlap) may then see the take's instant in H although the take is
	// linearized after it, and return less, as it would after the take
	// (the take then finds the state that less-exact give-back left). Model
	// bounds the exactness of each Give by the latest instant of the takes
	// and charges overlapping it (Give.Racing) as well as by H. Only the
	// amount a give-back must return at least is affected: what it may
	// return at most (the ideal state) is not.
	HighEarly bool
	// Slack is how many ticks less than exact a give-back may return where
	// the specification asks for exactness (or for its bound c − (H − a)):
	// an implementation that keeps the high-water instant H at a coarser
	// resolution than the instants returns up to that much less.
	Slack int64
}

// Init is the initial state: every bucket fresh.
func (s *Spec) Init() State {
	st := make(State, len(s.Params))
	for i := range st {
		st[i] = bstate{lo: Fresh, hi: Fresh, base: Fresh, xmax: Fresh, high: Fresh}
	}
	return st
}

func (st State) clone() State {
	out := make(State, len(st))
	for i, b := range st {
		out[i] = b
		out[i].kept = slices.Clone(b.kept)
	}
	return out
}

// replay is the ideal state of b: its settled base, then every counted take.
func (b *bstate) replay(p Params) int64 {
	tat := b.base
	for _, k := range b.kept {
		if k.cost > 0 {
			tat = max(tat, k.at) + k.cost*p.Unit
		}
	}
	return tat
}

// fold moves the counted takes before the first one a Give may still refer
// to into base: they are never given back, so only their replay matters.
func (b *bstate) fold(p Params) {
	i := slices.IndexFunc(b.kept, func(k kept) bool { return k.out })
	if i < 0 {
		i = len(b.kept)
	}
	if i == 0 {
		return
	}
	for _, k := range b.kept[:i] {
		if k.cost > 0 {
			b.base = max(b.base, k.at) + k.cost*p.Unit
		}
	}
	b.kept = slices.Clone(b.kept[i:])
}

// admitBelow returns the largest tat that admits a take of c at t, and
// false when no state does (c above the burst).
func (p Params) admitBelow(t, c int64) (int64, bool) {
	if c > p.Burst {
		return 0, false
	}
	return t + p.tau() - c*p.Unit, true
}

// baseRange narrows [lo, hi] to the tats whose base max(tat, t) lies in
// [a, z]; ok is false when none does.
func baseRange(lo, hi, t, a, z int64) (int64, int64, bool) {
	if t > z {
		return 0, 0, false
	}
	if a > t {
		lo = max(lo, a)
	}
	hi = min(hi, z)
	return lo, hi, lo <= hi
}

// remainingRange is the range of bases max(tat, t) for which a take of c
// (c = 0 for a denial) at t reports rem tokens left:
// ⌊(tau + t − c·U − base)/U⌋ = rem.
func (p Params) remainingRange(t, c, rem int64) (int64, int64) {
	z := p.tau() + t - c*p.Unit - rem*p.Unit
	return z - (p.Unit - 1), z
}

// raise records a take attempt at t on every bucket of b's group.
func (s *Spec) raise(st State, b int, t int64) {
	s.touch(st, b, -1)
	g := s.Params[b].Group
	for i := range st {
		if s.Params[i].Group == g {
			st[i].high = max(st[i].high, t)
			st[i].xmax = max(st[i].xmax, t)
		}
	}
}

// touch records an operation on b's group on every take counted there but
// the one named except.
func (s *Spec) touch(st State, b int, except int) {
	g := s.Params[b].Group
	for i := range st {
		if s.Params[i].Group != g {
			continue
		}
		for j := range st[i].kept {
			if k := &st[i].kept[j]; k.out && k.id != except {
				k.touched = true
			}
		}
	}
}

// Step applies one operation to st and returns every state it may lead to
// (none: the output is impossible).
func (s *Spec) Step(st State, in, out any) []State {
	switch op := in.(type) {
	case Decide:
		d, ok := out.(Decision)
		if !ok {
			return nil // an error: not an outcome the specification allows
		}
		return s.decide(st, op, d)
	case Give:
		return []State{s.give(st, op)}
	}
	panic(fmt.Sprintf("lincheck: unknown input %T", in))
}

func (s *Spec) decide(st State, op Decide, d Decision) []State {
	t := op.At
	// A decision over several buckets that is not atomic takes them one by
	// one and gives back on a denial: concurrent decisions may see its
	// takes for a moment. What they observe then (a denial, a Remaining)
	// may reflect a hold that goes away, so it only bounds the state from
	// above: an admission, and a Remaining of at least so many, are true
	// of the state without the holds too.
	holds := op.Part || len(op.Items) > 1 && !s.Atomic
	if !d.OK {
		j := d.Denied
		if j < 0 || j >= len(op.Items) {
			return nil
		}
		nst := st.clone()
		if !holds {
			it := op.Items[j]
			p := s.Params[it.B]
			b := &nst[it.B]
			if T, ok := p.admitBelow(t, it.N); ok {
				b.lo = max(b.lo, T+1)
			}
			if b.lo > b.hi {
				return nil
			}
			if !d.RemainingUnknown {
				a, z := p.remainingRange(t, 0, d.Remaining)
				var ok bool
				if b.lo, b.hi, ok = baseRange(b.lo, b.hi, t, a, z); !ok {
					return nil
				}
			}
		} else {
			for _, o := range op.Items {
				// taken and given back (or probed), with concurrent
				// decisions in between: anything from nothing to all of
				// it; the denying bucket too, which a fast path's try
				// may have taken before the general path decided again
				q := s.Params[o.B]
				nst[o.B].hi = max(nst[o.B].hi, t) + o.N*q.Unit
			}
		}
		for _, o := range op.Items {
			s.raise(nst, o.B, t)
		}
		return []State{nst}
	}
	// Admitted: every bucket admits.
	nst := st.clone()
	for _, it := range op.Items {
		p := s.Params[it.B]
		T, ok := p.admitBelow(t, it.N)
		if !ok {
			return nil
		}
		b := &nst[it.B]
		b.hi = min(b.hi, T)
		if b.lo > b.hi {
			return nil
		}
	}
	var alts []State
	switch {
	case d.RemainingUnknown:
		alts = []State{nst}
	case holds:
		// Every bucket has at least d.Remaining left.
		for _, it := range op.Items {
			_, z := s.Params[it.B].remainingRange(t, it.N, d.Remaining)
			b := &nst[it.B]
			var ok bool
			if b.lo, b.hi, ok = baseRange(b.lo, b.hi, t, Fresh, z); !ok {
				return nil
			}
		}
		alts = []State{nst}
	default:
		// The least left is d.Remaining: some bucket j has exactly that
		// left, every other at least that.
		for j := range op.Items {
			alt := nst.clone()
			feasible := true
			for i, it := range op.Items {
				p := s.Params[it.B]
				a, z := p.remainingRange(t, it.N, d.Remaining)
				if i != j {
					a = Fresh // at least d.Remaining left: base ≤ z
				}
				b := &alt[it.B]
				var ok bool
				if b.lo, b.hi, ok = baseRange(b.lo, b.hi, t, a, z); !ok {
					feasible = false
					break
				}
			}
			if feasible {
				alts = append(alts, alt)
			}
		}
	}
	for _, alt := range alts {
		stale := make([]bool, len(op.Items))
		for i, it := range op.Items {
			stale[i] = t < alt[it.B].high
			s.raise(alt, it.B, t)
		}
		for i, it := range op.Items {
			p := s.Params[it.B]
			b := &alt[it.B]
			b.lo = max(b.lo, t) + it.N*p.Unit
			b.hi = max(b.hi, t) + it.N*p.Unit
			if holds {
				// A stack may try a fast path first and, on a refusal,
				// give back and decide again: what a fast try took may
				// stay in part, if concurrent takes came in between.
				b.hi += it.N * p.Unit
			}
			b.kept = append(b.kept, kept{id: op.ID, at: t, cost: it.N, out: op.Holds, stale: stale[i]})
			b.fold(p)
		}
	}
	return alts
}

func (s *Spec) give(st State, op Give) State {
	nst := st.clone()
	for _, it := range op.Gives {
		p := s.Params[it.B]
		b := &nst[it.B]
		b.xmax = max(b.xmax, op.At)
		k := slices.IndexFunc(b.kept, func(k kept) bool { return k.id == op.ID && k.out })
		if k < 0 || it.N <= 0 {
			continue // nothing of that take is outstanding here
		}
		tk := &b.kept[k]
		n := min(it.N, tk.cost)
		dlo := n * p.Unit
		h := b.high
		if s.HighEarly {
			h = max(h, op.Racing) // a take in flight has raised H already
		}
		if tk.touched || tk.stale || h > b.high {
			dlo = max(0, min(dlo, tk.cost*p.Unit-max(0, h-tk.at)))
		}
		dlo = max(0, dlo-s.Slack)
		tk.cost -= n
		s.touch(nst, it.B, op.ID)
		ideal := b.replay(p)
		b.lo, b.hi = ideal, max(ideal, b.hi-dlo, min(b.hi, b.xmax))
	}
	for _, it := range op.Charges {
		p := s.Params[it.B]
		s.raise(nst, it.B, op.ChargeHi)
		b := &nst[it.B]
		b.lo = max(b.lo, op.ChargeLo) + it.N*p.Unit
		b.hi = max(b.hi, op.ChargeHi) + it.N*p.Unit
		b.kept = append(b.kept, kept{id: -1, at: op.ChargeLo, cost: it.N})
	}
	for i := range nst {
		if op.Last {
			for j := range nst[i].kept {
				if nst[i].kept[j].id == op.ID {
					nst[i].kept[j].out = false
				}
			}
		}
		nst[i].fold(s.Params[i])
	}
	return nst
}

func (st State) equal(o State) bool {
	if len(st) != len(o) {
		return false
	}
	for i := range st {
		a, b := &st[i], &o[i]
		if a.lo != b.lo || a.hi != b.hi || a.base != b.base || a.xmax != b.xmax || a.high != b.high || !slices.Equal(a.kept, b.kept) {
			return false
		}
	}
	return true
}

func (st State) String() string {
	var sb strings.Builder
	for i, b := range st {
		if i > 0 {
			sb.WriteString(" | ")
		}
		fmt.Fprintf(&sb, "tat∈[%s,%s]", tick(b.lo), tick(b.hi))
		if len(b.kept) > 0 {
			sb.WriteString(" kept")
			for _, k := range b.kept {
				fmt.Fprintf(&sb, " #%d:%d@%d", k.id, k.cost, k.at)
			}
		}
	}
	return sb.String()
}

func tick(v int64) string {
	if v <= Fresh/2 {
		return "fresh"
	}
	return fmt.Sprint(v)
}

// Model returns the porcupine model of s.
func (s *Spec) Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{s.Init()} },
		Step: func(state, in, out any) []any {
			next := s.Step(state.(State), in, out)
			res := make([]any, len(next))
			for i, n := range next {
				res[i] = n
			}
			return res
		},
		Equal:             func(a, b any) bool { return a.(State).equal(b.(State)) },
		Partition:         s.partition,
		DescribeOperation: Describe,
		DescribeState:     func(st any) string { return st.(State).String() },
	}
	return nm.ToModel()
}

// partition splits a history into one per Group of buckets, which share
// no state: every operation goes to the Groups of its buckets, with only
// those buckets' items; a Give goes to every Group its take reached, so
// that its Last is seen there. Unless the Spec is Atomic, a decision over
// several buckets becomes one Part per bucket, with the same instant,
// interval and outcome: the real code takes its buckets one by one, each
// at its own moment, so overlapping decisions may reach two buckets in
// different orders (a history kept in testdata/split shows one), which
// one linearization point for the whole decision forbids.
func (s *Spec) partition(h []porcupine.Operation) [][]porcupine.Operation {
	group := func(b int) int {
		if b < 0 || b >= len(s.Params) {
			return -1 // an index out of range: left to Step to refuse
		}
		return s.Params[b].Group
	}
	var order []int
	parts := map[int][]porcupine.Operation{}
	add := func(g int, op porcupine.Operation) {
		if _, ok := parts[g]; !ok {
			order = append(order, g)
		}
		parts[g] = append(parts[g], op)
	}
	reached := map[int][]int{} // take ID -> the Groups its items reached
	for _, op := range h {
		switch in := op.Input.(type) {
		case Decide:
			var gs []int
			for _, it := range in.Items {
				if g := group(it.B); !slices.Contains(gs, g) {
					gs = append(gs, g)
				}
			}
			reached[in.ID] = gs
			if s.Atomic && len(gs) > 1 {
				return [][]porcupine.Operation{h} // an atomic decision across Groups ties them
			}
			d, isDecision := op.Output.(Decision)
			for _, g := range gs {
				for _, it := range in.Items {
					if group(it.B) != g {
						continue
					}
					if s.Atomic || len(in.Items) == 1 {
						add(g, op)
						break
					}
					p := op
					p.Input = Decide{ID: in.ID, At: in.At, Items: []Item{it}, Holds: in.Holds, Part: true}
					if isDecision {
						p.Output = Decision{OK: d.OK, Remaining: d.Remaining, RemainingUnknown: d.RemainingUnknown || !d.OK}
					}
					add(g, p)
				}
			}
		case Give:
			if s.HighEarly {
				in.Racing = Fresh // set per Group below
			}
			gs := slices.Clone(reached[in.ID])
			for _, it := range slices.Concat(in.Gives, in.Charges) {
				if g := group(it.B); !slices.Contains(gs, g) {
					gs = append(gs, g)
				}
			}
			for _, g := range gs {
				p := op
				gv := in
				gv.Gives = slices.DeleteFunc(slices.Clone(in.Gives), func(it Item) bool { return group(it.B) != g })
				gv.Charges = slices.DeleteFunc(slices.Clone(in.Charges), func(it Item) bool { return group(it.B) != g })
				if s.HighEarly {
					gv.Racing = s.racing(h, op, g)
				}
				p.Input = gv
				add(g, p)
			}
		default:
			return [][]porcupine.Operation{h}
		}
	}
	out := make([][]porcupine.Operation, 0, len(order))
	for _, g := range order {
		out = append(out, parts[g])
	}
	return out
}

// racing returns the latest instant of the takes and charges on Group g
// whose intervals overlap op's (Fresh: none): those that may have raised
// g's H before op read it, whatever order they are linearized in. A take
// that returned before op was called is linearized before it and counted
// in H already; one called after op returned cannot have touched it.
func (s *Spec) racing(h []porcupine.Operation, op porcupine.Operation, g int) int64 {
	inGroup := func(its []Item) bool {
		return slices.ContainsFunc(its, func(it Item) bool {
			return it.B >= 0 && it.B < len(s.Params) && s.Params[it.B].Group == g
		})
	}
	r := Fresh
	for _, o := range h {
		if o.Call >= op.Return || o.Return <= op.Call {
			continue
		}
		switch in := o.Input.(type) {
		case Decide:
			if inGroup(in.Items) {
				r = max(r, in.At)
			}
		case Give:
			if inGroup(in.Charges) {
				r = max(r, in.ChargeHi)
			}
		}
	}
	return r
}

// Describe renders an operation for reports and visualizations.
func Describe(in, out any) string {
	switch op := in.(type) {
	case Decide:
		d := out.(Decision)
		var sb strings.Builder
		fmt.Fprintf(&sb, "#%d take@%d", op.ID, op.At)
		for _, it := range op.Items {
			fmt.Fprintf(&sb, " b%d:%d", it.B, it.N)
		}
		if op.Holds {
			sb.WriteString(" (held)")
		}
		if op.Part {
			sb.WriteString(" (part)")
		}
		switch {
		case d.OK:
			fmt.Fprintf(&sb, " -> ok, %d left", d.Remaining)
		case d.RemainingUnknown:
			fmt.Fprintf(&sb, " -> denied by item %d", d.Denied)
		default:
			fmt.Fprintf(&sb, " -> denied by item %d, %d left", d.Denied, d.Remaining)
		}
		return sb.String()
	case Give:
		var sb strings.Builder
		fmt.Fprintf(&sb, "give back #%d @%d", op.ID, op.At)
		for _, it := range op.Gives {
			fmt.Fprintf(&sb, " b%d:%d", it.B, it.N)
		}
		for _, it := range op.Charges {
			fmt.Fprintf(&sb, " charge b%d:%d@[%d,%d]", it.B, it.N, op.ChargeLo, op.ChargeHi)
		}
		if op.Racing > op.At && len(op.Gives) > 0 {
			fmt.Fprintf(&sb, " (beside a take @%d)", op.Racing)
		}
		if op.Last {
			sb.WriteString(" (last)")
		}
		return sb.String()
	}
	return fmt.Sprintf("%v -> %v", in, out)
}

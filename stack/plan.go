package stack

// The compiled plan: what a configuration becomes when it is loaded, and
// how a reload carries the buckets of the limits that keep their id.

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucket"
	"github.com/sluicehq/sluice/internal/bucketkey"
	"github.com/sluicehq/sluice/internal/hashmatch"
)

// compiled is one immutable configuration, precompiled into a plan: the
// distinct dimension names (each resolved and hashed at most once per
// request), the limits in the order they are visited, and every bucket's
// rank in the evaluation order.
type compiled struct {
	limits []*limit // customer limits, then service limits, in config order
	// order is limits sorted by the ordering criteria known per limit
	// (customer first, more dimension keys first): visiting them in this
	// order, the items of a request arrive almost sorted by rank.
	order []*limit
	dims  []string // distinct dimension names, indexed by limit.dim
	// big is set when a request may need more items or key bytes than
	// evaluate's stack buffers hold.
	big bool
	// maxWindow is the longest refill-from-empty time of any per-value
	// bucket: the RetryAfter of a Capacity denial (WithMaxBuckets).
	maxWindow time.Duration
	conns     bool // some entry has a connections limit (see ReserveSlots)
	// hashDims has bit i set when some limit matches on the value of
	// dimension i (i < 64): evaluate hashes those values up front.
	hashDims uint64
	// single (with ordered) is set when the configuration is one single limit (one key,
	// only the all-wildcard entry) with one rate, of requests or tokens:
	// the shape of most middleware configurations (per caller, per API
	// key), which evaluate decides with one take.
	single *singleLimit
	// ordered, set when the buckets Allow takes are in rank order limit by
	// limit and every bucket key is one value (see orderedPlan), lists the
	// limits evaluate visits, by rank, on an ordered plan.
	ordered []orderedStep
	// keyDims has bit i set when dimension i's value is some ordered
	// limit's bucket key (a value beyond rawMax then needs a digest, which
	// evaluate leaves to the general plan).
	keyDims uint64
}

// singleLimit is the limit of a compiled.single plan.
type singleLimit struct {
	name string
	rb   *rateBucket
}

type limit struct {
	id          string
	description string
	keys        []string
	dim         []int32 // index in compiled.dims of each key
	depth       int     // matcher.Depth(): how many leading values matching hashes
	all         int     // matcher.All(), the entry when depth is 0
	single      bool    // one key and only the all-wildcard entry
	// prev is the limit visited before this one (compiled.order) when it
	// has the same dimension keys (sameDims): its resolved values serve.
	prev     *limit
	sameDims bool
	matcher  *hashmatch.Matcher
	entries  []*entry
	// hot[i] is what a decision reads of entries[i], by value: the matched
	// index leads straight to the first bucket, not through the entry and
	// its rates slice (two dependent loads fewer per limit per request).
	hot     []hotEntry
	shadow  bool
	service bool
}

// hotEntry is the part of an entry that decisions read.
type hotEntry struct {
	exact int32         // entry.exact
	rb    *rateBucket   // entry.rates[0], or nil
	more  []*rateBucket // entry.rates[1:]
}

type entry struct {
	values []string // configured values, "*" included
	exact  int      // number of leading exact values
	rates  []*rateBucket
}

// rateBucket is one {rate, period} of one metric of one entry. The fields
// every decision reads come first, in the first cache line.
type rateBucket struct {
	// One of shared (exact entry) or table (wildcard entry); for the
	// connections metric, conn or connTab instead.
	shared *bucket.Bucket
	table  *lazyTable
	// rank is the bucket's position in the evaluation order of the whole
	// configuration (see before), computed once per compile.
	rank   int32
	kind   metricKind
	shadow bool // lim.shadow
	// rate and period (ns) order strictness without floats: rate/period
	// values are compared by cross-multiplication.
	rate    int64
	burst   int64
	lim     *limit
	ent     *entry
	period  int64
	window  time.Duration // time to refill from empty
	conn    *connPool
	connTab *connTable
	memConn *memConn // a MemoryBackend's slots (Op.Conn) instead
	metric  string
	cfg     Rate
	// keyPrefix is the bucket key (bucketkey.Render) without the request values, for backends
	// (computed only when the Stack has one).
	keyPrefix string
}

// lazyTable is the Table of one rate of a wildcard entry, created on first
// use: a configuration of 50 limits × 1,000 "*" entries holds no Table for
// entries no request has reached. A reload that keeps the entry shares the
// lazyTable, so a request still deciding on the previous configuration and
// one on the new see the same buckets, whichever creates the Table.
type lazyTable struct {
	p      atomic.Pointer[bucket.Table]
	mu     sync.Mutex // serializes creation and reconfiguration
	lim    rate.Limit
	burst  int
	budget *bucket.Budget // the Stack's WithMaxBuckets bound, or nil
}

func newLazyTable(lim rate.Limit, burst int, budget *bucket.Budget) *lazyTable {
	return &lazyTable{lim: lim, burst: burst, budget: budget}
}

// get returns the Table, creating it with the current parameters.
func (z *lazyTable) get() *bucket.Table {
	if t := z.p.Load(); t != nil {
		return t
	}
	return z.create()
}

func (z *lazyTable) create() *bucket.Table {
	z.mu.Lock()
	defer z.mu.Unlock()
	if t := z.p.Load(); t != nil {
		return t
	}
	var opts []bucket.Option
	if z.budget != nil {
		opts = append(opts, bucket.WithBudget(z.budget))
	}
	t := bucket.NewTable(z.lim, z.burst, opts...)
	z.p.Store(t)
	return t
}

// reconfigure changes the parameters, of the Table too if it exists.
func (z *lazyTable) reconfigure(now time.Time, lim rate.Limit, burst int) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.lim, z.burst = lim, burst
	if t := z.p.Load(); t != nil {
		t.Reconfigure(now, lim, burst)
	}
}

// TakeBytes takes from key's bucket (see bucket.Table.TakeBytes).
func (z *lazyTable) TakeBytes(at time.Time, key []byte, n int) bucket.Result {
	return z.get().TakeBytes(at, key, n)
}

// ChargeBytes charges key's bucket (see bucket.Table.ChargeBytes).
func (z *lazyTable) ChargeBytes(at time.Time, key []byte, n int) {
	z.get().ChargeBytes(at, key, n)
}

// GiveBackBytes gives back n of what g has outstanding to key's bucket
// (see bucket.Table.GiveBackBytes); without a Table nothing was taken. The
// grant is the Table's own take of key, so GiveBackBytes cannot refuse it.
func (z *lazyTable) GiveBackBytes(key []byte, g *bucket.Grant, n int) {
	if t := z.p.Load(); t != nil {
		_ = t.GiveBackBytes(key, g, n)
	}
}

// metricKind is the metric as a small integer, for the per-request switch.
type metricKind uint8

const (
	kindRequests metricKind = iota
	kindTokens
	kindConnections
)

func kindOf(metric string) metricKind {
	switch metric {
	case sluice.MetricTokens:
		return kindTokens
	case sluice.MetricConnections:
		return kindConnections
	}
	return kindRequests
}

func (r *rateBucket) limitRate() rate.Limit {
	return rate.Limit(float64(r.cfg.Rate) / r.cfg.Period.Duration().Seconds())
}

func (r *rateBucket) burstOf() int {
	if r.cfg.Rate == 0 {
		return 0 // rate 0 blocks
	}
	if r.cfg.Burst > 0 {
		return int(r.cfg.Burst)
	}
	return int(r.cfg.Rate)
}

// compileValid compiles a configuration already validated.
func compileValid(cfg Config, prev *compiled, now time.Time, withKeys bool, budget *bucket.Budget) *compiled {
	old := map[string]*limit{}
	if prev != nil {
		for _, l := range prev.limits {
			old[l.id] = l
		}
	}
	c := &compiled{}
	dimIndex := map[string]int32{}
	add := func(rls []RateLimit, service bool) {
		for i := range rls {
			l := compileLimit(&rls[i], old[rls[i].RateLimitID], now, withKeys, budget)
			l.service = service
			l.dim = make([]int32, len(l.keys))
			for k, name := range l.keys {
				di, ok := dimIndex[name]
				if !ok {
					di = int32(len(c.dims))
					dimIndex[name] = di
					c.dims = append(c.dims, name)
				}
				l.dim[k] = di
			}
			c.limits = append(c.limits, l)
		}
	}
	add(cfg.RateLimits, false)
	add(cfg.ServiceLimits, true)

	// Rank every bucket in evaluation order. The sort is stable over the
	// configuration order (limit, entry, rate), which breaks ties exactly as
	// evaluation in configuration order would.
	var all []*rateBucket
	owner := map[*rateBucket]*limit{}
	for _, l := range c.limits {
		for _, en := range l.entries {
			for _, rb := range en.rates {
				all = append(all, rb)
				owner[rb] = l
				if rb.table != nil {
					c.maxWindow = max(c.maxWindow, rb.window)
				}
			}
		}
	}
	slices.SortStableFunc(all, func(a, b *rateBucket) int {
		switch {
		case before(owner[a], a, owner[b], b):
			return -1
		case before(owner[b], b, owner[a], a):
			return 1
		}
		return 0
	})
	for i, rb := range all {
		rb.rank = int32(i)
	}
	all, owner = nil, nil
	maxItems, maxKey, maxKeys := 0, 0, 0
	for _, l := range c.limits {
		maxKeys = max(maxKeys, len(l.keys))
		most, wild := 0, false
		for _, en := range l.entries {
			most = max(most, len(en.rates))
			wild = wild || en.exact < len(l.keys)
		}
		maxItems += most
		if wild {
			maxKey += rawMax
		}
	}
	c.big = maxItems > inlineItems || maxKey > inlineKeyBytes || maxKeys > inlineDims || len(c.dims) > inlineDims
	c.order = slices.Clone(c.limits)
	slices.SortStableFunc(c.order, func(a, b *limit) int {
		if a.service != b.service {
			if !a.service {
				return -1
			}
			return 1
		}
		return len(b.keys) - len(a.keys)
	})
	for i := 1; i < len(c.order); i++ {
		l, p := c.order[i], c.order[i-1]
		if slices.Equal(l.keys, p.keys) {
			l.prev, l.sameDims = p, true
		}
	}
	c.conns = hasConnections(c)
	if !withKeys { // with a backend, every decision is the general plan's
		c.single = singlePlan(c)
		c.ordered, c.keyDims = orderedPlan(c)
	}
	for _, l := range c.limits {
		for _, di := range l.dim[:l.depth] {
			if di < 64 {
				c.hashDims |= 1 << uint(di)
			}
		}
	}
	return c
}

// singlePlan returns c's one limit as a single plan (see
// compiled.single), or nil when c has another shape.
func singlePlan(c *compiled) *singleLimit {
	if len(c.limits) != 1 || c.big {
		return nil
	}
	l := c.limits[0]
	if !l.single {
		return nil
	}
	h := &l.hot[l.all]
	if h.rb == nil || len(h.more) > 0 || h.rb.table == nil || h.rb.kind == kindConnections {
		return nil
	}
	return &singleLimit{name: l.keys[0], rb: h.rb}
}

// allowLimits returns the limits Allow visits: c.order without the limits
// that have only connections buckets (Allow does not take those).
func allowLimits(c *compiled) []*limit {
	var out []*limit
	for _, l := range c.order {
		if slices.ContainsFunc(l.entries, func(en *entry) bool {
			return slices.ContainsFunc(en.rates, func(rb *rateBucket) bool { return rb.kind != kindConnections })
		}) {
			out = append(out, l)
		}
	}
	return out
}

// orderedPlan returns the limits Allow visits (allowLimits) sorted by rank, when
// visiting them in that order and each entry's rates in their order takes
// the buckets in rank order (every bucket of a limit ranks before every
// bucket of the next), and when each wildcard entry's bucket key is one
// value (only its last value is "*"); also the dimensions whose values are
// such keys (bit i for dimension i). Nil when c is big, has no limit Allow
// takes, has another shape or more distinct dimensions than
// evaluate resolves at once.
//
// Such a plan needs no list of buckets put in order before the takes:
// evaluate takes each as it matches it, in the order the general
// path takes them.
func orderedPlan(c *compiled) ([]orderedStep, uint64) {
	lims := allowLimits(c)
	if c.big || len(lims) == 0 || len(c.dims) > inlineDims {
		return nil, 0
	}
	type span struct {
		l      *limit
		lo, hi int32 // the ranks of the limit's buckets Allow takes
	}
	spans := make([]span, 0, len(lims))
	var keyDims uint64
	for _, l := range lims {
		sp := span{l: l, lo: math.MaxInt32, hi: -1}
		nk := len(l.keys)
		for _, en := range l.entries {
			if en.exact < nk-1 {
				return nil, 0 // two "*" or more: the bucket key is a digest
			}
			if en.exact == nk-1 {
				keyDims |= 1 << uint(l.dim[nk-1])
			}
			last := int32(-1)
			for _, rb := range en.rates {
				if rb.kind == kindConnections {
					continue // enforced by Reserve only
				}
				if rb.rank < last {
					return nil, 0 // an entry's rates out of rank order
				}
				last = rb.rank
				sp.lo, sp.hi = min(sp.lo, rb.rank), max(sp.hi, rb.rank)
			}
		}
		spans = append(spans, sp)
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.lo) - int(b.lo) })
	out := make([]orderedStep, len(spans))
	for i, sp := range spans {
		if i > 0 && spans[i-1].hi >= sp.lo {
			return nil, 0 // two limits' buckets interleave in rank
		}
		l := sp.l
		st := &out[i]
		st.l = l
		st.inPlace = true
		for k, di := range l.dim {
			st.mask |= 1 << uint(di)
			st.inPlace = st.inPlace && int(di) == k
		}
		if l.single {
			if h := &l.hot[l.all]; h.rb != nil && h.rb.kind != kindConnections && len(h.more) == 0 {
				st.rb, st.di = h.rb, l.dim[0]
			}
		}
	}
	return out, keyDims
}

// orderedStep is one limit of an ordered plan.
type orderedStep struct {
	l    *limit
	mask uint64 // bit i set for each dimension i of l (all below inlineDims)
	// rb, for a single limit (one key, the all-wildcard entry) with one
	// rate Allow takes, is that rate's bucket, keyed by the value of
	// dimension di: taken with no entry to look up and no rates to walk.
	rb *rateBucket
	di int32
	// inPlace is set when l's keys are dimensions 0, 1, … in order: the
	// request's values of them are matched where they were resolved.
	inPlace bool
}

// before orders evaluation: customer before service limits, more dimension
// keys first, then the stricter rate first (rate/period compared exactly).
func before(la *limit, a *rateBucket, lb *limit, b *rateBucket) bool {
	if la.service != lb.service {
		return !la.service
	}
	if len(la.keys) != len(lb.keys) {
		return len(la.keys) > len(lb.keys)
	}
	return a.rate*b.period < b.rate*a.period
}

func compileLimit(rl *RateLimit, prev *limit, now time.Time, withKeys bool, budget *bucket.Budget) *limit {
	l := &limit{
		id:          rl.RateLimitID,
		description: rl.Description,
		keys:        slices.Clone(rl.DimensionKeys),
		shadow:      rl.Shadow,
	}
	if prev != nil && !slices.Equal(prev.keys, l.keys) {
		prev = nil // dimension keys changed: a different limit
	}
	tuples := make([][]string, len(rl.Entries))
	flat := make([]string, len(rl.Entries)*len(l.keys)) // one allocation for every tuple
	for i, e := range rl.Entries {
		t := flat[i*len(l.keys) : (i+1)*len(l.keys) : (i+1)*len(l.keys)]
		for k, name := range l.keys {
			t[k] = e.Dimensions[name]
		}
		tuples[i] = t
	}
	m := hashmatch.New(l.keys, tuples) // validated with the configuration
	l.matcher = m
	l.depth, l.all = m.Depth(), m.All()
	l.single = len(l.keys) == 1 && l.depth == 0
	l.entries = make([]*entry, 0, len(rl.Entries))
	for i, e := range rl.Entries {
		en := &entry{values: tuples[i], exact: hashmatch.ExactPrefix(tuples[i])}
		var prevEntry *entry
		if prev != nil {
			if j, ok := prev.matcher.Match(tuples[i]); ok && slices.Equal(prev.entries[j].values, tuples[i]) {
				prevEntry = prev.entries[j]
			}
		}
		addRates := func(metric string, rates []Rate) {
			for idx, r := range rates {
				rb := &rateBucket{lim: l, ent: en, shadow: l.shadow, metric: metric, kind: kindOf(metric), cfg: r, rate: r.Rate, period: int64(r.Period.Duration())}
				if withKeys {
					rb.keyPrefix = bucketkey.Render(l.id, metric, idx, en.values, nil)
				}
				rb.burst = int64(rb.burstOf())
				if r.Rate > 0 {
					rb.window = time.Duration(float64(rb.burst) / float64(r.Rate) * float64(r.Period.Duration()))
				}
				var reuse *rateBucket
				if prevEntry != nil {
					n := 0
					for _, pr := range prevEntry.rates {
						if pr.metric == metric {
							if n == idx {
								reuse = pr
								break
							}
							n++
						}
					}
				}
				lim, b := rb.limitRate(), rb.burstOf()
				if metric == sluice.MetricConnections {
					// Concurrency, not a rate: Rate is the number of slots.
					rb.burst, rb.window = r.Rate, 0
					switch {
					case reuse != nil && reuse.conn != nil && en.exact == len(l.keys):
						rb.conn = reuse.conn
					case reuse != nil && reuse.connTab != nil && en.exact < len(l.keys):
						rb.connTab = reuse.connTab
					case en.exact == len(l.keys):
						rb.conn = &connPool{}
					default:
						rb.connTab = &connTable{}
					}
					en.rates = append(en.rates, rb)
					continue
				}
				switch {
				case reuse != nil && (reuse.shared != nil) == (en.exact == len(l.keys)):
					rb.shared, rb.table = reuse.shared, reuse.table
					if reuse.cfg.Rate != r.Rate || reuse.cfg.Period != r.Period || reuse.burst != rb.burst {
						if rb.shared != nil {
							rb.shared.Reconfigure(now, lim, b)
						} else {
							rb.table.reconfigure(now, lim, b)
						}
					}
				case en.exact == len(l.keys):
					rb.shared = bucket.New(lim, b)
				default:
					rb.table = newLazyTable(lim, b, budget)
				}
				en.rates = append(en.rates, rb)
			}
		}
		addRates(sluice.MetricRequests, e.Requests)
		addRates(sluice.MetricTokens, e.Tokens)
		addRates(sluice.MetricConnections, e.Connections)
		l.entries = append(l.entries, en)
	}
	l.hot = make([]hotEntry, len(l.entries))
	for i, en := range l.entries {
		h := &l.hot[i]
		h.exact = int32(en.exact)
		if len(en.rates) > 0 {
			h.rb, h.more = en.rates[0], en.rates[1:]
		}
	}
	return l
}

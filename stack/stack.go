// Package stack evaluates several rate limits with AND semantics: a request
// passes only if every limit that applies to it passes.
//
// A Stack is built from a Config (in code, or parsed from the gateway's JSON
// shape with Parse) and implements sluice.Limiter. For each request:
//
//  1. Each rate limit looks up the request's value for every one of its
//     dimension keys; a limit whose key the request does not carry is skipped.
//  2. The limit's most specific entry is found (exact values first, then
//     trailing dimensions replaced by "*" one at a time); no entry, no limit.
//  3. The applicable buckets are evaluated in order — limits with more
//     dimension keys first, then the stricter (lower per-second) rate first,
//     customer limits before service-managed limits — and evaluation stops at
//     the first denial.
//  4. A denied request consumes nothing: units taken from the buckets evaluated
//     before the denying one are refunded exactly.
//
// Atomicity in memory: buckets are taken one by one and given back on a
// denial, so for a moment a concurrent request may see a bucket a denied
// request had taken and be denied itself; no request is ever admitted beyond
// a limit. On a denial the buckets after the denying one are probed (taken
// and given back at once) so that RetryAfter covers them too. A Backend
// (Redis) does all of this in one atomic step.
//
// An exact entry is one bucket shared by every request it matches; an entry
// with "*" positions gives each distinct combination of values at those
// positions its own bucket. Buckets are GCRA token buckets (package bucket):
// exact from the first request, with burst = the rate per period unless the
// entry sets one.
//
// The configuration can be replaced while traffic flows (Reload): limits and
// entries that keep their identity keep their consumed state.
package stack

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/bucket"
	"github.com/sluicehq/sluice/internal/monoclock"
	"github.com/sluicehq/sluice/match"
)

// Stack is an AND-stack of rate limits. It is safe for concurrent use; the
// configuration can be replaced at any time with Reload.
type Stack struct {
	cfg        atomic.Pointer[compiled]
	now        func() time.Time
	mu         sync.Mutex // serializes Reload
	backend    Backend
	failClosed bool
	onError    func(error)
	leaseTTL   time.Duration
	leaseSeq   atomic.Uint64
}

// Option configures a Stack.
type Option interface{ apply(*Stack) }

type nowOption func() time.Time

func (o nowOption) apply(s *Stack) { s.now = o }

// WithNow sets the clock Allow reads. The default is the wall clock advanced
// by the monotonic clock only (a wall-clock step never moves it). Tests pass a
// fake clock; AllowAt takes an explicit instant instead.
func WithNow(now func() time.Time) Option { return nowOption(now) }

type backendOption struct{ b Backend }

func (o backendOption) apply(s *Stack) { s.backend = o.b }

// WithBackend makes the Stack decide through b (for example Redis, so that a
// fleet shares its limits) instead of in-process buckets. Entry matching and
// ordering still happen in the Stack; b is called once per decision.
func WithBackend(b Backend) Option { return backendOption{b} }

type failClosedOption bool

func (o failClosedOption) apply(s *Stack) { s.failClosed = bool(o) }

// WithFailClosed makes a backend error deny by returning it from Allow. By
// default the Stack fails open: a request the backend could not decide is
// allowed (availability before enforcement), and the error goes to the
// WithErrorHandler function.
func WithFailClosed() Option { return failClosedOption(true) }

type errorHandlerOption func(error)

func (o errorHandlerOption) apply(s *Stack) { s.onError = o }

// WithErrorHandler receives every backend error, whatever the failure
// policy (for logging and metrics). It must be safe for concurrent use.
func WithErrorHandler(f func(error)) Option { return errorHandlerOption(f) }

type leaseTTLOption time.Duration

func (o leaseTTLOption) apply(s *Stack) {
	if o > 0 {
		s.leaseTTL = time.Duration(o)
	}
}

// WithLeaseTTL sets how long a connections slot taken by Reserve stays held
// if its reservation is never reconciled or cancelled (default
// DefaultLeaseTTL). Set it above your longest request.
func WithLeaseTTL(d time.Duration) Option { return leaseTTLOption(d) }

// New builds a Stack from cfg. It returns a *match.ConfigError listing every
// problem when cfg is invalid.
func New(cfg Config, opts ...Option) (*Stack, error) {
	s := &Stack{now: monoclock.Now, leaseTTL: DefaultLeaseTTL}
	for _, o := range opts {
		o.apply(s)
	}
	if err := checkBackendConfig(s.backend, &cfg); err != nil {
		return nil, err
	}
	c, err := compile(cfg, nil, s.now())
	if err != nil {
		return nil, err
	}
	s.cfg.Store(c)
	return s, nil
}

// Load parses the gateway JSON in data (see Parse) and builds a Stack.
func Load(data []byte, opts ...Option) (*Stack, error) {
	cfg, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return New(cfg, opts...)
}

// Reload replaces the configuration atomically. Limits that keep their id and
// dimension keys keep the consumed state of every entry that is still
// present: a changed rate or burst keeps the tokens the bucket held, capped at
// the new burst. Removed limits stop applying at once. Decisions already in
// progress finish on the configuration they started with.
//
// If cfg is invalid, Reload returns a *match.ConfigError listing every
// problem and the previous configuration stays in force.
func (s *Stack) Reload(cfg Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := checkBackendConfig(s.backend, &cfg); err != nil {
		return err
	}
	c, err := compile(cfg, s.cfg.Load(), s.now())
	if err != nil {
		return err
	}
	s.cfg.Store(c)
	return nil
}

// ReloadJSON parses data (see Parse) and reloads; on any error the previous
// configuration stays in force.
func (s *Stack) ReloadJSON(data []byte) error {
	cfg, err := Parse(data)
	if err != nil {
		return err
	}
	return s.Reload(cfg)
}

// Config returns the configuration in force.
func (s *Stack) Config() Config { return s.cfg.Load().src }

// Allow decides one request costing one unit of every "requests" limit and
// nothing of "tokens" limits (a tokens bucket already in debt still denies).
// It implements sluice.Limiter.
func (s *Stack) Allow(ctx context.Context, keys sluice.Keys) (sluice.Decision, error) {
	return s.decide(ctx, &keys, s.now(), 0)
}

// AllowN decides one request that costs one unit of every "requests" limit
// and tokens units of every "tokens" limit.
func (s *Stack) AllowN(ctx context.Context, keys sluice.Keys, tokens int) (sluice.Decision, error) {
	return s.decide(ctx, &keys, s.now(), tokens)
}

// AllowAt is AllowN at an explicit instant.
func (s *Stack) AllowAt(ctx context.Context, keys sluice.Keys, t time.Time, tokens int) (sluice.Decision, error) {
	return s.decide(ctx, &keys, t, tokens)
}

// decide takes the Keys by pointer so that each entry point copies them once.
func (s *Stack) decide(ctx context.Context, keys *sluice.Keys, t time.Time, tokens int) (sluice.Decision, error) {
	var d sluice.Decision
	if err := ctx.Err(); err != nil {
		return d, err
	}
	if tokens < 0 {
		return d, errNegativeCost
	}
	err := s.evaluate(ctx, s.cfg.Load(), keys, t, tokens, nil, &d)
	return d, err
}

// compiled is one immutable configuration.
type compiled struct {
	src    Config
	limits []*limit // customer limits, then service limits, in config order
	maxDim int
}

type limit struct {
	id      string
	keys    []string
	matcher *match.Matcher
	entries []*entry
	shadow  bool
	service bool
}

type entry struct {
	values []string // configured values, "*" included
	exact  int      // number of leading exact values
	rates  []*rateBucket
}

// rateBucket is one {rate, period} of one metric of one entry.
type rateBucket struct {
	metric string
	kind   metricKind
	cfg    Rate
	// One of shared (exact entry) or table (wildcard entry); for the
	// connections metric, conn or connTab instead.
	shared  *bucket.Bucket
	table   *bucket.Table
	conn    *connPool
	connTab *connTable
	burst   int64
	window  time.Duration // time to refill from empty
	// rate and period (ns) order strictness without floats: rate/period
	// values are compared by cross-multiplication.
	rate   int64
	period int64
	// keyPrefix is BucketKey without the request values, for backends.
	keyPrefix string
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

func compile(cfg Config, prev *compiled, now time.Time) (*compiled, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	old := map[string]*limit{}
	if prev != nil {
		for _, l := range prev.limits {
			old[l.id] = l
		}
	}
	c := &compiled{src: cfg}
	add := func(rls []RateLimit, service bool) {
		for i := range rls {
			l := compileLimit(&rls[i], old[rls[i].RateLimitID], now)
			l.service = service
			c.limits = append(c.limits, l)
			if len(l.keys) > c.maxDim {
				c.maxDim = len(l.keys)
			}
		}
	}
	add(cfg.RateLimits, false)
	add(cfg.ServiceLimits, true)
	return c, nil
}

func compileLimit(rl *RateLimit, prev *limit, now time.Time) *limit {
	l := &limit{
		id:     rl.RateLimitID,
		keys:   slices.Clone(rl.DimensionKeys),
		shadow: rl.Shadow,
	}
	if prev != nil && !slices.Equal(prev.keys, l.keys) {
		prev = nil // dimension keys changed: a different limit
	}
	tuples := make([][]string, len(rl.Entries))
	for i, e := range rl.Entries {
		t := make([]string, len(l.keys))
		for k, name := range l.keys {
			t[k] = e.Dimensions[name]
		}
		tuples[i] = t
	}
	m, err := match.New(l.keys, tuples)
	if err != nil {
		panic("stack: validated configuration failed to compile: " + err.Error())
	}
	l.matcher = m
	for i, e := range rl.Entries {
		en := &entry{values: tuples[i], exact: match.ExactPrefix(tuples[i])}
		var prevEntry *entry
		if prev != nil {
			if j, ok := prev.matcher.Match(tuples[i]); ok && slices.Equal(prev.entries[j].values, tuples[i]) {
				prevEntry = prev.entries[j]
			}
		}
		addRates := func(metric string, rates []Rate) {
			for idx, r := range rates {
				rb := &rateBucket{metric: metric, kind: kindOf(metric), cfg: r, rate: r.Rate, period: int64(r.Period.Duration()),
					keyPrefix: BucketKey(l.id, metric, idx, en.values, nil)}
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
							rb.table.Reconfigure(now, lim, b)
						}
					}
				case en.exact == len(l.keys):
					rb.shared = bucket.New(lim, b)
				default:
					rb.table = bucket.NewTable(lim, b)
				}
				en.rates = append(en.rates, rb)
			}
		}
		addRates(sluice.MetricRequests, e.Requests)
		addRates(sluice.MetricTokens, e.Tokens)
		addRates(sluice.MetricConnections, e.Connections)
		l.entries = append(l.entries, en)
	}
	return l
}

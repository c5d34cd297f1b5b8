package envoyrls

import (
	"context"
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/internal/monoclock"
	"github.com/sluicehq/sluice/otelmetric"
	"github.com/sluicehq/sluice/stack"
)

// Bounds on a request (the package documentation lists them). A request
// beyond them gets InvalidArgument and consumes nothing.
const (
	// maxDescriptors is the most descriptors one request may carry.
	maxDescriptors = 64
	// maxEntries is the most entries one descriptor may carry.
	maxEntries = 16
	// maxValueBytes is the longest key, value or domain, in bytes.
	maxValueBytes = 1024
	// maxHits is the largest hits_addend.
	maxHits = 1 << 40
	// maxOverridePeriod is the longest period a limit override may give
	// (unit × unit_multiplier).
	maxOverridePeriod = maxPeriod
)

// Keys of the response's dynamic_metadata (in the namespace Envoy gives it,
// envoy.filters.http.ratelimit by default); the package documentation lists
// them for operators.
const (
	// metaDeniedBy is the ID (name, or path) of the rule that denied.
	metaDeniedBy = "denied_by"
	// metaDescriptor is the index of the descriptor whose rule denied.
	metaDescriptor = "descriptor_index"
	// metaRetryAfterMs is the wait, in milliseconds rounded up, after which
	// the same request would pass. A denial has it unless no wait helps,
	// and then has metaPermanent instead.
	metaRetryAfterMs = "retry_after_ms"
	// metaPermanent is true when the denial cannot end by waiting: the rule
	// that denied has requests_per_unit 0, or the request's hits exceed the
	// rule's limit.
	metaPermanent = "permanent"
	// metaShadowDenied lists the IDs of shadow-mode rules that would have
	// denied.
	metaShadowDenied = "shadow_denied"
	// metaShadow is true when the global shadow mode turned a denial into OK.
	metaShadow = "shadow_mode"
	// metaError is the backend error a fail-open or fail-closed answer
	// followed.
	metaError = "backend_error"
	// metaMetadata holds the merged metadata (a rule's metadata key) of the
	// rules whose descriptors are not over.
	metaMetadata = "metadata"
)

// Server answers Envoy's envoy.service.ratelimit.v3.RateLimitService. It is
// a value the caller registers on its own grpc.Server
// (rlsv3.RegisterRateLimitServiceServer). It is safe for concurrent use.
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer

	cfg        atomic.Pointer[Config]
	backend    stack.Backend
	now        func() time.Time
	failClosed bool
	shadow     atomic.Bool
	quota      atomic.Bool
	metrics    *otelmetric.Metrics
	nearRatio  float64
	onError    func(error)
	ruleStats  func(RuleHits)
}

var _ rlsv3.RateLimitServiceServer = (*Server)(nil)

// Option configures New.
type Option interface{ apply(*options) }

type options struct {
	backend    stack.Backend
	now        func() time.Time
	failClosed bool
	shadow     bool
	metrics    *otelmetric.Metrics
	nearRatio  float64
	onError    func(error)
	maxBuckets int
	ruleStats  func(RuleHits)
}

// DefaultNearLimitRatio is the share of a rule's limit past which hits
// count as near the limit (RuleHits.Near), envoyproxy/ratelimit's
// NEAR_LIMIT_RATIO default.
const DefaultNearLimitRatio = 0.8

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithBackend decides with b (the Redis backend, for a fleet) instead of in
// memory. A nil b means the default, the in-memory backend.
func WithBackend(b stack.Backend) Option {
	return optionFunc(func(o *options) {
		if b != nil {
			o.backend = b
		}
	})
}

// WithClock sets the clock decisions are made at (only c.Now is used). A
// nil c means the default: sluice's clock, wall time advanced by the
// monotonic clock only, so that a step of the system clock never moves
// decisions backwards.
func WithClock(c sluice.Clock) Option {
	return optionFunc(func(o *options) {
		if c != nil {
			o.now = c.Now
		}
	})
}

// WithFailClosed sets the server's own failure policy (the server is the
// engine here; no Stack is involved): when the backend returns an error for
// a request, the overall answer is OVER_LIMIT and so is the status of every
// descriptor that matched a limiting, non-shadow rule, each with its rule
// as current_limit. By default the server fails open: the overall answer
// is OK and no descriptor is over. Either way the error is passed to the
// error handler (WithErrorHandler), counted by WithMetrics and written to
// the response's dynamic metadata under "backend_error".
// A Redis backend's own degradation (redis.WithLocalFallback) answers
// instead of failing while it holds, so this policy applies only to the
// errors that still reach the server.
func WithFailClosed() Option { return optionFunc(func(o *options) { o.failClosed = true }) }

// WithShadowMode starts the server in global shadow mode: every decision is
// made and reported as usual, but the overall answer is always OK. See
// Server.SetShadowMode.
func WithShadowMode() Option { return optionFunc(func(o *options) { o.shadow = true }) }

// WithMetrics counts decisions per rule and backend errors with m. A nil m
// means the default: no metrics.
func WithMetrics(m *otelmetric.Metrics) Option {
	return optionFunc(func(o *options) {
		if m != nil {
			o.metrics = m
		}
	})
}

// WithNearLimitRatio sets the share of a rule's limit past which hits
// count as near it in the per-rule statistics (RuleHits.Near),
// as envoyproxy/ratelimit's NEAR_LIMIT_RATIO does: with a limit of 10 and
// 0.8, the 9th and 10th units used are near. Zero, negative or NaN means
// the default, DefaultNearLimitRatio; 1 or more counts nothing as near. It
// has no effect without WithRuleStats.
func WithNearLimitRatio(r float64) Option {
	return optionFunc(func(o *options) {
		if r > 0 { // false for NaN too
			o.nearRatio = r
		}
	})
}

// WithErrorHandler calls h with every backend error (and the backend's
// notices, such as entering its local fallback). A nil h means the default:
// no handler.
func WithErrorHandler(h func(error)) Option {
	return optionFunc(func(o *options) {
		if h != nil {
			o.onError = h
		}
	})
}

// WithMaxBuckets bounds the in-memory backend's live buckets. n ≤ 0 means
// the default, DefaultMaxBuckets. It has no effect with WithBackend.
func WithMaxBuckets(n int) Option {
	return optionFunc(func(o *options) {
		if n > 0 {
			o.maxBuckets = n
		}
	})
}

// New returns a Server deciding with cfg. It decides in memory unless
// WithBackend is given. Every option's argument is valid or means "not
// given" (zero, negative or nil: the default), and a nil Option is
// ignored, so New has no error.
func New(cfg *Config, opts ...Option) *Server {
	o := options{now: monoclock.Now, maxBuckets: DefaultMaxBuckets, nearRatio: DefaultNearLimitRatio}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	s := &Server{backend: o.backend, now: o.now, failClosed: o.failClosed, metrics: o.metrics, nearRatio: o.nearRatio, onError: o.onError, ruleStats: o.ruleStats}
	if s.backend == nil {
		s.backend = newMemoryBackend(o.maxBuckets)
	}
	if s.metrics != nil {
		s.onError = s.metrics.ErrorHandler(s.onError)
	}
	s.shadow.Store(o.shadow)
	if cfg == nil {
		cfg = &Config{}
	}
	s.cfg.Store(cfg)
	return s
}

// Reload replaces the configuration atomically. Buckets are keyed by the
// rule's place in its domain's tree and the descriptor (not by file or
// position in it), so a rule that keeps its place keeps its consumed state,
// whatever its rate becomes (capped at the new burst); requests in flight
// finish on the configuration they started with.
func (s *Server) Reload(cfg *Config) {
	if cfg == nil {
		cfg = &Config{}
	}
	s.cfg.Store(cfg)
}

// Config returns the configuration in force.
func (s *Server) Config() *Config { return s.cfg.Load() }

// SetShadowMode switches the global shadow mode: while on, the overall
// answer is OK whatever the rules decide (and a request they would deny
// still consumes nothing).
func (s *Server) SetShadowMode(on bool) { s.shadow.Store(on) }

// SetQuotaMode switches the global quota mode (envoyproxy/ratelimit's
// QUOTA_MODE): while on, every rule is a quota (Rule.QuotaMode): a
// descriptor over its limit reports OVER_LIMIT in its status, and the
// request is denied by quotas only when every quota descriptor is over.
func (s *Server) SetQuotaMode(on bool) { s.quota.Store(on) }

// limitRef is one bucket a descriptor is checked against.
type limitRef struct {
	id       string // rule ID for headers, metrics and metadata
	path     string // envoyproxy/ratelimit's stats key (Rule.Path)
	name     string // rate_limit.name (for replaces); "" for none
	replaces []string
	rpu      uint32
	unit     stack.Unit
	mult     uint32
	period   time.Duration
	burst    int64
	shadow   bool
	quota    bool // quota_mode: over, it denies only with every quota over
	meta     map[string]any
	key      string
	desc     int
	op       int // index in ops, -1 when replaced
}

// plan is what one request resolves to.
type plan struct {
	refs      []limitRef
	unlimited []bool
	cost      []int64 // per descriptor
	negative  []bool
	debit     []bool // the descriptor has its own hits_addend above 0
}

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "envoyrls: "+format, args...)
}

// validate checks a request against the protocol and the bounds, saying
// what is wrong and where.
func validate(req *rlsv3.RateLimitRequest) error {
	if req == nil {
		return invalid("no request")
	}
	if req.Domain == "" {
		return invalid("domain: empty; a request must name its domain")
	}
	if len(req.Domain) > maxValueBytes {
		return invalid("domain: %d bytes, at most %d", len(req.Domain), maxValueBytes)
	}
	if len(req.Descriptors) == 0 {
		return invalid("descriptors: none; a request needs at least one")
	}
	if len(req.Descriptors) > maxDescriptors {
		return invalid("descriptors: %d, at most %d", len(req.Descriptors), maxDescriptors)
	}
	for i, d := range req.Descriptors {
		if d == nil || len(d.Entries) == 0 {
			return invalid("descriptors[%d]: no entries", i)
		}
		if len(d.Entries) > maxEntries {
			return invalid("descriptors[%d].entries: %d, at most %d", i, len(d.Entries), maxEntries)
		}
		for j, e := range d.Entries {
			switch {
			case e == nil || e.Key == "":
				return invalid("descriptors[%d].entries[%d].key: empty", i, j)
			case len(e.Key) > maxValueBytes:
				return invalid("descriptors[%d].entries[%d].key: %d bytes, at most %d", i, j, len(e.Key), maxValueBytes)
			case len(e.Value) > maxValueBytes:
				return invalid("descriptors[%d].entries[%d].value: %d bytes, at most %d", i, j, len(e.Value), maxValueBytes)
			}
		}
		if h := d.HitsAddend; h != nil && h.Value > maxHits {
			return invalid("descriptors[%d].hits_addend: %d, at most %d", i, h.Value, int64(maxHits))
		}
		if l := d.Limit; l != nil {
			u := overrideUnit(l.Unit)
			if u == "" {
				return invalid("descriptors[%d].limit.unit: %v is not a unit this service knows (second, minute, hour, day, month, year)", i, l.Unit)
			}
			mult := uint32(1)
			if l.UnitMultiplier != nil {
				mult = l.UnitMultiplier.Value
				if mult == 0 {
					return invalid("descriptors[%d].limit.unit_multiplier: 0; leave it unset for 1", i)
				}
			}
			if time.Duration(mult) > maxOverridePeriod/u.Duration() {
				return invalid("descriptors[%d].limit: period of %d %ss is longer than %v", i, mult, u, maxOverridePeriod)
			}
		}
	}
	return nil
}

func overrideUnit(u typev3.RateLimitUnit) stack.Unit {
	switch u {
	case typev3.RateLimitUnit_SECOND:
		return stack.Second
	case typev3.RateLimitUnit_MINUTE:
		return stack.Minute
	case typev3.RateLimitUnit_HOUR:
		return stack.Hour
	case typev3.RateLimitUnit_DAY:
		return stack.Day
	case typev3.RateLimitUnit_MONTH:
		return stack.Month
	case typev3.RateLimitUnit_YEAR:
		return stack.Year
	}
	return ""
}

func responseUnit(u stack.Unit) rlsv3.RateLimitResponse_RateLimit_Unit {
	switch u {
	case stack.Second:
		return rlsv3.RateLimitResponse_RateLimit_SECOND
	case stack.Minute:
		return rlsv3.RateLimitResponse_RateLimit_MINUTE
	case stack.Hour:
		return rlsv3.RateLimitResponse_RateLimit_HOUR
	case stack.Day:
		return rlsv3.RateLimitResponse_RateLimit_DAY
	case stack.Week:
		return rlsv3.RateLimitResponse_RateLimit_WEEK
	case stack.Month:
		return rlsv3.RateLimitResponse_RateLimit_MONTH
	case stack.Year:
		return rlsv3.RateLimitResponse_RateLimit_YEAR
	}
	return rlsv3.RateLimitResponse_RateLimit_UNKNOWN
}

// bucketKey identifies a bucket: the kind of rule ("y" a YAML rule, "g" a
// gateway limit, "o" a limit override), its scope (the rule's node; the
// gateway limit and rate; the domain and the override's rate, so that two
// overrides of one descriptor do not share a bucket), then every key and
// value of the descriptor, each length-prefixed so that no two descriptors
// share a key whatever their values hold. A rule keeps its scope across
// reloads when it keeps its place in the tree, so its buckets keep their
// state, whatever its rate becomes. The in-memory backend keeps one table
// per "kind|scope" prefix (see scopeOf).
func bucketKey(kind, scope string, entries []*ratelimitv3.RateLimitDescriptor_Entry) string {
	return bucketKeyShared(kind, scope, entries, nil)
}

// bucketKeyShared is bucketKey where an entry i with shared[i] != "" (a
// share_threshold wildcard) is written as its pattern, not its value, so
// that every value the pattern matches shares one bucket ("~" instead of
// "=" keeps a pattern apart from an equal value).
func bucketKeyShared(kind, scope string, entries []*ratelimitv3.RateLimitDescriptor_Entry, shared []string) string {
	n := len(kind) + len(scope) + 8
	for _, e := range entries {
		n += len(e.Key) + len(e.Value) + 12
	}
	b := make([]byte, 0, n)
	b = append(b, kind...)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(len(scope)), 10)
	b = append(b, ':')
	b = append(b, scope...)
	for i, e := range entries {
		b = append(b, '|')
		b = strconv.AppendInt(b, int64(len(e.Key)), 10)
		b = append(b, ':')
		b = append(b, e.Key...)
		v, sep := e.Value, byte('=')
		if i < len(shared) && shared[i] != "" {
			v, sep = shared[i], '~'
		}
		b = append(b, sep)
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is not written again
}

// resolve finds the limits of every descriptor.
func (s *Server) resolve(cfg *Config, req *rlsv3.RateLimitRequest) plan {
	n := len(req.Descriptors)
	flags := make([]bool, 3*n) // one allocation for the three
	p := plan{unlimited: flags[:n:n], cost: make([]int64, n), negative: flags[n : 2*n : 2*n], debit: flags[2*n:], refs: make([]limitRef, 0, n)}
	root := cfg.domains[req.Domain]
	known := root != nil || len(cfg.gateway) > 0
	var path [maxEntries][2]string
	var values [maxEntries]string
	var shared [maxEntries]string
	globalQuota := s.quota.Load()
	for i, d := range req.Descriptors {
		cost := int64(1)
		if req.HitsAddend > 0 {
			cost = int64(req.HitsAddend)
		}
		if d.HitsAddend != nil {
			cost = int64(d.HitsAddend.Value)
			p.debit[i] = cost > 0 && !d.IsNegativeHits
		}
		p.cost[i], p.negative[i] = cost, d.IsNegativeHits
		if !known {
			continue
		}
		if l := d.Limit; l != nil {
			// An override replaces the configuration's rule, as in
			// envoyproxy/ratelimit; it is never in shadow mode.
			u := overrideUnit(l.Unit)
			mult := uint32(1)
			if l.UnitMultiplier != nil {
				mult = l.UnitMultiplier.Value
			}
			id := req.Domain
			for _, e := range d.Entries {
				id += "." + e.Key
			}
			p.refs = append(p.refs, limitRef{id: id, path: id, rpu: l.RequestsPerUnit, unit: u, mult: mult, quota: globalQuota,
				period: time.Duration(mult) * u.Duration(), burst: int64(l.RequestsPerUnit),
				key: bucketKey("o", lp(req.Domain)+"|"+strconv.FormatUint(uint64(l.RequestsPerUnit), 10)+"/"+strconv.FormatUint(uint64(mult), 10)+string(u), d.Entries), desc: i})
			continue
		}
		if root != nil {
			for j, e := range d.Entries {
				path[j] = [2]string{e.Key, e.Value}
			}
			if r := cfg.lookup(req.Domain, path[:len(d.Entries)], shared[:len(d.Entries)]); r != nil {
				if r.Unlimited {
					p.unlimited[i] = true
					if len(r.Replaces) > 0 { // an unlimited rule still replaces
						p.refs = append(p.refs, limitRef{id: r.ID(), name: r.Name, replaces: r.Replaces, desc: i, op: -2})
					}
				} else {
					p.refs = append(p.refs, limitRef{id: r.ID(), path: r.Path, name: r.Name, replaces: r.Replaces, rpu: r.RequestsPerUnit,
						unit: r.Unit, mult: r.UnitMultiplier, period: time.Duration(r.UnitMultiplier) * r.Unit.Duration(), burst: int64(r.RequestsPerUnit), shadow: r.Shadow,
						quota: r.QuotaMode || globalQuota, meta: r.Metadata,
						key: bucketKeyShared("y", r.scope, d.Entries, shared[:len(d.Entries)]), desc: i})
				}
			}
		}
		for gi := range cfg.gateway {
			g := &cfg.gateway[gi]
			keys := g.m.Keys()
			if len(keys) != len(d.Entries) {
				continue
			}
			same := true
			for j, e := range d.Entries {
				values[j] = e.Value
				same = same && e.Key == keys[j]
			}
			if !same {
				continue
			}
			ei, ok := g.m.Match(values[:len(keys)])
			if !ok {
				continue
			}
			e := &g.rl.Entries[ei]
			for ri, r := range append(append([]stack.Rate(nil), e.Requests...), e.Tokens...) {
				burst := r.Rate
				if r.Burst > 0 {
					burst = r.Burst
				}
				if r.Rate == 0 {
					burst = 0
				}
				p.refs = append(p.refs, limitRef{id: g.rl.RateLimitID, path: g.rl.RateLimitID, rpu: uint32(min(r.Rate, math.MaxUint32)), unit: r.Period, mult: 1, quota: globalQuota,
					period: r.Period.Duration(), burst: burst, shadow: g.rl.Shadow,
					key: bucketKey("g", g.rl.RateLimitID+"|"+strconv.Itoa(ri), d.Entries), desc: i})
			}
		}
	}
	// replaces: a named rule that another matched rule replaces is dropped.
	var replaced map[string]bool
	for _, r := range p.refs {
		for _, name := range r.replaces {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			replaced[name] = true
		}
	}
	for i := range p.refs {
		if p.refs[i].op == -2 || (p.refs[i].name != "" && replaced[p.refs[i].name]) {
			p.refs[i].op = -1
		}
	}
	return p
}

// ShouldRateLimit implements rlsv3.RateLimitServiceServer. The descriptors
// are decided together in one Backend.Take: all or nothing, so a denied
// request consumes nothing in any descriptor. Descriptors with
// is_negative_hits give their units back first (Backend.Adjust). A bad
// request gets InvalidArgument and consumes nothing.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := validate(req); err != nil {
		return nil, err
	}
	cfg := s.cfg.Load()
	at := s.now()
	p := s.resolve(cfg, req)

	ops := make([]stack.Op, 0, len(p.refs))
	var gives []stack.Op
	for i := range p.refs {
		r := &p.refs[i]
		if r.op < 0 {
			continue
		}
		rate := int64(r.rpu)
		if r.rpu == 0 {
			r.burst = 0 // rate 0 blocks: a permanent denial
		}
		// A cost of 0 is a check: over when the bucket has no whole unit
		// left (empty, in debt, or rate 0, whose burst is 0).
		op := stack.Op{Key: r.key, Rate: rate, Period: r.period, Burst: r.burst, Cost: p.cost[r.desc], Shadow: r.shadow}
		if r.quota && !r.shadow {
			// A quota over its limit takes nothing and does not stop the
			// others; whether the request is denied is decided below,
			// once every quota is known.
			op.Shadow = true
		}
		if p.negative[r.desc] {
			// The protocol adds budget without saying when the units were
			// taken: the give-back is bounded as if they were taken now.
			give := op
			give.Cost, give.TakenAt = -op.Cost, at
			gives = append(gives, give)
			op.Cost, op.Shadow = 0, true // only reports the bucket
		}
		r.op = len(ops)
		ops = append(ops, op)
	}

	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(req.Descriptors))}
	sts := make([]rlsv3.RateLimitResponse_DescriptorStatus, len(req.Descriptors)) // one allocation for all
	for i := range resp.Statuses {
		st := &sts[i]
		st.Code = rlsv3.RateLimitResponse_OK
		if p.unlimited[i] {
			st.LimitRemaining = math.MaxUint32
		}
		resp.Statuses[i] = st
	}
	if len(ops) == 0 {
		return resp, nil
	}

	var giveErr error
	if len(gives) > 0 {
		// A give-back that fails changes nothing; the rest of the request is
		// still decided, and the error reported. Exact as far as the
		// backend's give-backs are (#21).
		if giveErr = s.backend.Adjust(ctx, at, gives); giveErr != nil && s.onError != nil {
			s.onError(giveErr)
		}
	}
	out, berr := s.backend.Take(ctx, at, ops)
	if berr != nil {
		return s.failed(resp, p, berr), nil
	}
	for _, n := range out.Notices {
		if s.onError != nil {
			s.onError(n)
		}
	}
	// On a denial the backends report what each bucket holds in the same
	// call (nothing was taken); a backend that does not leaves it nil.
	remaining := out.Remaining
	if len(remaining) != len(ops) {
		remaining = nil
	}
	quotaDenied := false
	if out.Denied < 0 {
		var givenBack []bool
		quotaDenied, givenBack = s.quotasOver(ctx, at, p, ops, out)
		for i, op := range ops {
			if quotaDenied && remaining != nil && givenBack[i] {
				remaining[i] += op.Cost // given back: what the bucket holds again
			}
		}
	} else {
		// Denied by a limit: the backend took nothing; the debits are
		// charged anyway. (A quota denial keeps them taken instead.)
		s.debit(ctx, at, p, ops)
	}
	s.respond(resp, p, ops, out, remaining, giveErr, quotaDenied)
	return resp, nil
}

// quotasOver reports whether the request has quota descriptors and every
// one of them is over. Then the request is denied: what the Take took from
// the others is given back, a second call only in that case, so that a
// denied request consumes nothing, except the debits (descriptors with a
// hits_addend of their own), which stay charged as after any denial;
// givenBack tells, per op, what was given back.
func (s *Server) quotasOver(ctx context.Context, at time.Time, p plan, ops []stack.Op, out stack.Outcome) (denied bool, givenBack []bool) {
	quotas, overs := 0, 0
	for i := range p.refs {
		r := &p.refs[i]
		if r.op < 0 || !r.quota || r.shadow || p.negative[r.desc] {
			continue
		}
		quotas++
		if slices.Contains(out.ShadowDenied, r.op) {
			overs++
		}
	}
	if quotas == 0 || overs < quotas {
		return false, nil
	}
	givenBack = make([]bool, len(ops))
	for i := range p.refs {
		r := &p.refs[i]
		if r.op >= 0 && !p.debit[r.desc] {
			givenBack[r.op] = ops[r.op].Cost > 0 && !slices.Contains(out.ShadowDenied, r.op)
		}
	}
	var gives []stack.Op
	for i, op := range ops {
		if givenBack[i] {
			op.Cost, op.TakenAt = -op.Cost, at
			gives = append(gives, op)
		}
	}
	if len(gives) > 0 {
		if err := s.backend.Adjust(ctx, at, gives); err != nil && s.onError != nil {
			s.onError(err)
		}
	}
	return true, givenBack
}

// debit charges, after a denial, the descriptors that carry their own
// hits_addend: Envoy's token-quota pattern checks with hits_addend 0 before
// the call and sends the tokens used, as the descriptor's hits_addend,
// after it; those tokens were used whatever the answer, so they are
// charged in full, into debt if need be (as envoyproxy/ratelimit counts
// every hit), and the next check is over until the bucket has refilled.
// The request's own hits_addend (and the default 1) stays all or nothing.
func (s *Server) debit(ctx context.Context, at time.Time, p plan, ops []stack.Op) {
	var charges []stack.Op
	for i := range p.refs {
		r := &p.refs[i]
		if r.op < 0 || !p.debit[r.desc] || ops[r.op].Shadow || ops[r.op].Cost <= 0 {
			continue
		}
		charges = append(charges, ops[r.op])
	}
	if len(charges) == 0 {
		return
	}
	if err := s.backend.Adjust(ctx, at, charges); err != nil && s.onError != nil {
		s.onError(err)
	}
}

// failed answers when the backend could not decide: OK (fail-open) or
// OVER_LIMIT on every limited descriptor (fail-closed).
func (s *Server) failed(resp *rlsv3.RateLimitResponse, p plan, err error) *rlsv3.RateLimitResponse {
	if s.onError != nil {
		s.onError(err)
	}
	if s.metrics != nil {
		s.metrics.Record(sluice.Decision{}, err)
	}
	meta := map[string]any{metaError: err.Error()}
	if s.failClosed {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		for _, r := range p.refs {
			if r.op >= 0 && !r.shadow {
				resp.Statuses[r.desc].Code = rlsv3.RateLimitResponse_OVER_LIMIT
				resp.Statuses[r.desc].CurrentLimit = currentLimit(&r)
			}
		}
	}
	resp.DynamicMetadata, _ = structpb.NewStruct(meta)
	return resp
}

func currentLimit(r *limitRef) *rlsv3.RateLimitResponse_RateLimit {
	cl := new(rlsv3.RateLimitResponse_RateLimit)
	setCurrentLimit(cl, r)
	return cl
}

// setCurrentLimit makes cl say r's limit, whatever it said before.
func setCurrentLimit(cl *rlsv3.RateLimitResponse_RateLimit, r *limitRef) {
	cl.Name, cl.RequestsPerUnit, cl.Unit = r.id, r.rpu, responseUnit(r.unit)
	cl.UnitMultiplier = nil
	if r.mult > 1 {
		cl.UnitMultiplier = wrapperspb.UInt32(r.mult)
	}
}

// ceilMicro rounds d up to whole microseconds, the Redis backend's
// resolution: package bucket holds a rate such as 10 a minute as a float, so
// its wait can fall a few nanoseconds short of the exact one (5.999999995 s
// for 6 s), and a duration_until_reset shown to a client must not be early.
func ceilMicro(d time.Duration) time.Duration {
	if r := d % time.Microsecond; r != 0 {
		d += time.Microsecond - r
	}
	return d
}

// refill returns the time a bucket of r needs to gain units, rounded up to
// the nanosecond: never early.
func refill(r *limitRef, units int64) time.Duration {
	if units <= 0 {
		return 0
	}
	if r.rpu == 0 {
		return r.period
	}
	num := float64(units) * float64(r.period) / float64(r.rpu)
	if num > float64(math.MaxInt64/2) {
		return time.Duration(math.MaxInt64 / 2)
	}
	d := time.Duration(math.Ceil(num))
	// float rounding must not make it early
	for int64(d)*int64(r.rpu) < units*int64(r.period) && float64(units)*float64(r.period) < 9e18 {
		d++
	}
	return d
}

func (s *Server) respond(resp *rlsv3.RateLimitResponse, p plan, ops []stack.Op, out stack.Outcome, remaining []int64, giveErr error, quotaDenied bool) {
	denied := out.Denied >= 0 || quotaDenied
	shadowDenied := func(op int) bool { return slices.Contains(out.ShadowDenied, op) }
	policy := make([]byte, 0, 48*len(ops))
	current := make([]byte, 0, 48*len(ops))
	var shadowIDs []any
	var meta map[string]any
	if denied || giveErr != nil {
		meta = map[string]any{}
	}
	if giveErr != nil {
		meta[metaError] = giveErr.Error()
	}
	// per descriptor: the ref that governs its status (the denier, else the
	// one with the fewest units left), and its current_limit and
	// duration_until_reset, allocated once for all the descriptors
	type governing struct {
		ref   int
		left  int64
		limit rlsv3.RateLimitResponse_RateLimit
		reset durationpb.Duration
	}
	best := make([]governing, len(resp.Statuses))
	for i := range best {
		best[i].ref = -1
	}
	for ri := range p.refs {
		r := &p.refs[ri]
		if r.op < 0 {
			continue
		}
		op := ops[r.op]
		left := int64(0)
		if remaining != nil {
			left = remaining[r.op]
		}
		st := resp.Statuses[r.desc]
		over := false
		switch {
		case p.negative[r.desc]:
		case denied && r.op == out.Denied:
			over = true
		case r.quota && !r.shadow && shadowDenied(r.op):
			over = true // a quota over its limit says so in its status
		case shadowDenied(r.op):
			shadowIDs = append(shadowIDs, r.id)
		case denied && !r.shadow && remaining != nil && left < op.Cost:
			over = true // would have denied too
		case denied && !r.shadow && op.Cost > op.Burst:
			over = true
		}
		var reset time.Duration
		switch {
		case over && r.op == out.Denied && out.RetryAfter > 0:
			reset = out.RetryAfter
		case over:
			// The wait until the bucket can give the cost, and at least
			// one unit: a zero-cost check (hits_addend 0) over its limit,
			// or a bucket in debt, is told when a unit comes back, never
			// to retry now.
			reset = refill(r, max(op.Cost, 1)-left)
		default:
			reset = refill(r, op.Burst-left)
		}
		cur := st.Code == rlsv3.RateLimitResponse_OVER_LIMIT
		take := false
		switch b := best[r.desc].ref; {
		case b < 0:
			take = true
		case over:
			take = !cur || r.op == out.Denied
		default:
			take = !cur && left < best[r.desc].left
		}
		if take {
			g := &best[r.desc]
			g.ref, g.left = ri, left
			setCurrentLimit(&g.limit, r)
			st.CurrentLimit = &g.limit
			st.LimitRemaining = uint32(min(max(left, 0), math.MaxUint32))
			shown := ceilMicro(reset)
			g.reset.Seconds, g.reset.Nanos = int64(shown/time.Second), int32(shown%time.Second)
			st.DurationUntilReset = &g.reset
		}
		if over {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			if meta == nil {
				meta = map[string]any{}
			}
			if _, ok := meta[metaDeniedBy]; denied && (!ok || r.op == out.Denied) {
				meta[metaDeniedBy] = r.id
				meta[metaDescriptor] = float64(r.desc)
			}
		}
		if s.metrics != nil {
			d := sluice.Decision{Allowed: !over, LimitID: r.id, Metric: sluice.MetricRequests}
			if over {
				// Every denial says when to retry, or that no wait helps.
				d.RetryAfter, d.Permanent = reset, denied && r.op == out.Denied && out.Permanent
			}
			if r.shadow && shadowDenied(r.op) {
				// a shadow rule over its limit; a quota over its limit or
				// a negative-hits report is no shadow denial
				d.Shadowed = []string{r.id}
			}
			s.metrics.Record(d, nil)
		}
		if s.ruleStats != nil && !p.negative[r.desc] {
			// Nothing was taken from this bucket when the request was
			// denied (remaining was given back for a quota denial) or
			// when the rule was over in shadow: left is then what it
			// held before.
			took := !denied && !shadowDenied(r.op)
			over := over || shadowDenied(r.op)
			shadow := over && r.shadow
			h := ruleHits(op.Burst, left, remaining != nil, took, op.Cost, over, shadow, s.nearRatio)
			h.ID, h.Path = r.id, r.path
			s.ruleStats(h)
		}
		q := slerrors.Quota{Policy: r.id, Limit: op.Burst, Remaining: left, Window: r.period, Reset: reset}
		if q.Limit > 0 {
			if len(policy) > 0 {
				policy = append(policy, ", "...)
				current = append(current, ", "...)
			}
			policy = q.AppendPolicy(policy)
			current = q.AppendRateLimit(current)
		}
	}
	if denied {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		switch {
		case out.Permanent:
			meta[metaPermanent] = true
		case out.RetryAfter > 0:
			meta[metaRetryAfterMs] = float64((out.RetryAfter + time.Millisecond - 1) / time.Millisecond)
		}
		if s.shadow.Load() {
			resp.OverallCode = rlsv3.RateLimitResponse_OK
			meta[metaShadow] = true
		}
	}
	if len(shadowIDs) > 0 {
		if meta == nil {
			meta = map[string]any{}
		}
		meta[metaShadowDenied] = shadowIDs
	}
	// The metadata of the rules whose descriptors are not over, merged (the
	// first rule's value wins, mappings merge), as envoyproxy/ratelimit
	// gives them.
	var md map[string]any
	for i := range p.refs {
		r := &p.refs[i]
		if r.op < 0 || r.meta == nil || resp.Statuses[r.desc].Code != rlsv3.RateLimitResponse_OK {
			continue
		}
		if md == nil {
			md = map[string]any{}
		}
		mergeMeta(md, r.meta)
	}
	if md != nil {
		if meta == nil {
			meta = map[string]any{}
		}
		meta[metaMetadata] = md
	}
	if len(policy) > 0 {
		resp.ResponseHeadersToAdd = []*corev3.HeaderValue{
			// policy and current are not written again
			{Key: "RateLimit-Policy", Value: unsafe.String(unsafe.SliceData(policy), len(policy))},
			{Key: "RateLimit", Value: unsafe.String(unsafe.SliceData(current), len(current))},
		}
	}
	if len(meta) > 0 {
		resp.DynamicMetadata, _ = structpb.NewStruct(meta)
	}
}

// ruleHits computes what one descriptor's decision adds to its rule's
// statistics, with envoyproxy/ratelimit's meanings in a count of units used
// rather than held: used before is burst minus what the bucket held before
// (left, plus the cost when it was taken), used after adds the cost h; over
// counts the hits beyond the burst, near the hits past floor(burst × ratio)
// and up to the burst, within the hits of a rule that allowed. When the
// backend did not report what the bucket holds (known false), near is not
// counted and over is all h.
func ruleHits(burst, left int64, known, took bool, h int64, over, shadow bool, ratio float64) RuleHits {
	st := RuleHits{Total: h}
	if h <= 0 {
		return st
	}
	if !known {
		if over {
			st.Over = h
		} else {
			st.Within = h
		}
		if shadow {
			st.Shadow = st.Over
		}
		return st
	}
	if took {
		left += h
	}
	before := max(burst-left, 0) // a bucket never holds more than its burst
	after := before + h
	near := burst
	if ratio < 1 {
		near = int64(math.Floor(float64(burst) * ratio))
	}
	if over {
		if before >= burst {
			st.Over = h
		} else {
			st.Over = after - burst
			st.Near = burst - max(near, before)
		}
		if st.Over <= 0 {
			// over for a reason counts do not show (a fraction of a unit
			// missing): every hit was over
			st.Over, st.Near = h, 0
		}
		if shadow {
			st.Shadow = st.Over
		}
		return st
	}
	st.Within = h
	if after > near {
		st.Near = min(after-max(near, before), h)
	}
	return st
}

// mergeMeta merges src into dst: a key dst lacks is copied, two mappings
// under one key are merged, anything else in dst stays. Mappings copied
// are copied, not shared, so that a later merge never changes a rule.
func mergeMeta(dst, src map[string]any) {
	for k, v := range src {
		cur, ok := dst[k]
		if !ok {
			if m, isMap := v.(map[string]any); isMap {
				c := map[string]any{}
				mergeMeta(c, m)
				v = c
			}
			dst[k] = v
			continue
		}
		cm, ok1 := cur.(map[string]any)
		sm, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			mergeMeta(cm, sm)
		}
	}
}

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
//     before the denying one are given back through their bucket.Grant,
//     exactly unless another request took from the same bucket at a later
//     instant in between, and then never more than that take left (so no
//     interleaving admits beyond a limit).
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
//
// # Explicit time
//
// Allow, AllowN and Reserve read the Stack's clock (WithClock); AllowAt and
// ReserveAt take the instant instead, as the first argument after the
// context. The methods of every package of sluice follow that rule: the
// explicit-time form of a method M is MAt, with the instant first after
// the context (package bucket too: x/time/rate's AllowN(t, n) is
// AllowAt(t, n) there). A Backend's Take and Adjust take it in the
// same place (see the sluice package documentation, "Explicit time").
//
// # Names of limits and buckets
//
// Every name of a limit or bucket that a Decision shows (and otelattr
// records) is written one way:
//
//   - Decision.LimitKey and each of Decision.Shadowed is a limit key,
//     "<rateLimitId>/<key>=<value>[,<key>=<value>…]": the limit, its
//     dimension keys and the request's values for them, in the limit's
//     dimension-key order ("per-caller/caller=alice").
//   - Each of Decision.Evaluated names a bucket the gateway's way,
//     "<rateLimitId>:<metric>:<value>[,<value>…]": the limit, the bucket's
//     metric and the request's values in dimension-key order
//     ("per-caller:requests:alice").
//
// Inside ids, names and values the separators ',' '=' '/' ':' and the
// escape character '%' are percent-encoded (%2C %3D %2F %3A %25) and every
// other byte is kept, so values without those characters render as they are,
// and two different limits, requests or metrics never render the same
// name: splitting at the separators and decoding the escapes gives the
// parts back. category.Set writes its limit keys
// ("<category>/action=<action>") the same way.
//
// The name a Backend gets in Op.Key (and Redis keys are made of) is a
// different form for implementers: length-prefixed, not escaped, and also
// unique per bucket (see Op.Key).
package stack

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucket"
	"github.com/sluicehq/sluice/internal/monoclock"
)

// Stack is an AND-stack of rate limits. It is safe for concurrent use; the
// configuration can be replaced at any time with Reload. The zero Stack is
// not usable: make one with New or Load.
type Stack struct {
	cfg        atomic.Pointer[compiled]
	now        func() time.Time // WithClock; nil: monoclock, read as ns (bucket.NowNs)
	mu         sync.Mutex       // serializes Reload
	backend    Backend
	failClosed bool
	onError    func(error)
	leaseTTL   time.Duration
	leaseSeq   atomic.Uint64
	budget     *bucket.Budget // WithMaxBuckets; nil: unbounded
}

// Option configures a Stack. Options are made by the With… functions of
// this package; a Source takes SourceOption instead.
type Option interface{ apply(*Stack) }

type optionFunc func(*Stack)

func (f optionFunc) apply(s *Stack) { f(s) }

// WithClock sets the clock that Allow, AllowN, Reserve, ReserveSlots, a
// reservation's settlement and a Source read (the Stack never sleeps, so
// only c.Now is used). A nil c means the default: the wall clock advanced
// by the monotonic clock only (a wall-clock step never moves it). Tests
// pass a fake clock such as limitertest.Clock; the …At methods take an
// explicit instant instead. Per-value buckets are reclaimed by instants
// from this clock, so every instant given to an …At method should come
// from it too.
func WithClock(c sluice.Clock) Option {
	return optionFunc(func(s *Stack) {
		if c != nil {
			s.now = c.Now
		}
	})
}

// WithBackend makes the Stack decide through b (for example Redis, so that a
// fleet shares its limits) instead of in-process buckets. Entry matching and
// ordering still happen in the Stack; b is called once per decision. A nil
// b means the default: in-process buckets.
func WithBackend(b Backend) Option {
	return optionFunc(func(s *Stack) {
		if b != nil {
			s.backend = b
		}
	})
}

// WithFailClosed sets the Stack's failure policy to refuse: when the Backend
// returns an error for a request, Allow, AllowN, AllowAt, Reserve and
// ReserveSlots (and their …At forms) return it, with a Decision that does
// not allow, and every middleware refuses the request on it. By default the
// Stack fails open: such a request is allowed (availability before
// enforcement) with a Decision that names no limit, and no error. Either
// way the error goes to the WithErrorHandler function. This is the one
// failure policy of a Stack and holds through every layer above it; a
// Backend's own degradation (such as the Redis backend's
// WithLocalFallback, which answers from local buckets instead of failing)
// happens below it, and the policy applies only to the errors that still
// reach the Stack. In-memory decisions never fail, so without WithBackend
// the policy has no effect; a context that has ended is returned as an
// error under either policy.
func WithFailClosed() Option { return optionFunc(func(s *Stack) { s.failClosed = true }) }

// WithErrorHandler receives every backend error, whatever the failure
// policy (for logging and metrics). It must be safe for concurrent use. A
// nil f means the default: no handler.
func WithErrorHandler(f func(error)) Option {
	return optionFunc(func(s *Stack) {
		if f != nil {
			s.onError = f
		}
	})
}

// WithLeaseTTL sets how long a connections slot taken by Reserve stays held
// if its reservation is never reconciled or cancelled. Set it above your
// longest request. d ≤ 0 means the default, DefaultLeaseTTL.
func WithLeaseTTL(d time.Duration) Option {
	return optionFunc(func(s *Stack) {
		if d > 0 {
			s.leaseTTL = d
		}
	})
}

// WithMaxBuckets bounds the per-value buckets the Stack holds in memory to
// n, across all its limits and reloads. n ≤ 0 means the default: no
// bound.
// Per-value buckets are those of entries with "*" positions, one per
// distinct combination of values callers send; without a bound their
// number follows the callers (each costs at most 64 bytes, whatever the
// length of the values, and a bucket that has refilled is reclaimed).
// Buckets of exact entries are bounded by the configuration and not
// counted; nor are the slots of connections limits, which are bounded by
// the requests in flight.
//
// When the Stack holds n buckets and a request needs a new one, buckets
// that have refilled are reclaimed first (a full bucket carries no state:
// dropping it changes no decision). If none can be freed, the request is
// denied — never admitted beyond a limit, and never by evicting a bucket
// that still holds consumption, which would forget it. The denial has
// Decision.Capacity set; it names the limit that needed the bucket
// (LimitID, LimitKey, Metric, MatchedEntry, ResolvedValues), with Remaining
// 0, and consumes nothing. Its RetryAfter is the longest time any per-value
// bucket of the configuration takes to refill from empty: by then every
// bucket not in token debt (tokens limits settled above their estimate) has
// refilled and can be reclaimed, unless new requests have taken the room.
// Size n above the callers expected to be active within that window.
//
// Buckets of limits or entries that a Reload removed keep counting until
// the garbage collector frees them. Only in-memory buckets are bounded;
// with WithBackend the backend holds the state and the option has no
// effect.
func WithMaxBuckets(n int) Option {
	return optionFunc(func(s *Stack) {
		if n > 0 {
			s.budget = bucket.NewBudget(n)
		}
	})
}

// New builds a Stack from cfg. When cfg is invalid it returns a
// *ConfigError listing the problems with their paths; find it with
// errors.As(err, &ce) where ce is a *stack.ConfigError.
func New(cfg Config, opts ...Option) (*Stack, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newValid(cfg, opts)
}

func newValid(cfg Config, opts []Option) (*Stack, error) {
	s := &Stack{leaseTTL: DefaultLeaseTTL}
	for _, o := range opts {
		if o != nil {
			o.apply(s)
		}
	}
	if err := checkBackendConfig(s.backend, &cfg); err != nil {
		return nil, err
	}
	s.cfg.Store(compileValid(cfg, nil, s.clockNow(), s.backend != nil, s.budget))
	return s, nil
}

// Load parses the gateway JSON in data (see Parse) and builds a Stack. When
// data is not a valid configuration it returns a *ConfigError listing the
// problems with their paths; find it with errors.As(err, &ce) where ce is a
// *stack.ConfigError.
func Load(data []byte, opts ...Option) (*Stack, error) {
	cfg, err := Parse(data) // validates
	if err != nil {
		return nil, err
	}
	return newValid(cfg, opts)
}

// Reload replaces the configuration atomically. Limits that keep their id and
// dimension keys keep the consumed state of every entry that is still
// present: a changed rate or burst keeps the tokens the bucket held, capped at
// the new burst. Removed limits stop applying at once. Decisions already in
// progress finish on the configuration they started with.
//
// If cfg is invalid, Reload returns a *ConfigError listing the problems
// (errors.As(err, &ce) where ce is a *stack.ConfigError) and the previous
// configuration stays in force.
func (s *Stack) Reload(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	return s.reloadValid(cfg)
}

func (s *Stack) reloadValid(cfg Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := checkBackendConfig(s.backend, &cfg); err != nil {
		return err
	}
	s.cfg.Store(compileValid(cfg, s.cfg.Load(), s.clockNow(), s.backend != nil, s.budget))
	return nil
}

// ReloadJSON parses data (see Parse) and reloads; on any error (a
// *ConfigError when data is not a valid configuration) the previous
// configuration stays in force.
func (s *Stack) ReloadJSON(data []byte) error {
	cfg, err := Parse(data) // validates
	if err != nil {
		return err
	}
	return s.reloadValid(cfg)
}

// Config returns the configuration in force. It is rebuilt from the
// compiled form on each call (the Stack does not keep the Config it was
// given, which for a large configuration is most of its memory).
func (s *Stack) Config() Config { return s.cfg.Load().config() }

// config rebuilds the Config that c was compiled from.
func (c *compiled) config() Config {
	var cfg Config
	for _, l := range c.limits {
		rl := RateLimit{RateLimitID: l.id, Description: l.description, DimensionKeys: slices.Clone(l.keys), Shadow: l.shadow}
		for _, en := range l.entries {
			e := Entry{Dimensions: make(map[string]string, len(l.keys))}
			for k, name := range l.keys {
				e.Dimensions[name] = en.values[k]
			}
			for _, rb := range en.rates {
				switch rb.kind {
				case kindRequests:
					e.Requests = append(e.Requests, rb.cfg)
				case kindTokens:
					e.Tokens = append(e.Tokens, rb.cfg)
				default:
					e.Connections = append(e.Connections, rb.cfg)
				}
			}
			rl.Entries = append(rl.Entries, e)
		}
		if l.service {
			cfg.ServiceLimits = append(cfg.ServiceLimits, rl)
		} else {
			cfg.RateLimits = append(cfg.RateLimits, rl)
		}
	}
	return cfg
}

// Allow decides one request costing one unit of every "requests" limit and
// nothing of "tokens" limits (a tokens bucket that holds no whole token,
// empty or in debt, still denies: a cost of 0 is a check).
// It implements sluice.Limiter.
//
// Allow does not take "connections" limits into account: a concurrency slot
// must be released when the request ends, which Allow has no way to learn.
// Use ReserveSlots (or Reserve) and settle the Reservation when the request
// is done; httplimit, grpclimit and mcplimit do that for you.
func (s *Stack) Allow(ctx context.Context, keys sluice.Keys) (d sluice.Decision, err error) {
	if err = ctx.Err(); err == nil {
		if s.now == nil { // the default clock, read as ns: no Time built
			err = s.evaluate(ctx, s.cfg.Load(), &keys, bucket.NowNs(), nil, 0, nil, &d)
		} else {
			t := s.now()
			err = s.evaluate(ctx, s.cfg.Load(), &keys, bucket.NsOf(t), &t, 0, nil, &d)
		}
	}
	return d, err
}

// clockNow reads the Stack's clock as a Time (the default: monoclock.Now).
func (s *Stack) clockNow() time.Time {
	if s.now == nil {
		return monoclock.Now()
	}
	return s.now()
}

// AllowN decides one request that costs one unit of every "requests" limit
// and tokens units of every "tokens" limit.
func (s *Stack) AllowN(ctx context.Context, keys sluice.Keys, tokens int) (sluice.Decision, error) {
	if s.now == nil { // the default clock, read as ns: no Time built
		return s.decide(ctx, &keys, bucket.NowNs(), nil, tokens)
	}
	t := s.now()
	return s.decide(ctx, &keys, bucket.NsOf(t), &t, tokens)
}

// AllowAt is AllowN at the explicit instant t. Like every explicit-time
// method in sluice (ReserveAt here, bucket's Bucket.AllowAt(t, n) and
// Table.AllowAt(t, key, n), category's Set.AllowActionAt), it takes the
// instant as its first argument after the context; see the package
// documentation, "Explicit time".
func (s *Stack) AllowAt(ctx context.Context, t time.Time, keys sluice.Keys, tokens int) (sluice.Decision, error) {
	return s.decide(ctx, &keys, bucket.NsOf(t), &t, tokens)
}

// decide takes the Keys by pointer so that each entry point copies them
// once. ns is the instant as bucket.NsOf gives it; at is that instant as a
// Time, or nil when the default clock was read as ns (see evaluate).
func (s *Stack) decide(ctx context.Context, keys *sluice.Keys, ns int64, at *time.Time, tokens int) (sluice.Decision, error) {
	var d sluice.Decision
	if err := ctx.Err(); err != nil {
		return d, err
	}
	if tokens < 0 {
		return d, errNegativeCost
	}
	err := s.evaluate(ctx, s.cfg.Load(), keys, ns, at, tokens, nil, &d)
	return d, err
}

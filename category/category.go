// Package category limits API actions by category, as the Amazon ECS API
// throttles.
//
// Actions are grouped into categories, and every action in a
// category draws from one token bucket with a burst capacity and a sustained
// refill rate. 25 DescribeClusters plus 25 ListClusters fit in a cluster-read
// bucket of 50; 50 of each at once do not.
//
// With WithPerAction each action instead gets its own bucket sized by its
// category (the Amazon EC2 model). An action may also drain a resource bucket
// by the number of resources in the request, stacked with its request bucket:
// both must pass, and a denied request consumes from neither.
//
// The Amazon ECS table ships with the package: New(ECS()) throttles like the
// ECS API, category by category.
package category

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucket"
	"github.com/sluicehq/sluice/internal/limitkey"
	"github.com/sluicehq/sluice/internal/monoclock"
)

// ActionKey is the default name of the Keys dimension holding the action.
const ActionKey = "action"

// ResourcesKey is the default name of the Keys dimension holding the number
// of resources a request acts on (for resource buckets); absent means 1.
const ResourcesKey = "resources"

// MetricResources is the metric reported when a resource bucket denies.
const MetricResources = "resources"

// ErrUnknownAction is matched (errors.Is) by the error returned for an action
// that belongs to no category when no default category is configured.
var ErrUnknownAction = errors.New("category: unknown action")

// Category is a named group of actions sharing a bucket definition.
type Category struct {
	// Name identifies the category in decisions ("Cluster read").
	Name string
	// Burst is the bucket capacity: the most requests allowed at once.
	Burst int
	// Refill is the sustained rate in requests per second.
	Refill float64
	// Actions are the API actions in the category.
	Actions []string
}

// Option configures a Set.
type Option interface{ apply(*options) }

type options struct {
	perAction bool
	def       string
	actionKey string
	resKey    string
	clock     sluice.Clock // nil: monoclock, read directly
	resources map[string]resourceDef
}

type resourceDef struct {
	burst  int
	refill float64
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithPerAction gives each action its own bucket sized by its category
// (the Amazon EC2 model), instead of one bucket per category shared by
// all its actions (the Amazon ECS model, the default).
func WithPerAction() Option { return optionFunc(func(o *options) { o.perAction = true }) }

// WithDefault sends actions that belong to no category to the named
// category instead of failing with ErrUnknownAction (the default). An empty
// name means the default; a name that no category has makes New return an
// error naming WithDefault.
func WithDefault(category string) Option {
	return optionFunc(func(o *options) {
		if category != "" {
			o.def = category
		}
	})
}

// WithActionKey sets the Keys dimension Allow reads the action from. An
// empty name means the default, ActionKey.
func WithActionKey(name string) Option {
	return optionFunc(func(o *options) {
		if name != "" {
			o.actionKey = name
		}
	})
}

// WithResourcesKey sets the Keys dimension Allow reads the resource count
// from. An empty name means the default, ResourcesKey.
func WithResourcesKey(name string) Option {
	return optionFunc(func(o *options) {
		if name != "" {
			o.resKey = name
		}
	})
}

// WithClock sets the clock Allow and AllowAction read (default: the wall
// clock advanced by the monotonic clock, so a wall-clock step never moves
// it). AllowAt and AllowActionAt take their instant explicitly and ignore
// the clock. A nil c means the default.
func WithClock(c sluice.Clock) Option {
	return optionFunc(func(o *options) {
		if c != nil {
			o.clock = c
		}
	})
}

// WithResourceBucket gives action a resource bucket of the given burst and
// refill per second, drained by the number of resources in each request, in
// addition to its request bucket (RunInstances: request bucket 5/2, resource
// bucket 1000/2). By default an action has no resource bucket; an empty
// action leaves it so (the option is not given). A burst and a refill of 0
// mean what they mean for a Category: a refill of 0 is an allowance that
// never refills, a burst of 0 refuses every request that carries
// resources. An action that no category has, a negative burst, or a
// refill that is negative, NaN or infinite makes New return an error
// naming WithResourceBucket.
func WithResourceBucket(action string, burst int, refill float64) Option {
	return optionFunc(func(o *options) {
		if action == "" {
			return
		}
		if o.resources == nil {
			o.resources = map[string]resourceDef{}
		}
		o.resources[action] = resourceDef{burst, refill}
	})
}

// Set maps actions to their buckets. It implements sluice.Limiter and is safe
// for concurrent use. The zero Set is not usable: make one with New.
type Set struct {
	opts    options
	actions map[string]*action
	def     *group
	// defBucket serves actions routed to the default category: the
	// category's bucket when shared, one bucket of its size with
	// WithPerAction.
	defBucket *bucket.Bucket
}

type group struct {
	cat    Category
	shared *bucket.Bucket // nil with WithPerAction
}

type action struct {
	name     string
	group    *group
	bucket   *bucket.Bucket // the request bucket (shared or own)
	resource *bucket.Bucket // nil unless a resource bucket is configured
	resBurst int
	key      string // "<category>/action=<name>" (actionKey), built once
	entry    []string
}

// New builds a Set. It reports every problem at once: empty or duplicate
// category names, an action in two categories, a negative burst or a refill
// that is negative or not finite, an unknown default category, a resource
// bucket for an unknown action.
func New(categories []Category, opts ...Option) (*Set, error) {
	s := &Set{actions: map[string]*action{}}
	s.opts = options{actionKey: ActionKey, resKey: ResourcesKey}
	for _, o := range opts {
		if o != nil {
			o.apply(&s.opts)
		}
	}
	var errs []error
	groups := map[string]*group{}
	for i, c := range categories {
		at := fmt.Sprintf("categories[%d]", i)
		switch {
		case c.Name == "":
			errs = append(errs, fmt.Errorf("%s: empty name", at))
		case groups[c.Name] != nil:
			errs = append(errs, fmt.Errorf("%s: duplicate category %q", at, c.Name))
		}
		if c.Burst < 0 {
			errs = append(errs, fmt.Errorf("%s (%s): negative burst %d", at, c.Name, c.Burst))
		}
		if c.Refill < 0 || math.IsNaN(c.Refill) || math.IsInf(c.Refill, 0) {
			errs = append(errs, fmt.Errorf("%s (%s): refill %v must be a finite rate ≥ 0", at, c.Name, c.Refill))
		}
		g := &group{cat: c}
		groups[c.Name] = g
		if !s.opts.perAction {
			g.shared = bucket.New(rate.Limit(c.Refill), c.Burst)
		}
		for j, a := range c.Actions {
			if a == "" {
				errs = append(errs, fmt.Errorf("%s.actions[%d]: empty action", at, j))
				continue
			}
			if prev, dup := s.actions[a]; dup {
				errs = append(errs, fmt.Errorf("%s.actions[%d]: action %q is already in category %q", at, j, a, prev.group.cat.Name))
				continue
			}
			s.actions[a] = s.newAction(a, g)
		}
	}
	if s.opts.def != "" {
		if g := groups[s.opts.def]; g != nil {
			s.def = g
			s.defBucket = g.shared
			if s.defBucket == nil {
				s.defBucket = bucket.New(rate.Limit(g.cat.Refill), g.cat.Burst)
			}
		} else {
			errs = append(errs, fmt.Errorf("WithDefault(%q): the category is not defined", s.opts.def))
		}
	}
	for a, r := range s.opts.resources {
		act := s.actions[a]
		switch {
		case act == nil:
			errs = append(errs, fmt.Errorf("WithResourceBucket(%q, %d, %v): no category has the action", a, r.burst, r.refill))
		case r.burst < 0:
			errs = append(errs, fmt.Errorf("WithResourceBucket(%q, %d, %v): the burst is negative", a, r.burst, r.refill))
		case !(r.refill >= 0) || math.IsInf(r.refill, 0):
			errs = append(errs, fmt.Errorf("WithResourceBucket(%q, %d, %v): the refill must be a finite rate ≥ 0", a, r.burst, r.refill))
		default:
			act.resource = bucket.New(rate.Limit(r.refill), r.burst)
			act.resBurst = r.burst
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

func (s *Set) newAction(name string, g *group) *action {
	a := &action{name: name, group: g, key: actionKey(g.cat.Name, name), entry: []string{name}}
	if g.shared != nil {
		a.bucket = g.shared
	} else {
		a.bucket = bucket.New(rate.Limit(g.cat.Refill), g.cat.Burst)
	}
	return a
}

// Category returns the category of action, and false when it has none.
func (s *Set) Category(action string) (Category, bool) {
	if a := s.actions[action]; a != nil {
		return a.group.cat, true
	}
	return Category{}, false
}

// now reads the Set's clock.
func (s *Set) now() time.Time {
	if s.opts.clock == nil {
		return monoclock.Now()
	}
	return s.opts.clock.Now()
}

// Allow decides a request whose action is in keys under the action key (and
// whose resource count, if any, is under the resources key), now. An
// unknown action is an error matching ErrUnknownAction unless a default
// category is configured. It implements sluice.Limiter.
func (s *Set) Allow(ctx context.Context, keys sluice.Keys) (sluice.Decision, error) {
	return s.AllowAt(ctx, s.now(), keys)
}

// AllowAt is Allow at the explicit instant t.
func (s *Set) AllowAt(ctx context.Context, t time.Time, keys sluice.Keys) (sluice.Decision, error) {
	if err := ctx.Err(); err != nil {
		return sluice.Decision{}, err
	}
	name, ok := keys.Get(s.opts.actionKey)
	if !ok {
		return sluice.Decision{}, fmt.Errorf("category: the request has no %q dimension", s.opts.actionKey)
	}
	n := 1
	if v, ok := keys.Get(s.opts.resKey); ok {
		r, err := strconv.Atoi(v)
		if err != nil || r < 0 {
			return sluice.Decision{}, fmt.Errorf("category: %s=%q is not a resource count", s.opts.resKey, v)
		}
		n = r
	}
	return s.AllowActionAt(t, name, n)
}

// AllowAction decides one request for action, acting on one resource, now.
func (s *Set) AllowAction(action string) (sluice.Decision, error) {
	return s.AllowActionAt(s.now(), action, 1)
}

// AllowActionAt is AllowAction at the explicit instant t, for a request
// acting on resources resources (drained from the action's resource bucket,
// if it has one; a request acting on none does not ask that bucket). As
// every explicit-time method in sluice, it takes the instant first (see the
// sluice package documentation, "Explicit time").
func (s *Set) AllowActionAt(t time.Time, action string, resources int) (sluice.Decision, error) {
	a := s.actions[action]
	if a == nil {
		if s.def == nil {
			return sluice.Decision{}, fmt.Errorf("%w %q", ErrUnknownAction, action)
		}
		a = s.unknown(action)
	}
	if resources < 0 {
		return sluice.Decision{}, fmt.Errorf("category: negative resource count %d", resources)
	}
	res := a.bucket.TakeN(t, 1)
	if !res.OK {
		return a.denial(res, sluice.MetricRequests, a.bucket.Burst()), nil
	}
	d := sluice.Decision{Allowed: true, LimitID: a.group.cat.Name, Limit: int64(a.group.cat.Burst), Remaining: max(res.Remaining, 0), Window: window(a.group.cat.Burst, a.group.cat.Refill)}
	if a.resource != nil && resources > 0 {
		rr := a.resource.TakeN(t, resources)
		if !rr.OK {
			_ = a.bucket.GiveBack(&res.Grant, 1) // a denied request consumes nothing (the take's own grant: never refused)
			return a.denial(rr, MetricResources, a.resBurst), nil
		}
	}
	return d, nil
}

// actionKey renders the LimitKey of action in category,
// "<category>/action=<action>", with the escaping of every limit key in
// sluice (see package stack, "Names of limits and buckets"): a category or
// action holding '/', ',', '=', ':' or '%' cannot render as another's.
func actionKey(category, action string) string {
	var buf [128]byte
	b := limitkey.AppendEscaped(buf[:0], category)
	b = append(b, limitkey.SepID)
	b = append(b, "action"...)
	b = append(b, limitkey.SepValue)
	return string(limitkey.AppendEscaped(b, action))
}

// unknown builds the record of an action routed to the default category.
func (s *Set) unknown(name string) *action {
	return &action{name: name, group: s.def, bucket: s.defBucket, key: actionKey(s.def.cat.Name, name), entry: []string{"*"}}
}

func (a *action) denial(res bucket.Result, metric string, burst int) sluice.Decision {
	return sluice.Decision{
		RetryAfter:     res.RetryAfter,
		Permanent:      res.Permanent || res.OverBurst,
		OverBurst:      res.OverBurst && burst > 0,
		LimitID:        a.group.cat.Name,
		LimitKey:       a.key,
		Metric:         metric,
		MatchedEntry:   a.entry,
		ResolvedValues: []string{a.name},
		Limit:          int64(burst),
		Window:         window(a.group.cat.Burst, a.group.cat.Refill),
	}
}

func window(burst int, refill float64) time.Duration {
	if refill <= 0 {
		return 0
	}
	return time.Duration(float64(burst) / refill * float64(time.Second))
}

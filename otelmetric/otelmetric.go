// Package otelmetric exports sluice's operational metrics through
// OpenTelemetry.
//
// It records, through the OpenTelemetry metric API:
//
//	sluice.decisions                      {decision}   counter   decisions by outcome, limit and metric
//	sluice.shadow.denials                 {decision}   counter   requests a shadow-mode limit would have denied
//	sluice.decision.duration              s            histogram time Allow took (sampled, see WithDurationSampling)
//	sluice.backend.errors                 {error}      counter   backend failures, by error.type
//	sluice.backend.fallback.active        {state}      gauge     1 while the backend decides locally, else 0
//	sluice.backend.fallbacks              {fallback}   counter   entries into the local fallback
//	sluice.backend.denial_cache.hits      {decision}   counter   denials a backend answered from its near-cache (ObserveDenialCache)
//	sluice.backend.denial_cache.evictions {entry}      counter   entries a backend's near-cache of denials evicted for room
//	sluice.config.generation              {generation} gauge     configurations a stack.Source applied
//	sluice.config.refresh.age             s            gauge     time since a Source last fetched a valid configuration
//	sluice.config.refresh.errors          {error}      counter   failed refreshes of a Source
//
// Attributes reuse the span attributes of package otelattr, so that metrics
// and traces correlate: sluice.ratelimit.decision ("allowed", "throttled",
// or "error" when Allow could not decide), sluice.ratelimit.limit_key (the
// rateLimitId: the denying limit, or on an allowed decision the tightest
// one; never the request's values, so the cardinality is the number of
// configured limits) and sluice.ratelimit.metric (the denying limit's
// metric; absent on allowed decisions). The duration histogram has the
// same attributes as sluice.decisions; sluice.shadow.denials has only the
// shadow limit's id. Summed over its attributes, each metric stays
// meaningful: sluice.decisions sums to the number of calls, so a shadow-mode
// would-denial, an event in addition to the request's own decision, has its
// own counter.
//
// Use it in four places:
//
//   - Wrap a Limiter to count and time its decisions.
//   - Pass ErrorHandler to stack.WithErrorHandler to count backend errors and
//     follow the fallback state (*stack.FallbackError events).
//   - Call ObserveSource with the stack.Source that refreshes the
//     configuration.
//   - Call ObserveDenialCache with a backend's counts, such as the Redis
//     backend's DenialCacheStats.
//
// # Overhead
//
// Decisions are counted in atomic counters of sluice's own, one per
// attribute set, created once per limit id (attribute sets built once) and
// read by an observable counter when the metrics are collected; a wrapper
// remembers the counter of its last decision, so the hot path neither
// hashes, allocates nor calls the SDK. The duration histogram needs two
// clock readings and a synchronous SDK call (about 300 ns together on the
// benchmark machine), so by default one decision in
// DefaultDurationSampling is timed (WithDurationSampling). Measured through
// the sluice.Limiter interface, the default adds 22–34 ns per decision
// (BENCHMARKS.md, "Middleware: metrics").
package otelmetric

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/monoclock"
	"github.com/sluicehq/sluice/otelattr"
	"github.com/sluicehq/sluice/stack"
)

// ScopeName is the instrumentation scope the instruments are created under.
const ScopeName = "github.com/sluicehq/sluice/otelmetric"

// Instrument names.
const (
	Decisions        = "sluice.decisions"
	ShadowDenials    = "sluice.shadow.denials"
	DecisionDuration = "sluice.decision.duration"
	BackendErrors    = "sluice.backend.errors"
	BackendFallback  = "sluice.backend.fallback.active"
	BackendFallbacks = "sluice.backend.fallbacks"
	// The near-cache of denials of a backend (the Redis backend's
	// DenialCacheStats; see ObserveDenialCache).
	DenialCacheHits      = "sluice.backend.denial_cache.hits"
	DenialCacheEvictions = "sluice.backend.denial_cache.evictions"
	ConfigGeneration     = "sluice.config.generation"
	ConfigRefreshAge     = "sluice.config.refresh.age"
	ConfigRefreshErrors  = "sluice.config.refresh.errors"
)

// Attribute keys besides those of otelattr.
const (
	// KeyErrorType is OpenTelemetry's error.type: the Go type of a backend
	// error, or "timeout" for context.DeadlineExceeded.
	KeyErrorType attribute.Key = "error.type"
	// KeyOverflow marks the series that gathers the limit ids beyond
	// MaxLimitIDs, as the OpenTelemetry SDK marks its own overflow.
	KeyOverflow attribute.Key = "otel.metric.overflow"
)

// Error is the decision attribute's value for a call that returned an error.
const Error = "error"

// MaxLimitIDs bounds the distinct limit ids counted separately (a stack
// has at most 100 limits); decisions naming further ids are counted under
// one series marked otel.metric.overflow=true.
const MaxLimitIDs = 1000

// DefaultDurationSampling is how many decisions, on average, one duration
// measurement stands for unless WithDurationSampling says otherwise.
const DefaultDurationSampling = 64

// maxErrorTypes bounds the distinct error.type values.
const maxErrorTypes = 64

// durationBounds are the histogram's bucket boundaries in seconds: from
// in-process decisions (around a microsecond) to a remote backend's timeout.
var durationBounds = []float64{
	1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
	1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1,
}

// Option configures New.
type Option interface{ apply(*Metrics) }

type optionFunc func(*Metrics)

func (f optionFunc) apply(m *Metrics) { f(m) }

// WithClock sets the clock decisions are timed with (only c.Now is used).
// A nil c means the default: sluice's clock, wall time advanced by the
// monotonic clock only.
func WithClock(c sluice.Clock) Option {
	return optionFunc(func(m *Metrics) {
		if c != nil {
			m.now = c.Now
		}
	})
}

// WithDurationSampling times one decision in n (n is rounded up to a power
// of two, at most 2^30): after one in n of the decisions counted under one
// attribute set (spread by a hash of the count), the next decision of the
// same wrapper is timed. The histogram's distribution is that of all
// decisions, its count about 1/n of them. n = 1 times every decision, at
// the cost of two clock readings and one SDK histogram update each
// (BENCHMARKS.md, "Middleware: metrics"); n ≤ 0 means the default, DefaultDurationSampling. To
// time nothing, use WithoutDurations. Decision counts are always exact.
func WithDurationSampling(n int) Option {
	return optionFunc(func(m *Metrics) {
		if n <= 0 {
			return
		}
		n := min(n, 1<<30)
		m.every = 1
		for int(m.every) < n {
			m.every <<= 1
		}
	})
}

// WithoutDurations turns the decision-duration histogram off: no decision
// is timed, and decisions are still counted. A later WithDurationSampling
// turns it back on.
func WithoutDurations() Option {
	return optionFunc(func(m *Metrics) { m.every = 0 })
}

// Metrics records sluice's metrics with one Meter. It is safe for concurrent
// use. Close unregisters its callbacks.
type Metrics struct {
	now   func() time.Time // WithClock; nil: monoclock, read as nanoseconds
	every uint32

	duration    metric.Float64Histogram
	backendErrs metric.Int64Counter
	fallbacks   metric.Int64Counter
	decisions   metric.Int64ObservableCounter
	shadow      metric.Int64ObservableCounter
	fallback    metric.Int64ObservableGauge
	generation  metric.Int64ObservableGauge
	age         metric.Float64ObservableGauge
	refreshErrs metric.Int64ObservableCounter
	denyHits    metric.Int64ObservableCounter
	denyEvicts  metric.Int64ObservableCounter
	reg         metric.Registration

	limits   atomic.Pointer[map[string]*limitCells] // copy on write
	overflow *limitCells
	errCell  *cell

	mu         sync.Mutex // serializes writers of limits and the state below
	errTypes   map[string][]metric.AddOption
	inFallback bool
	failures   int64 // FallbackError.Failures already counted
	fbActive   atomic.Bool
	src        atomic.Pointer[stack.Source]
	denyStats  atomic.Pointer[func() (hits, evictions int64)]
}

// cell is one attribute set's count.
type cell struct {
	n       atomic.Int64
	set     attribute.Set
	recOpts []metric.RecordOption // WithAttributeSet(set), built once

	// The decisions the cell counts, for a wrapper's one-entry cache;
	// cacheable is false for the overflow and "_OTHER" cells.
	cacheable  bool
	allowed    bool
	id, metric string
}

// counts reports whether c is the cacheable cell of decision d.
func (c *cell) counts(d *sluice.Decision) bool {
	return c.cacheable && c.allowed == d.Allowed && c.id == d.LimitID && c.metric == d.Metric
}

func newCell(kvs ...attribute.KeyValue) *cell {
	c := &cell{set: attribute.NewSet(kvs...)}
	c.recOpts = []metric.RecordOption{metric.WithAttributeSet(c.set)}
	return c
}

// metricSlot numbers the decision's metric: the known metrics, none, other.
func metricSlot(m string) int {
	switch m {
	case "":
		return 0
	case sluice.MetricRequests:
		return 1
	case sluice.MetricTokens:
		return 2
	case sluice.MetricConnections:
		return 3
	}
	return 4
}

var slotMetric = [5]string{"", sluice.MetricRequests, sluice.MetricTokens, sluice.MetricConnections, "_OTHER"}

// limitCells holds the cells of one limit id, each created on first use.
type limitCells struct {
	idValue  string
	id       attribute.KeyValue
	overflow bool
	cells    [2][5]atomic.Pointer[cell] // [throttled?][metric slot]
	shadow   atomic.Pointer[cell]
}

func (lc *limitCells) attrs(kvs ...attribute.KeyValue) []attribute.KeyValue {
	if lc.overflow {
		return append(kvs, KeyOverflow.Bool(true))
	}
	return append(kvs, lc.id)
}

// New creates the instruments with mp's Meter for ScopeName.
func New(mp metric.MeterProvider, opts ...Option) (*Metrics, error) {
	m := &Metrics{every: DefaultDurationSampling, errTypes: map[string][]metric.AddOption{}}
	for _, o := range opts {
		if o != nil {
			o.apply(m)
		}
	}
	empty := map[string]*limitCells{}
	m.limits.Store(&empty)
	m.overflow = &limitCells{overflow: true}
	m.errCell = newCell(otelattr.KeyDecision.String(Error))

	meter := mp.Meter(ScopeName)
	var err, e error
	m.duration, e = meter.Float64Histogram(DecisionDuration, metric.WithUnit("s"),
		metric.WithDescription("Time a rate-limit decision took (a random sample of decisions)."),
		metric.WithExplicitBucketBoundaries(durationBounds...))
	err = errors.Join(err, e)
	m.backendErrs, e = meter.Int64Counter(BackendErrors, metric.WithUnit("{error}"),
		metric.WithDescription("Failures of the rate-limit backend."))
	err = errors.Join(err, e)
	m.fallbacks, e = meter.Int64Counter(BackendFallbacks, metric.WithUnit("{fallback}"),
		metric.WithDescription("Times the rate-limit backend started deciding locally."))
	err = errors.Join(err, e)
	m.decisions, e = meter.Int64ObservableCounter(Decisions, metric.WithUnit("{decision}"),
		metric.WithDescription("Rate-limit decisions by outcome, limit and metric."))
	err = errors.Join(err, e)
	m.shadow, e = meter.Int64ObservableCounter(ShadowDenials, metric.WithUnit("{decision}"),
		metric.WithDescription("Requests a shadow-mode limit would have denied."))
	err = errors.Join(err, e)
	m.fallback, e = meter.Int64ObservableGauge(BackendFallback, metric.WithUnit("{state}"),
		metric.WithDescription("1 while the rate-limit backend decides locally, else 0."))
	err = errors.Join(err, e)
	m.generation, e = meter.Int64ObservableGauge(ConfigGeneration, metric.WithUnit("{generation}"),
		metric.WithDescription("Rate-limit configurations applied by the configuration source."))
	err = errors.Join(err, e)
	m.age, e = meter.Float64ObservableGauge(ConfigRefreshAge, metric.WithUnit("s"),
		metric.WithDescription("Time since the configuration source last fetched a valid configuration."))
	err = errors.Join(err, e)
	m.refreshErrs, e = meter.Int64ObservableCounter(ConfigRefreshErrors, metric.WithUnit("{error}"),
		metric.WithDescription("Failed refreshes of the rate-limit configuration; the last good one stays in force."))
	err = errors.Join(err, e)
	m.denyHits, e = meter.Int64ObservableCounter(DenialCacheHits, metric.WithUnit("{decision}"),
		metric.WithDescription("Denials the rate-limit backend answered from its near-cache of denials, without a call."))
	err = errors.Join(err, e)
	m.denyEvicts, e = meter.Int64ObservableCounter(DenialCacheEvictions, metric.WithUnit("{entry}"),
		metric.WithDescription("Entries the rate-limit backend's near-cache of denials evicted to make room."))
	err = errors.Join(err, e)
	observed := []metric.Observable{m.decisions, m.shadow, m.fallback, m.generation, m.age, m.refreshErrs, m.denyHits, m.denyEvicts}
	if err != nil {
		return nil, err
	}
	m.reg, err = meter.RegisterCallback(m.observe, observed...)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Close unregisters the callbacks of the observable instruments; the counts
// stop being reported.
func (m *Metrics) Close() error { return m.reg.Unregister() }

func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	observeLimit := func(lc *limitCells) {
		for i := range lc.cells {
			for j := range lc.cells[i] {
				if c := lc.cells[i][j].Load(); c != nil {
					o.ObserveInt64(m.decisions, c.n.Load(), metric.WithAttributeSet(c.set))
				}
			}
		}
		if c := lc.shadow.Load(); c != nil {
			o.ObserveInt64(m.shadow, c.n.Load(), metric.WithAttributeSet(c.set))
		}
	}
	for _, lc := range *m.limits.Load() {
		observeLimit(lc)
	}
	observeLimit(m.overflow)
	if n := m.errCell.n.Load(); n > 0 {
		o.ObserveInt64(m.decisions, n, metric.WithAttributeSet(m.errCell.set))
	}
	var active int64
	if m.fbActive.Load() {
		active = 1
	}
	o.ObserveInt64(m.fallback, active)
	if src := m.src.Load(); src != nil {
		st := src.Status()
		o.ObserveInt64(m.generation, int64(st.Generation))
		o.ObserveFloat64(m.age, st.Age.Seconds())
		o.ObserveInt64(m.refreshErrs, int64(st.Errors))
	}
	if f := m.denyStats.Load(); f != nil {
		hits, evictions := (*f)()
		o.ObserveInt64(m.denyHits, hits)
		o.ObserveInt64(m.denyEvicts, evictions)
	}
	return nil
}

// ObserveSource reports src's configuration generation, refresh age and
// refresh errors. A later call replaces the Source observed.
func (m *Metrics) ObserveSource(src *stack.Source) { m.src.Store(src) }

// ObserveDenialCache reports a backend's near-cache of denials as the
// counters sluice.backend.denial_cache.hits and
// sluice.backend.denial_cache.evictions: stats returns the counts since the
// backend began, read when metrics are collected. For the Redis backend,
// pass its DenialCacheStats method:
//
//	m.ObserveDenialCache(backend.DenialCacheStats)
//
// A later call replaces the function observed; a nil stats stops reporting.
func (m *Metrics) ObserveDenialCache(stats func() (hits, evictions int64)) {
	if stats == nil {
		m.denyStats.Store(nil)
		return
	}
	m.denyStats.Store(&stats)
}

// limit returns the cells of limit id, creating them on first use.
func (m *Metrics) limit(id string) *limitCells {
	if lc, ok := (*m.limits.Load())[id]; ok {
		return lc
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := *m.limits.Load()
	if lc, ok := cur[id]; ok {
		return lc
	}
	if len(cur) >= MaxLimitIDs {
		return m.overflow
	}
	next := make(map[string]*limitCells, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	lc := &limitCells{idValue: id, id: otelattr.KeyLimitKey.String(id)}
	next[id] = lc
	m.limits.Store(&next)
	return lc
}

// cell returns the cell of a decision of lc.
func (m *Metrics) cell(lc *limitCells, allowed bool, metricName string) *cell {
	i, j := 1, metricSlot(metricName)
	if allowed {
		i = 0
	}
	if c := lc.cells[i][j].Load(); c != nil {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := lc.cells[i][j].Load(); c != nil {
		return c
	}
	kvs := []attribute.KeyValue{otelattr.KeyDecision.String(otelattr.Throttled)}
	if allowed {
		kvs[0] = otelattr.KeyDecision.String(otelattr.Allowed)
	}
	if j != 0 {
		kvs = append(kvs, otelattr.KeyMetric.String(slotMetric[j]))
	}
	c := newCell(lc.attrs(kvs...)...)
	c.cacheable = !lc.overflow && j != 4
	c.allowed, c.id, c.metric = allowed, lc.idValue, metricName
	lc.cells[i][j].Store(c)
	return c
}

func (m *Metrics) shadowCell(limitKey string) *cell {
	id, _, _ := strings.Cut(limitKey, "/")
	lc := m.limit(id)
	if c := lc.shadow.Load(); c != nil {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := lc.shadow.Load(); c != nil {
		return c
	}
	c := newCell(lc.attrs()...)
	lc.shadow.Store(c)
	return c
}

// Record counts one decision (d, err) as Wrap does, without timing it.
func (m *Metrics) Record(d sluice.Decision, err error) { m.count(&d, err, nil) }

// sampler picks the decisions a wrapper times. Rather than drawing a random
// number per decision, it arms itself when the count of the series its
// decision went to lands on one of a scattered 1/every of the counts, and
// times the next decision: one decision in every, for the price of one
// atomic load of a line that is rarely written.
//
// The counts are scattered by a multiplicative hash rather than taken as
// the multiples of every: a series' count is shared by every wrapper of the
// Metrics, and with two wrappers called in turn (a local check, then a
// remote one) the multiples all fell to the same one, so the histogram held
// the durations of only one of the two limiters.
type sampler struct{ armed atomic.Bool }

// take reports whether to time this decision.
func (s *sampler) take(every uint32) bool {
	if every == 1 {
		return true
	}
	return s.armed.Load() && s.armed.CompareAndSwap(true, false)
}

// counted arms the sampler when count n is one of the counts picked.
func (s *sampler) counted(every uint32, n int64) {
	if every > 1 && uint32(uint64(n)*0x9e3779b97f4a7c15>>32)&(every-1) == 0 {
		s.armed.Store(true)
	}
}

// count counts one decision. last, if not nil, caches the cell of the
// previous decision: a limiter's decisions mostly name the same limit, and
// comparing three fields is cheaper than hashing the limit id.
func (m *Metrics) count(d *sluice.Decision, err error, last *atomic.Pointer[cell]) (*cell, int64) {
	var c *cell
	switch {
	case err != nil:
		c = m.errCell
	case last != nil:
		if c = last.Load(); c == nil || !c.counts(d) {
			c = m.cell(m.limit(d.LimitID), d.Allowed, d.Metric)
			if c.cacheable {
				last.Store(c)
			}
		}
	default:
		c = m.cell(m.limit(d.LimitID), d.Allowed, d.Metric)
	}
	n := c.n.Add(1)
	for _, k := range d.Shadowed {
		m.shadowCell(k).n.Add(1)
	}
	return c, n
}

// Wrap returns a Limiter that calls l and counts and times its decisions. If
// l is a sluice.Reserver, so is the result, and reservations are counted as
// decisions too; if l is also a sluice.SlotReserver, so is the result, and
// ReserveSlots is counted the same way. The result is safe for concurrent
// use if l is. A nil l panics at once, naming it.
func (m *Metrics) Wrap(l sluice.Limiter) sluice.Limiter {
	if l == nil {
		panic("otelmetric: Wrap: the Limiter l is nil")
	}
	if r, ok := l.(sluice.Reserver); ok {
		if sr, ok := l.(sluice.SlotReserver); ok {
			return &slotWrapper{reserverWrapper: reserverWrapper{wrapper: wrapper{m: m, inner: l}, inner: r}, slots: sr}
		}
		return &reserverWrapper{wrapper: wrapper{m: m, inner: l}, inner: r}
	}
	return &wrapper{m: m, inner: l}
}

type wrapper struct {
	m       *Metrics
	inner   sluice.Limiter
	last    atomic.Pointer[cell]
	sampler sampler
}

func (w *wrapper) Allow(ctx context.Context, keys sluice.Keys) (d sluice.Decision, err error) {
	m := w.m
	if !w.sampler.take(m.every) {
		d, err = w.inner.Allow(ctx, keys)
		_, n := m.count(&d, err, &w.last)
		w.sampler.counted(m.every, n)
		return d, err
	}
	start := m.mark()
	d, err = w.inner.Allow(ctx, keys)
	elapsed := time.Duration(m.mark() - start)
	c, _ := m.count(&d, err, &w.last)
	m.duration.Record(ctx, elapsed.Seconds(), c.recOpts...)
	return d, err
}

// reserverWrapper embeds the wrapper by value, first, so that its promoted
// Allow is a plain jump.
type reserverWrapper struct {
	wrapper
	inner sluice.Reserver
}

func (w *reserverWrapper) Reserve(ctx context.Context, keys sluice.Keys, estimate int) (r sluice.Reservation, d sluice.Decision, err error) {
	m := w.m
	if !w.sampler.take(m.every) {
		r, d, err = w.inner.Reserve(ctx, keys, estimate)
		_, n := m.count(&d, err, &w.last)
		w.sampler.counted(m.every, n)
		return r, d, err
	}
	start := m.mark()
	r, d, err = w.inner.Reserve(ctx, keys, estimate)
	elapsed := time.Duration(m.mark() - start)
	c, _ := m.count(&d, err, &w.last)
	m.duration.Record(ctx, elapsed.Seconds(), c.recOpts...)
	return r, d, err
}

type slotWrapper struct {
	reserverWrapper
	slots sluice.SlotReserver
}

func (w *slotWrapper) ReserveSlots(ctx context.Context, keys sluice.Keys) (r sluice.Reservation, d sluice.Decision, err error) {
	m := w.m
	if !w.sampler.take(m.every) {
		r, d, err = w.slots.ReserveSlots(ctx, keys)
		_, n := m.count(&d, err, &w.last)
		w.sampler.counted(m.every, n)
		return r, d, err
	}
	start := m.mark()
	r, d, err = w.slots.ReserveSlots(ctx, keys)
	elapsed := time.Duration(m.mark() - start)
	c, _ := m.count(&d, err, &w.last)
	m.duration.Record(ctx, elapsed.Seconds(), c.recOpts...)
	return r, d, err
}

// ErrorHandler returns a function for stack.WithErrorHandler that counts
// backend errors (sluice.backend.errors, by error.type), follows the
// backend's fallback state from its *stack.FallbackError events
// (sluice.backend.fallback.active, sluice.backend.fallbacks; the store
// failures a fallback absorbs count as backend errors too), and then calls
// next, if not nil, with every error. A *stack.SourceError is passed on
// without being counted here: ObserveSource counts refresh failures.
func (m *Metrics) ErrorHandler(next func(error)) func(error) {
	return func(err error) {
		m.handle(err)
		if next != nil {
			next(err)
		}
	}
}

func (m *Metrics) handle(err error) {
	if err == nil {
		return
	}
	var se *stack.SourceError
	if errors.As(err, &se) {
		return
	}
	var fe *stack.FallbackError
	if !errors.As(err, &fe) {
		m.countError(err, 1)
		return
	}
	m.mu.Lock()
	entered := fe.Active && !m.inFallback
	if entered {
		m.failures = 0
	}
	delta := fe.Failures - m.failures
	if delta > 0 {
		m.failures = fe.Failures
	} else {
		delta = 0
	}
	m.inFallback = fe.Active
	m.fbActive.Store(fe.Active)
	if !fe.Active {
		m.failures = 0
	}
	m.mu.Unlock()
	if entered {
		m.fallbacks.Add(context.Background(), 1)
	}
	if delta > 0 {
		m.countError(fe.Err, delta)
	}
}

func (m *Metrics) countError(err error, n int64) {
	typ := "_OTHER"
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		typ = "timeout"
	case errors.Is(err, context.Canceled):
		typ = "canceled"
	case err != nil:
		typ = reflect.TypeOf(err).String()
	}
	m.mu.Lock()
	opts, ok := m.errTypes[typ]
	if !ok {
		if len(m.errTypes) >= maxErrorTypes {
			typ = "_OTHER"
			opts, ok = m.errTypes[typ]
		}
		if !ok {
			opts = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(KeyErrorType.String(typ)))}
			m.errTypes[typ] = opts
		}
	}
	m.mu.Unlock()
	m.backendErrs.Add(context.Background(), n, opts...)
}

// mark reads the clock decisions are timed with, in nanoseconds: the
// default clock without building a time.Time (timing needs differences
// only), or the clock given to WithClock.
func (m *Metrics) mark() int64 {
	if m.now == nil {
		return monoclock.Nanos()
	}
	return m.now().UnixNano()
}

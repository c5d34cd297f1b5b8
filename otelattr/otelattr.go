// Package otelattr records each rate-limit decision on the request's
// OpenTelemetry span.
//
// The attributes have the names and values the gateway emits:
//
//	<namespace>.decision         "allowed" or "throttled"
//	<namespace>.limit_key        the denying rateLimitId          (throttled only)
//	<namespace>.metric           the exhausted metric            (throttled only)
//	<namespace>.matched_entry    the matched entry's values, "," (throttled only)
//	<namespace>.resolved_values  the request's values, ","       (throttled only)
//	<namespace>.evaluated        every bucket checked, in evaluation order, as "{rateLimitId}:{metric}:{v1,v2,…}"
//
// The evaluated entries are Decision.Evaluated as the engine wrote it
// ("per-caller:requests:alice", the gateway's form), in which separators
// inside ids and values are percent-encoded so that no two buckets read
// alike. The format is documented once, in package stack ("Names of limits
// and buckets").
//
// The evaluated attribute is Decision.Evaluated, which engines fill only when
// called with a context from sluice.WithEvaluated. Wrap does that whenever
// the span is recording; if you call Schema.Record yourself, decide with
// sluice.WithEvaluated(ctx), or the attribute is an empty list.
//
// The attribute keys of the Default schema are the Key constants below;
// the Gateway schema's are the same names under GatewayNamespace.
//
// Two schemas are provided: Default, under sluice's own namespace
// "sluice.ratelimit", and Gateway, which emits exactly the gateway's names
// ("aws.agentcore.gateway.throttle.customer.*") so that existing dashboards
// and queries keep working.
//
// Wrap a Limiter to record every decision on the span in the request's
// context, or call a Schema's Record yourself (otelattr.Default.Record). Nothing is recorded, and nothing
// allocated, when the span is not recording.
package otelattr

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
)

// Namespaces of the two provided schemas.
const (
	// Namespace is sluice's own attribute namespace.
	Namespace = "sluice.ratelimit"
	// GatewayNamespace is the namespace the gateway uses for customer
	// rate limits.
	GatewayNamespace = "aws.agentcore.gateway.throttle.customer"
)

// Attribute keys under Namespace.
const (
	KeyDecision       attribute.Key = Namespace + ".decision"
	KeyLimitKey       attribute.Key = Namespace + ".limit_key"
	KeyMetric         attribute.Key = Namespace + ".metric"
	KeyMatchedEntry   attribute.Key = Namespace + ".matched_entry"
	KeyResolvedValues attribute.Key = Namespace + ".resolved_values"
	KeyEvaluated      attribute.Key = Namespace + ".evaluated"
)

// Values of the decision attribute.
const (
	Allowed   = "allowed"
	Throttled = "throttled"
)

// Schema names the attributes a decision is recorded under. Build one with
// NewSchema, or use Default or Gateway. A Schema is immutable and safe for
// concurrent use.
type Schema struct {
	decision, limitKey, metric, matchedEntry, resolvedValues, evaluated attribute.Key
	// The two decision values, built once.
	allowed, throttled attribute.KeyValue
}

// NewSchema returns the schema whose attributes are namespace + ".decision",
// namespace + ".limit_key", and so on.
func NewSchema(namespace string) *Schema {
	s := &Schema{
		decision:       attribute.Key(namespace + ".decision"),
		limitKey:       attribute.Key(namespace + ".limit_key"),
		metric:         attribute.Key(namespace + ".metric"),
		matchedEntry:   attribute.Key(namespace + ".matched_entry"),
		resolvedValues: attribute.Key(namespace + ".resolved_values"),
		evaluated:      attribute.Key(namespace + ".evaluated"),
	}
	s.allowed = s.decision.String(Allowed)
	s.throttled = s.decision.String(Throttled)
	return s
}

var (
	// Default records under Namespace ("sluice.ratelimit.*").
	Default = NewSchema(Namespace)
	// Gateway records under GatewayNamespace
	// ("aws.agentcore.gateway.throttle.customer.*"), for dashboards built on
	// the gateway's attributes.
	Gateway = NewSchema(GatewayNamespace)
)

// maxAttrs is the number of attributes a throttled decision produces.
const maxAttrs = 6

// appendAttributes appends the attributes of d to dst (see Attributes).
func (s *Schema) appendAttributes(dst []attribute.KeyValue, d sluice.Decision) []attribute.KeyValue {
	if d.Allowed {
		dst = append(dst, s.allowed)
	} else {
		limitID := d.LimitID
		if limitID == "" {
			// An engine that sets only LimitKey: its id is the part before "/".
			limitID, _, _ = strings.Cut(d.LimitKey, "/")
		}
		dst = append(dst,
			s.throttled,
			s.limitKey.String(limitID),
			s.metric.String(d.Metric),
			s.matchedEntry.String(strings.Join(d.MatchedEntry, ",")),
			s.resolvedValues.String(strings.Join(d.ResolvedValues, ",")),
		)
	}
	evaluated := d.Evaluated
	if evaluated == nil {
		evaluated = []string{}
	}
	return append(dst, s.evaluated.StringSlice(evaluated))
}

// Attributes returns the attributes of d: decision and evaluated always;
// limit_key (the denying rateLimitId), metric, matched_entry and
// resolved_values only when d is a denial.
func (s *Schema) Attributes(d sluice.Decision) []attribute.KeyValue {
	return s.appendAttributes(make([]attribute.KeyValue, 0, maxAttrs), d)
}

// Record sets the attributes of d on span if the span is recording, and
// does nothing (and allocates nothing) otherwise. To get the evaluated
// list, call the limiter with a context from sluice.WithEvaluated (Wrap
// does that for you).
func (s *Schema) Record(span trace.Span, d sluice.Decision) {
	if span == nil || !span.IsRecording() {
		return
	}
	var buf [maxAttrs]attribute.KeyValue
	span.SetAttributes(s.appendAttributes(buf[:0], d)...)
}

// Option configures Wrap.
type Option interface{ apply(*wrapper) }

type optionFunc func(*wrapper)

func (f optionFunc) apply(w *wrapper) { f(w) }

// WithSchema records under s instead of Default (for instance Gateway). A
// nil s keeps Default.
func WithSchema(s *Schema) Option {
	return optionFunc(func(w *wrapper) {
		if s != nil {
			w.schema = s
		}
	})
}

type wrapper struct {
	inner  sluice.Limiter
	schema *Schema
}

// Wrap returns a Limiter that calls l and records each decision on the span
// in the request's context. When that span is recording, l is called with a
// context from sluice.WithEvaluated, so that engines fill
// Decision.Evaluated; when it is not, l is called with the context unchanged
// and Wrap adds no work and no allocation. A call that returns an error
// records nothing. The result is safe for concurrent use if l is.
//
// If l is a sluice.Reserver (a stack is), so is the result: Reserve is
// forwarded and its decision recorded the same way, so middleware that
// enforces connections limits through Reserve keeps doing so. If l is also a
// sluice.SlotReserver, so is the result, and ReserveSlots is forwarded and
// recorded the same way: middleware behind Wrap then holds nothing for a
// request that no connections limit applies to.
//
// Wrap panics, at construction, when l is nil (a programming error); a nil
// Option is ignored.
func Wrap(l sluice.Limiter, opts ...Option) sluice.Limiter {
	if l == nil {
		panic("otelattr: Wrap: the Limiter l is nil")
	}
	w := &wrapper{inner: l, schema: Default}
	for _, o := range opts {
		if o != nil {
			o.apply(w)
		}
	}
	if r, ok := l.(sluice.Reserver); ok {
		rw := &reserverWrapper{wrapper: w, inner: r}
		if sr, ok := l.(sluice.SlotReserver); ok {
			return &slotWrapper{reserverWrapper: rw, slots: sr}
		}
		return rw
	}
	return w
}

type slotWrapper struct {
	*reserverWrapper
	slots sluice.SlotReserver
}

func (w *slotWrapper) ReserveSlots(ctx context.Context, keys sluice.Keys) (sluice.Reservation, sluice.Decision, error) {
	if ctx == nil {
		return w.slots.ReserveSlots(ctx, keys)
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return w.slots.ReserveSlots(ctx, keys)
	}
	r, d, err := w.slots.ReserveSlots(sluice.WithEvaluated(ctx), keys)
	if err == nil {
		w.schema.Record(span, d)
	}
	return r, d, err
}

type reserverWrapper struct {
	*wrapper
	inner sluice.Reserver
}

func (w *reserverWrapper) Reserve(ctx context.Context, keys sluice.Keys, estimate int) (sluice.Reservation, sluice.Decision, error) {
	if ctx == nil {
		return w.inner.Reserve(ctx, keys, estimate)
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return w.inner.Reserve(ctx, keys, estimate)
	}
	r, d, err := w.inner.Reserve(sluice.WithEvaluated(ctx), keys, estimate)
	if err == nil {
		w.schema.Record(span, d)
	}
	return r, d, err
}

func (w *wrapper) Allow(ctx context.Context, keys sluice.Keys) (sluice.Decision, error) {
	if ctx == nil {
		return w.inner.Allow(ctx, keys)
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return w.inner.Allow(ctx, keys)
	}
	d, err := w.inner.Allow(sluice.WithEvaluated(ctx), keys)
	if err == nil {
		w.schema.Record(span, d)
	}
	return d, err
}

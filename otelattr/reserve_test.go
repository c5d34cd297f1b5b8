package otelattr_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/otelattr"
	"github.com/sluicehq/sluice/stack"
)

// Wrap keeps a Reserver a Reserver, so connections limits still hold, and
// records Reserve's decisions on the span.
func TestWrapForwardsReserve(t *testing.T) {
	s, err := stack.New(stack.Config{RateLimits: []stack.RateLimit{{
		RateLimitID: "in-flight", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Connections: []stack.Rate{{Rate: 1, Period: "second"}}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := otelattr.Wrap(s).(sluice.Reserver)
	if !ok {
		t.Fatal("Wrap of a Reserver is not a Reserver")
	}
	if _, ok := otelattr.Wrap(sluice.Unlimited).(sluice.Reserver); ok {
		t.Error("Wrap of a plain Limiter claims to be a Reserver")
	}
	sr, tp := newRecorder()
	ctx, span := tp.Tracer("t").Start(context.Background(), "req")
	keys := sluice.NewKeys("caller", "alice")
	res, d, err := r.Reserve(ctx, keys, 0)
	if err != nil || !d.Allowed {
		t.Fatalf("first: %+v %v", d, err)
	}
	_, d, _ = r.Reserve(ctx, keys, 0)
	if d.Allowed || d.Metric != sluice.MetricConnections {
		t.Fatalf("second while the first is in flight: %+v", d)
	}
	span.End()
	got := attrs(sr.Ended()[0].Attributes())
	if got["sluice.ratelimit.decision"] != "throttled" || got["sluice.ratelimit.metric"] != "connections" {
		t.Errorf("span attributes %v", got)
	}
	if err := res.Reconcile(0); err != nil {
		t.Fatal(err)
	}
	if _, d, _ := r.Reserve(context.Background(), keys, 0); !d.Allowed {
		t.Errorf("after release: %+v", d)
	}
}

package otelattr_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/otelattr"
)

func ExampleWrap() {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))

	// Any Limiter: here one that denies with the gateway's documented values.
	// (A stack.Stack fills Evaluated only when the context asks, as Wrap's
	// does while the span is recording; this one always does.)
	engine := sluice.LimiterFunc(func(ctx context.Context, keys sluice.Keys) (sluice.Decision, error) {
		return sluice.Decision{
			LimitID: "per-target-rps", LimitKey: "per-target-rps/targetName=my-target",
			Metric: sluice.MetricRequests, MatchedEntry: []string{"my-target", "alice"},
			ResolvedValues: []string{"my-target", "alice"},
			Evaluated:      []string{"per-caller-rpm:requests:alice", "per-target-rps:requests:my-target"},
		}, nil
	})
	l := otelattr.Wrap(engine, otelattr.WithSchema(otelattr.Gateway))

	ctx, span := tp.Tracer("gateway").Start(context.Background(), "tools/call")
	_, _ = l.Allow(ctx, sluice.NewKeys("targetName", "my-target", "caller", "alice"))
	span.End()

	for _, kv := range sr.Ended()[0].Attributes() {
		fmt.Printf("%s = %s\n", kv.Key, kv.Value.String())
	}
	// Output:
	// aws.agentcore.gateway.throttle.customer.decision = throttled
	// aws.agentcore.gateway.throttle.customer.limit_key = per-target-rps
	// aws.agentcore.gateway.throttle.customer.metric = requests
	// aws.agentcore.gateway.throttle.customer.matched_entry = my-target,alice
	// aws.agentcore.gateway.throttle.customer.resolved_values = my-target,alice
	// aws.agentcore.gateway.throttle.customer.evaluated = ["per-caller-rpm:requests:alice","per-target-rps:requests:my-target"]
}

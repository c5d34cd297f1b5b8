package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// A Limiter returns a Decision; a denial is not an error until you ask for one.
func Example() {
	// Any engine (stack, category, …) is a sluice.Limiter; here a small
	// function stands in for one that throttles everyone but alice.
	var l sluice.Limiter = sluice.LimiterFunc(func(_ context.Context, k sluice.Keys) (sluice.Decision, error) {
		if caller, _ := k.Get("caller"); caller == "alice" {
			return sluice.Decision{Allowed: true}, nil
		}
		return sluice.Decision{LimitID: "per-caller", LimitKey: "per-caller/caller=bob", Metric: sluice.MetricRequests, RetryAfter: 1500 * time.Millisecond}, nil
	})
	for _, caller := range []string{"alice", "bob"} {
		d, err := l.Allow(context.Background(), sluice.NewKeys("caller", caller))
		if err != nil {
			fmt.Println("could not decide:", err)
			continue
		}
		if err := d.Err(); errors.Is(err, slerrors.ErrThrottled) {
			te, _ := slerrors.AsThrottled(err)
			fmt.Printf("%s: throttled by %s, Retry-After: %d\n", caller, te.LimitKey, te.RetryAfterSeconds())
			continue
		}
		fmt.Printf("%s: allowed\n", caller)
	}
	// Output:
	// alice: allowed
	// bob: throttled by per-caller/caller=bob, Retry-After: 2
}

// A Decision is a slog.LogValuer: it logs as a compact group.
func ExampleDecision_LogValue() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // a fixed output for the example
			}
			return a
		},
	}))
	d := sluice.Decision{
		LimitID: "per-caller", LimitKey: "per-caller/caller=bob", Metric: sluice.MetricRequests,
		RetryAfter: 1500 * time.Millisecond, MatchedEntry: []string{"*"}, ResolvedValues: []string{"bob"},
	}
	logger.Info("throttled", "decision", d)
	logger.Info("passed", "decision", sluice.Decision{Allowed: true, LimitID: "per-caller"})
	// Output:
	// level=INFO msg=throttled decision.allowed=false decision.limit="per-caller/caller=bob" decision.metric=requests decision.retry_after=1.5s
	// level=INFO msg=passed decision.allowed=true decision.limit=per-caller
}

// An Admitter is how middleware asks a Limiter about a request: a
// stack.Stack with a connections limit holds a slot while the request runs,
// and a request's slots are released when its handler returns.
func ExampleAdmitter() {
	limits, err := stack.New(stack.Config{RateLimits: []stack.RateLimit{{
		RateLimitID: "in-flight", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"},
			Connections: []stack.Rate{{Rate: 1, Period: stack.Second}}}},
	}}}, stack.WithClock(limitertest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))))
	if err != nil {
		fmt.Println(err)
		return
	}
	adm := sluice.NewAdmitter(limits) // once, when the middleware is built

	// serve is what middleware does per request; handler runs while the
	// request holds its slot.
	serve := func(caller string, handler func()) {
		slots, d, err := adm.Admit(context.Background(), sluice.NewKeys("caller", caller))
		switch {
		case err != nil:
			fmt.Println(caller+": could not decide:", err)
			return
		case !d.Allowed:
			fmt.Printf("%s: throttled by %s (%s)\n", caller, d.LimitKey, d.Metric)
			return
		}
		defer slots.Reconcile(0)
		fmt.Println(caller + ": admitted")
		handler()
	}
	serve("alice", func() {
		serve("alice", func() {}) // alice's second request while her first runs
		serve("bob", func() {})   // bob has a slot of his own
	})
	serve("alice", func() {}) // her first request has ended
	// Output:
	// alice: admitted
	// alice: throttled by in-flight/caller=alice (connections)
	// bob: admitted
	// alice: admitted
}

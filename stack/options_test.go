package stack_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func optionsConfig() stack.Config {
	return stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 2, Period: "hour"}}}}},
		{RateLimitID: "conns", DimensionKeys: []string{"conn"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"conn": "*"}, Connections: []stack.Rate{{Rate: 1, Period: "second"}}}}},
	}}
}

// TestOptionsNotGiven walks every Option with the values the option rule
// calls "not given" (zero, negative, nil): none panics, New succeeds, and
// the Stack keeps the documented defaults: in-process buckets, no bound on
// them, leases of DefaultLeaseTTL, no error handler needed.
func TestOptionsNotGiven(t *testing.T) {
	cases := map[string]stack.Option{
		"nil Option":            nil,
		"WithClock(nil)":        stack.WithClock(nil), // after the fake clock: keeps it
		"WithBackend(nil)":      stack.WithBackend(nil),
		"WithErrorHandler(nil)": stack.WithErrorHandler(nil),
		"WithLeaseTTL(0)":       stack.WithLeaseTTL(0),
		"WithLeaseTTL(-1s)":     stack.WithLeaseTTL(-time.Second),
		"WithMaxBuckets(0)":     stack.WithMaxBuckets(0),
		"WithMaxBuckets(-1)":    stack.WithMaxBuckets(-1),
	}
	ctx := context.Background()
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			clock := limitertest.NewClock(limitertest.Start)
			s, err := stack.New(optionsConfig(), stack.WithClock(clock), o)
			if err != nil {
				t.Fatal(err)
			}
			// In-process buckets, unbounded: a thousand callers each get
			// their two requests, decided on the fake clock.
			for i := range 1000 {
				k := sluice.NewKeys("caller", strconv.Itoa(i))
				for j := range 3 {
					d, err := s.Allow(ctx, k)
					if err != nil || d.Allowed != (j < 2) || d.Capacity {
						t.Fatalf("caller %d request %d: %+v, %v", i, j, d, err)
					}
					if j == 2 && (d.RetryAfter <= 29*time.Minute || d.RetryAfter > 30*time.Minute) {
						t.Fatalf("RetryAfter %v, want about 30m on the fake clock", d.RetryAfter)
					}
				}
			}
			// A slot left unsettled expires after DefaultLeaseTTL.
			k := sluice.NewKeys("conn", "x")
			if _, d, err := s.Reserve(ctx, k, 0); err != nil || !d.Allowed {
				t.Fatalf("first slot: %+v, %v", d, err)
			}
			clock.Advance(stack.DefaultLeaseTTL - time.Second)
			if _, d, _ := s.Reserve(ctx, k, 0); d.Allowed {
				t.Fatal("the slot expired before DefaultLeaseTTL")
			}
			clock.Advance(2 * time.Second)
			if _, d, err := s.Reserve(ctx, k, 0); err != nil || !d.Allowed {
				t.Fatalf("the slot did not expire after DefaultLeaseTTL: %+v, %v", d, err)
			}
		})
	}
}

// TestOptionsNotGivenDefaults checks the defaults the fake clock above
// hides: WithClock(nil) alone decides on the system clock, and a backend
// error with WithErrorHandler(nil) fails open without a handler to call.
func TestOptionsNotGivenDefaults(t *testing.T) {
	ctx := context.Background()
	s, err := stack.New(optionsConfig(), stack.WithClock(nil))
	if err != nil {
		t.Fatal(err)
	}
	k := sluice.NewKeys("caller", "a")
	_, _ = s.Allow(ctx, k)
	_, _ = s.Allow(ctx, k)
	if d, err := s.Allow(ctx, k); err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 30*time.Minute {
		t.Fatalf("third request on the system clock: %+v, %v; want denied within 30m", d, err)
	}

	cfg := optionsConfig()
	cfg.RateLimits = cfg.RateLimits[:1] // connections need a ConnBackend
	s, err = stack.New(cfg, stack.WithBackend(failing{}), stack.WithErrorHandler(nil))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := s.Allow(ctx, k); err != nil || !d.Allowed {
		t.Fatalf("backend error without a handler: %+v, %v; want fail-open", d, err)
	}
}

type failing struct{}

var errOptionsDown = errors.New("down")

func (failing) Take(context.Context, time.Time, []stack.Op) (stack.Outcome, error) {
	return stack.Outcome{}, errOptionsDown
}
func (failing) Adjust(context.Context, time.Time, []stack.Op) error { return errOptionsDown }

// TestSourceOptionsNotGiven walks every SourceOption the same way: a nil
// option, WithInterval(0 or negative) and WithTicks(nil) leave the
// defaults (DefaultRefreshInterval, Run's own ticker: checked in
// TestSourceOptionDefaults); Refresh works.
func TestSourceOptionsNotGiven(t *testing.T) {
	for name, o := range map[string]stack.SourceOption{
		"nil SourceOption":  nil,
		"WithInterval(0)":   stack.WithInterval(0),
		"WithInterval(-1s)": stack.WithInterval(-time.Second),
		"WithTicks(nil)":    stack.WithTicks(nil),
	} {
		t.Run(name, func(t *testing.T) {
			st, err := stack.New(optionsConfig())
			if err != nil {
				t.Fatal(err)
			}
			doc := []byte(`{"rateLimits":[]}`)
			src := stack.NewSource(st, func(context.Context) ([]byte, error) { return doc, nil }, o)
			if err := src.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			if g := src.Status().Generation; g != 1 {
				t.Errorf("generation %d after one refresh", g)
			}
		})
	}
}

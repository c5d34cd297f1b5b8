package envoyrls_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/stack"
)

// TestOptionsNotGiven walks every option of New with the values the
// option rule calls "not given" (zero, negative, nil): none panics, and
// each gives the documented default. Every option's other values are valid,
// so New has no error to check.
func TestOptionsNotGiven(t *testing.T) {
	cases := []struct {
		name string
		opt  envoyrls.Option
	}{
		{"nil Option", nil},
		{"WithBackend(nil)", envoyrls.WithBackend(nil)},
		{"WithClock(nil)", envoyrls.WithClock(nil)},
		{"WithMetrics(nil)", envoyrls.WithMetrics(nil)},
		{"WithErrorHandler(nil)", envoyrls.WithErrorHandler(nil)},
		{"WithMaxBuckets(0)", envoyrls.WithMaxBuckets(0)},
		{"WithMaxBuckets(-1)", envoyrls.WithMaxBuckets(-1)},
		{"WithNearLimitRatio(0)", envoyrls.WithNearLimitRatio(0)},
		{"WithNearLimitRatio(-1)", envoyrls.WithNearLimitRatio(-1)},
		{"WithNearLimitRatio(NaN)", envoyrls.WithNearLimitRatio(math.NaN())},
		// Options without an argument, for completeness of the walk.
		{"WithFailClosed()", envoyrls.WithFailClosed()},
		{"WithShadowMode()", envoyrls.WithShadowMode()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := envoyrls.New(load(t, "api.yaml", twoLimits), c.opt)
			ask := func() *rlsv3.RateLimitResponse {
				t.Helper()
				r, err := srv.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
					Domain:      "api",
					Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("route", "/x")},
				})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			// The default clock and the default bucket bound decide: two
			// requests a minute on the route pass, the third is over (in
			// shadow mode it is reported over but answered OK).
			for i := range 2 {
				if r := ask(); r.OverallCode != ok {
					t.Fatalf("request %d: %v, want OK", i, r.OverallCode)
				}
			}
			r := ask()
			if r.Statuses[0].Code != over {
				t.Fatalf("third request: status %v, want OVER_LIMIT", r.Statuses[0].Code)
			}
			// Decided at the default clock: the reset is within the minute.
			if d := r.Statuses[0].DurationUntilReset.AsDuration(); d <= 0 || d > time.Minute {
				t.Errorf("duration until reset %v, want within (0, 1m] of the default clock", d)
			}
		})
	}
}

// A nil argument to WithBackend, WithMetrics or WithErrorHandler means "not
// given": it does not undo the same option given before it.
func TestNilOptionArgumentKeepsEarlierOne(t *testing.T) {
	var errs []error
	be := &failingBackend{}
	srv := envoyrls.New(load(t, "api.yaml", twoLimits),
		envoyrls.WithBackend(be), envoyrls.WithBackend(nil),
		envoyrls.WithErrorHandler(func(err error) { errs = append(errs, err) }), envoyrls.WithErrorHandler(nil))
	if _, err := srv.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
		Domain:      "api",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("route", "/x")},
	}); err != nil {
		t.Fatal(err)
	}
	if be.calls == 0 || len(errs) == 0 {
		t.Fatalf("backend calls %d, handled errors %v: the nil options undid the earlier ones", be.calls, errs)
	}
}

// failingBackend is a stack.Backend that never decides.
type failingBackend struct{ calls int }

func (b *failingBackend) Take(context.Context, time.Time, []stack.Op) (stack.Outcome, error) {
	b.calls++
	return stack.Outcome{}, errors.New("backend down")
}

func (b *failingBackend) Adjust(context.Context, time.Time, []stack.Op) error {
	b.calls++
	return errors.New("backend down")
}

// NewWatcher has no default for a nil server: it panics at construction,
// naming it, instead of at the first Check.
func TestNewWatcherNilServer(t *testing.T) {
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, "nil *Server") {
			t.Errorf("panic %q, want it to name the nil *Server", msg)
		}
	}()
	envoyrls.NewWatcher(nil, t.TempDir(), nil)
}

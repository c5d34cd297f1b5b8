package stack_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucketkey"
	"github.com/sluicehq/sluice/match"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// The Backend path must decide exactly as the in-memory path does.
func TestConformanceThroughMemoryBackend(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, cfg stack.Config, clock *limitertest.Clock) sluice.Limiter {
		s, err := stack.New(cfg, stack.WithClock(clock), stack.WithBackend(stack.NewMemoryBackend()))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestBucketKeyHasNoCollisions(t *testing.T) {
	a := bucketkey.Render("rl", "requests", 0, []string{"a,b", "*"}, []string{"c"})
	b := bucketkey.Render("rl", "requests", 0, []string{"a", "b,*"}, []string{"c"})
	if a == b {
		t.Fatalf("collision: %q", a)
	}
	if want := "rl|requests|0|3:a,b,1:*|1:c"; a != want {
		t.Errorf("BucketKey = %q, want %q", a, want)
	}
}

// brokenBackend fails every call, as a backend does when its server is down.
type brokenBackend struct{ calls atomic.Int64 }

var errDown = errors.New("backend down")

func (b *brokenBackend) Take(context.Context, time.Time, []stack.Op) (stack.Outcome, error) {
	b.calls.Add(1)
	return stack.Outcome{}, errDown
}
func (b *brokenBackend) Adjust(context.Context, time.Time, []stack.Op) error { return errDown }

func TestBackendFailurePolicy(t *testing.T) {
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "rl", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 1, Period: "second"}}}}}}}
	keys := sluice.NewKeys("caller", "a")

	var seen []error
	bb := &brokenBackend{}
	open, _ := stack.New(cfg, stack.WithBackend(bb), stack.WithErrorHandler(func(err error) { seen = append(seen, err) }))
	for i := 0; i < 3; i++ {
		d, err := open.Allow(context.Background(), keys)
		if err != nil || !d.Allowed {
			t.Fatalf("fail-open: %+v, %v", d, err)
		}
	}
	if len(seen) != 3 || !errors.Is(seen[0], errDown) {
		t.Errorf("error handler saw %v", seen)
	}

	closed, _ := stack.New(cfg, stack.WithBackend(&brokenBackend{}), stack.WithFailClosed())
	if _, err := closed.Allow(context.Background(), keys); !errors.Is(err, errDown) {
		t.Errorf("fail-closed: err = %v", err)
	}
	// A request no limit applies to never reaches the backend.
	before := bb.calls.Load()
	if d, err := open.Allow(context.Background(), sluice.NewKeys("other", "x")); err != nil || !d.Allowed {
		t.Errorf("unmatched request: %+v %v", d, err)
	}
	if bb.calls.Load() != before {
		t.Error("the backend was called for a request with no applicable limit")
	}
}

// A Stack with a backend that does not share connections slots refuses
// connections limits (New and Reload) with an error naming where they are,
// instead of skipping them silently.
func TestBackendRefusesConnectionsLimits(t *testing.T) {
	conn := stack.Config{ServiceLimits: []stack.RateLimit{{RateLimitID: "conc", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"},
			Requests:    []stack.Rate{{Rate: 10, Period: stack.Second}},
			Connections: []stack.Rate{{Rate: 2, Period: stack.Second}}}}}}}
	// A Backend that is not a ConnBackend (the embedding hides the
	// MemoryBackend's SharesConnections).
	plainBackend := struct{ stack.Backend }{stack.NewMemoryBackend()}
	_, err := stack.New(conn, stack.WithBackend(plainBackend))
	var ce *match.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Path != "serviceLimits[0].entries[0].connections" ||
		!strings.Contains(err.Error(), "need a backend that shares slots") {
		t.Fatalf("New with connections and a backend: %v", err)
	}
	if _, err := stack.New(conn); err != nil {
		t.Fatalf("in memory, connections limits are supported: %v", err)
	}
	if _, err := stack.New(conn, stack.WithBackend(stack.NewMemoryBackend())); err != nil {
		t.Fatalf("a ConnBackend shares connections limits: %v", err)
	}
	plain := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "rl", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 10, Period: stack.Second}}}}}}}
	s, err := stack.New(plain, stack.WithBackend(plainBackend))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(conn); err == nil || !strings.Contains(err.Error(), "serviceLimits[0].entries[0].connections") {
		t.Fatalf("Reload with connections and a backend: %v", err)
	}
	if got := s.Config().ServiceLimits; len(got) != 0 {
		t.Fatalf("refused Reload changed the configuration: %+v", got)
	}
}

// noticeBackend is a MemoryBackend whose every Take carries a notice.
type noticeBackend struct {
	*stack.MemoryBackend
	n atomic.Int64
}

func (b *noticeBackend) Take(ctx context.Context, at time.Time, ops []stack.Op) (stack.Outcome, error) {
	out, err := b.MemoryBackend.Take(ctx, at, ops)
	out.Notices = append(out.Notices, &stack.FallbackError{Active: true, Failures: b.n.Add(1), Local: 1})
	return out, err
}

// A backend's notices reach the error handler and do not change the
// decision.
func TestBackendNoticesReachTheErrorHandler(t *testing.T) {
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "rl", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 2, Period: stack.Minute}}}}}}}
	var heard []error
	clock := limitertest.NewClock(limitertest.Start)
	s, err := stack.New(cfg, stack.WithClock(clock), stack.WithBackend(&noticeBackend{MemoryBackend: stack.NewMemoryBackend()}),
		stack.WithErrorHandler(func(err error) { heard = append(heard, err) }))
	if err != nil {
		t.Fatal(err)
	}
	var allowed []bool
	for i := 0; i < 3; i++ {
		d, err := s.Allow(context.Background(), sluice.NewKeys("caller", "c"))
		if err != nil {
			t.Fatal(err)
		}
		allowed = append(allowed, d.Allowed)
	}
	if !allowed[0] || !allowed[1] || allowed[2] {
		t.Errorf("decisions %v, want true true false (burst 2)", allowed)
	}
	if len(heard) != 3 {
		t.Fatalf("handler heard %d notices, want 3", len(heard))
	}
	var fe *stack.FallbackError
	if !errors.As(heard[2], &fe) || fe.Failures != 3 || !fe.Active {
		t.Errorf("third notice %v", heard[2])
	}
	if got := fe.Error(); got != "stack: backend unavailable, deciding locally (3 failures, 1 local decisions)" {
		t.Errorf("Error() = %q", got)
	}
}

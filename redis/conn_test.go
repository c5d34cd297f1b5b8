package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// Two processes share one connections limit of 2 through Redis: a third
// concurrent reservation is denied whichever process makes it, a Cancel or
// Reconcile frees a slot for the other process, and the slots of a process
// that dies holding them are reclaimed after the lease TTL.
func TestConnectionsSharedByTheFleet(t *testing.T) {
	srv := startRedis(t)
	clock := limitertest.NewClock(time.Now())
	prefix := uniquePrefix("conns")
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "in-flight", DimensionKeys: []string{"targetName"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "*"},
			Connections: []stack.Rate{{Rate: 2, Period: stack.Second}}}}}}}
	proc := func() *stack.Stack {
		client, _ := newClient(t, srv.Addr)
		b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithClock(clock),
			sluiceredis.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		s, err := stack.New(cfg, stack.WithBackend(b), stack.WithClock(clock), stack.WithFailClosed(),
			stack.WithLeaseTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := proc(), proc()
	ctx := context.Background()
	keys := sluice.NewKeys("targetName", "t")
	reserve := func(s *stack.Stack) (sluice.Reservation, bool) {
		t.Helper()
		r, d, err := s.Reserve(ctx, keys, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed && (d.Metric != sluice.MetricConnections || d.RetryAfter != time.Second) {
			t.Fatalf("denial %+v, want connections with RetryAfter 1s", d)
		}
		return r, d.Allowed
	}
	ra, okA := reserve(a)
	rb, okB := reserve(b)
	if _, ok := reserve(a); !okA || !okB || ok {
		t.Fatalf("limit 2 over two processes: %v %v, third %v", okA, okB, ok)
	}
	if _, ok := reserve(b); ok {
		t.Fatal("the other process got a third slot")
	}
	ra.Cancel() // a frees its slot: b can take it
	rb2, ok := reserve(b)
	if !ok {
		t.Fatal("a slot cancelled by one process was not free for the other")
	}
	if err := rb.Reconcile(0); err != nil {
		t.Fatal(err)
	}
	if _, ok := reserve(a); !ok {
		t.Fatal("a slot reconciled by one process was not free for the other")
	}
	// Both slots are held now (rb2 and a's last), and their holders die.
	_ = rb2
	if _, ok := reserve(b); ok {
		t.Fatal("three slots held")
	}
	clock.Advance(time.Minute + time.Second)
	c := proc() // a new process: the dead ones' slots expired
	r1, ok1 := reserve(c)
	r2, ok2 := reserve(c)
	if !ok1 || !ok2 {
		t.Fatalf("slots of dead processes not reclaimed after the lease TTL: %v %v", ok1, ok2)
	}
	r1.Cancel()
	r2.Cancel()
}

// While Redis is down, a process with a local fallback holds its share of
// the slots (here 1 of 2) locally, and releases them locally.
func TestConnectionsInTheLocalFallback(t *testing.T) {
	srv := startRedis(t)
	if srv.External {
		t.Skip("SLUICE_REDIS_ADDR is set: this test must kill its own server")
	}
	client, _ := newClient(t, srv.Addr)
	b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(uniquePrefix("connfb")), sluiceredis.WithTimeout(200*time.Millisecond),
		sluiceredis.WithProbeInterval(time.Hour), sluiceredis.WithLocalFallback(0.5))
	if err != nil {
		t.Fatal(err)
	}
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "in-flight", DimensionKeys: []string{"targetName"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "*"},
			Connections: []stack.Rate{{Rate: 2, Period: stack.Second}}}}}}}
	s, err := stack.New(cfg, stack.WithBackend(b), stack.WithFailClosed())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := sluice.NewKeys("targetName", "t")
	srv.Stop()
	r1, d1, err1 := s.Reserve(ctx, keys, 0)
	_, d2, err2 := s.Reserve(ctx, keys, 0)
	if err1 != nil || err2 != nil || !d1.Allowed || d2.Allowed || d2.Metric != sluice.MetricConnections {
		t.Fatalf("local share of 2 slots: %+v %v, %+v %v", d1, err1, d2, err2)
	}
	r1.Cancel()
	if _, d, err := s.Reserve(ctx, keys, 0); err != nil || !d.Allowed {
		t.Fatalf("a slot released locally was not free: %+v %v", d, err)
	}
}

// The middlewares admit through sluice.Admitter (Stack.ReserveSlots): on
// the Redis backend the slots they hold are the fleet's, so a request in
// flight in one process takes a slot from the other, and a Reconcile(0) frees it.
func TestConnectionsThroughTheAdmitter(t *testing.T) {
	srv := startRedis(t)
	clock := limitertest.NewClock(time.Now())
	prefix := uniquePrefix("admit")
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "in-flight", DimensionKeys: []string{"targetName"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "*"},
			Connections: []stack.Rate{{Rate: 1, Period: stack.Second}}}}}}}
	proc := func() sluice.Admitter {
		client, _ := newClient(t, srv.Addr)
		b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithClock(clock),
			sluiceredis.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		s, err := stack.New(cfg, stack.WithBackend(b), stack.WithClock(clock), stack.WithFailClosed())
		if err != nil {
			t.Fatal(err)
		}
		return sluice.NewAdmitter(s)
	}
	a, b := proc(), proc()
	ctx := context.Background()
	keys := sluice.NewKeys("targetName", "t")
	held, d, err := a.Admit(ctx, keys)
	if err != nil || !d.Allowed || !held.Held() {
		t.Fatalf("first request: %+v %v held=%v", d, err, held.Held())
	}
	if s, d, err := b.Admit(ctx, keys); err != nil || d.Allowed || d.Metric != sluice.MetricConnections || s.Held() {
		t.Fatalf("second in flight, other process: %+v %v held=%v; want a connections denial", d, err, s.Held())
	}
	if err := held.Reconcile(0); err != nil {
		t.Fatal(err)
	}
	s, d, err := b.Admit(ctx, keys)
	if err != nil || !d.Allowed || !s.Held() {
		t.Fatalf("after the release: %+v %v held=%v", d, err, s.Held())
	}
	if err := s.Reconcile(0); err != nil {
		t.Fatal(err)
	}
}

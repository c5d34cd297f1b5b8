package stack_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/internal/racecheck"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func tpmConfig(tpm int64) stack.Config {
	return stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "per-model-tpm", DimensionKeys: []string{"qualifiedModelId"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"qualifiedModelId": "*"}, Tokens: []stack.Rate{{Rate: tpm, Period: "minute"}}}}},
		{RateLimitID: "per-caller-rpm", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 1000, Period: "minute"}}}}},
	}}
}

var llmKeys = sluice.NewKeys("qualifiedModelId", "anthropic.claude-3-sonnet", "caller", "alice")

// backends runs a test on the in-memory path and through a Backend.
func backends(t *testing.T, f func(t *testing.T, opts ...stack.Option)) {
	t.Run("memory", func(t *testing.T) { f(t) })
	t.Run("backend", func(t *testing.T) { f(t, stack.WithBackend(stack.NewMemoryBackend())) })
}

func newReserver(t *testing.T, cfg stack.Config, clock *limitertest.Clock, opts ...stack.Option) *stack.Stack {
	t.Helper()
	s, err := stack.New(cfg, append([]stack.Option{stack.WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func reserve(t *testing.T, s *stack.Stack, estimate int) (sluice.Reservation, sluice.Decision) {
	t.Helper()
	r, d, err := s.Reserve(context.Background(), llmKeys, estimate)
	if err != nil {
		t.Fatal(err)
	}
	return r, d
}

func TestReserveEstimateOverLimit(t *testing.T) {
	backends(t, func(t *testing.T, opts ...stack.Option) {
		clock := limitertest.NewClock(limitertest.Start)
		s := newReserver(t, tpmConfig(50), clock, opts...)
		// Limit 50, estimate 51: throttled before the work starts, for good.
		r, d := reserve(t, s, 51)
		if d.Allowed || !d.Permanent || !errors.Is(d.Err(), slerrors.ErrCostExceedsBurst) || r != sluice.NoReservation {
			t.Fatalf("estimate 51 of 50: %+v", d)
		}
		// 40 fits; 20 more does not, and RetryAfter is honest for 20: 10
		// tokens short at 50/min is 12 s.
		if _, d := reserve(t, s, 40); !d.Allowed {
			t.Fatalf("40 of 50: %+v", d)
		}
		_, d = reserve(t, s, 20)
		if d.Allowed || d.Metric != "tokens" || d.LimitID != "per-model-tpm" {
			t.Fatalf("20 with 10 left: %+v", d)
		}
		if d.RetryAfter < 12*time.Second || d.RetryAfter > 12*time.Second+time.Millisecond {
			t.Errorf("RetryAfter %v, want 12s", d.RetryAfter)
		}
		clock.Advance(d.RetryAfter)
		if _, d := reserve(t, s, 20); !d.Allowed {
			t.Errorf("after RetryAfter: %+v", d)
		}
	})
}

func TestReconcileUnderrunAndOverrun(t *testing.T) {
	backends(t, func(t *testing.T, opts ...stack.Option) {
		clock := limitertest.NewClock(limitertest.Start)
		s := newReserver(t, tpmConfig(50), clock, opts...)
		r, _ := reserve(t, s, 40)
		if err := r.Reconcile(10); err != nil { // 30 refunded exactly
			t.Fatal(err)
		}
		r.Cancel() // no effect after Reconcile
		if err := r.Reconcile(0); err != nil {
			t.Fatal(err)
		}
		r2, d := reserve(t, s, 40)
		if !d.Allowed {
			t.Fatalf("after an underrun of 30, 40 of the 40 left must fit: %+v", d)
		}
		// Overrun: actual 80 against the estimate 40 leaves the bucket 40 in debt.
		if err := r2.Reconcile(80); err != nil {
			t.Fatal(err)
		}
		_, d = reserve(t, s, 1)
		// -40 → +1 needs 41 tokens at 50/min: 49.2 s.
		if d.Allowed || d.RetryAfter < 49200*time.Millisecond || d.RetryAfter > 49201*time.Millisecond {
			t.Errorf("after an overrun: %+v, want a denial with RetryAfter 49.2s", d)
		}
	})
}

func TestCancelGivesEverythingBack(t *testing.T) {
	backends(t, func(t *testing.T, opts ...stack.Option) {
		clock := limitertest.NewClock(limitertest.Start)
		cfg := tpmConfig(50)
		cfg.RateLimits[1].Entries[0].Requests[0] = stack.Rate{Rate: 1, Period: "minute"}
		s := newReserver(t, cfg, clock, opts...)
		r, d := reserve(t, s, 50)
		if !d.Allowed {
			t.Fatal(d)
		}
		r.Cancel()
		r.Cancel()
		if err := r.Reconcile(50); err != nil {
			t.Fatal(err)
		}
		// Both the 50 tokens and the one request per minute are back.
		if _, d := reserve(t, s, 50); !d.Allowed {
			t.Errorf("after Cancel: %+v", d)
		}
	})
}

func TestReservationAcrossReload(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	s := newReserver(t, tpmConfig(50), clock)
	r, _ := reserve(t, s, 50)
	// Double the limit: the bucket keeps its 0 tokens (capped at 100).
	if err := s.Reload(tpmConfig(100)); err != nil {
		t.Fatal(err)
	}
	if err := r.Reconcile(20); err != nil { // 30 back into the reloaded bucket
		t.Fatal(err)
	}
	if _, d := reserve(t, s, 30); !d.Allowed {
		t.Errorf("the refund did not reach the bucket in force: %+v", d)
	}
	if _, d := reserve(t, s, 1); d.Allowed {
		t.Error("more than the refund was available")
	}
}

func TestUnsettledReservationDoesNotLeak(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	cfg := tpmConfig(60)
	cfg.RateLimits = append(cfg.RateLimits, stack.RateLimit{RateLimitID: "concurrency", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Connections: []stack.Rate{{Rate: 1, Period: "second"}}}}})
	s := newReserver(t, cfg, clock, stack.WithLeaseTTL(5*time.Minute))
	if _, d := reserve(t, s, 60); !d.Allowed { // never settled
		t.Fatal(d)
	}
	clock.Advance(time.Minute) // tokens refilled, but the slot is still held
	if _, d := reserve(t, s, 60); d.Allowed || d.Metric != "connections" {
		t.Fatalf("slot held for 1 minute: %+v", d)
	}
	clock.Advance(4 * time.Minute) // past the lease TTL
	r, d := reserve(t, s, 60)
	if !d.Allowed {
		t.Fatalf("after the lease TTL the slot must be reclaimed: %+v", d)
	}
	r.Cancel()
}

func TestConnections(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	cfg := stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "in-flight", DimensionKeys: []string{"targetName"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "*"}, Connections: []stack.Rate{{Rate: 2, Period: "second"}}}}},
		{RateLimitID: "per-tool", DimensionKeys: []string{"targetName", "toolName"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "t", "toolName": "blocked"}, Requests: []stack.Rate{{Rate: 0, Period: "second"}}}}},
	}}
	s := newReserver(t, cfg, clock)
	keys := func(tool string) sluice.Keys { return sluice.NewKeys("targetName", "t", "toolName", tool) }
	res := func(tool string) (sluice.Reservation, sluice.Decision) {
		r, d, err := s.Reserve(context.Background(), keys(tool), 0)
		if err != nil {
			t.Fatal(err)
		}
		return r, d
	}
	// A request denied by another limit holds no slot.
	for i := 0; i < 5; i++ {
		if _, d := res("blocked"); d.Allowed {
			t.Fatal("rate 0 allowed")
		}
	}
	r1, d1 := res("a")
	r2, d2 := res("b")
	_, d3 := res("c")
	if !d1.Allowed || !d2.Allowed || d3.Allowed || d3.Metric != "connections" || d3.LimitKey != "in-flight/targetName=t" {
		t.Fatalf("two slots: %v %v %+v", d1.Allowed, d2.Allowed, d3)
	}
	// Allow does not take slots (it could never release them).
	if d, _ := s.Allow(context.Background(), keys("d")); !d.Allowed {
		t.Errorf("Allow with slots full: %+v", d)
	}
	_ = r1.Reconcile(0)
	_ = r1.Reconcile(0) // idempotent: must not free r2's slot
	r1.Cancel()
	r4, d4 := res("e")
	if !d4.Allowed {
		t.Fatalf("a released slot was not reusable: %+v", d4)
	}
	if _, d := res("f"); d.Allowed {
		t.Fatal("a double release freed a second slot")
	}
	r2.Cancel()
	r4.Cancel()
	if _, d := res("g"); !d.Allowed {
		t.Fatal("slots not released")
	}
}

func TestReserveAllocatesNothing(t *testing.T) {
	if racecheck.Enabled {
		t.Skip("allocation counts differ under -race")
	}
	clock := limitertest.NewClock(limitertest.Start)
	s := newReserver(t, threeLimitTokens(), clock)
	allocs := testing.AllocsPerRun(1000, func() {
		r, d, err := s.ReserveAt(context.Background(), limitertest.Start, llmKeys, 100)
		if err != nil || !d.Allowed || !r.Held() {
			t.Fatalf("%+v %v", d, err)
		}
		if err := r.Reconcile(90); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("Reserve+Reconcile allocates %.1f times; want 0 (the records are pooled)", allocs)
	}
}

func threeLimitTokens() stack.Config {
	big := []stack.Rate{{Rate: 10_000_000, Period: "minute"}}
	return stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "per-model-tpm", DimensionKeys: []string{"qualifiedModelId"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"qualifiedModelId": "*"}, Tokens: big}}},
		{RateLimitID: "per-caller-tpm", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Tokens: big}}},
		{RateLimitID: "per-caller-model", DimensionKeys: []string{"caller", "qualifiedModelId"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*", "qualifiedModelId": "*"}, Requests: big}}},
	}}
}

func BenchmarkReserve(b *testing.B) {
	clock := limitertest.NewClock(limitertest.Start)
	ctx := context.Background()
	b.Run("allow", func(b *testing.B) {
		s, _ := stack.New(threeLimitTokens(), stack.WithClock(clock))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			// Time advances with the benchmark so it stays on the allowed path.
			at := limitertest.Start.Add(time.Duration(i) * 20 * time.Microsecond)
			if d, _ := s.AllowAt(ctx, at, llmKeys, 2); !d.Allowed {
				b.Fatal("denied")
			}
		}
	})
	b.Run("reserve+reconcile", func(b *testing.B) {
		s, _ := stack.New(threeLimitTokens(), stack.WithClock(clock))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			at := limitertest.Start.Add(time.Duration(i) * 20 * time.Microsecond)
			r, d, _ := s.ReserveAt(ctx, at, llmKeys, 2)
			if !d.Allowed {
				b.Fatal("denied")
			}
			_ = r.Reconcile(1)
		}
	})
}

// Settling long after the reservation must not give back units that have
// refilled since and that other requests have already used.
func TestLateReconcileNeverOverAdmits(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	s := newReserver(t, tpmConfig(50), clock) // one token per 1.2 s
	r, _ := reserve(t, s, 40)
	clock.Advance(30 * time.Second)
	if _, d := reserve(t, s, 20); !d.Allowed { // another caller
		t.Fatal(d)
	}
	clock.Advance(5 * time.Second)
	if err := r.Reconcile(10); err != nil {
		t.Fatal(err)
	}
	// Had the first request cost 10 from the start, 34.17 tokens would be
	// left now: the give-back leaves exactly that, never more.
	if _, d := reserve(t, s, 35); d.Allowed {
		t.Error("35 tokens available: the late refund forgave consumption")
	}
	if _, d := reserve(t, s, 34); !d.Allowed {
		t.Errorf("34 tokens should be available: %+v", d)
	}
}

// The same through a Backend: the refund is bounded by the time elapsed.
func TestLateCancelThroughBackendNeverOverAdmits(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	s := newReserver(t, tpmConfig(50), clock, stack.WithBackend(stack.NewMemoryBackend()))
	r, _ := reserve(t, s, 50)
	clock.Advance(time.Minute) // the 50 have refilled by time alone
	if _, d := reserve(t, s, 50); !d.Allowed {
		t.Fatal(d)
	}
	r.Cancel() // must give nothing back: it would forgive the second 50
	if _, d := reserve(t, s, 1); d.Allowed {
		t.Error("a late Cancel re-created tokens: 51 admitted in one instant after a full refill of 50")
	}
	// Right after a take, Cancel through a backend is exact.
	clock.Advance(time.Minute)
	r, _ = reserve(t, s, 30)
	r.Cancel()
	if _, d := reserve(t, s, 50); !d.Allowed {
		t.Errorf("an immediate Cancel through a backend did not give back 30: %+v", d)
	}
}

// connsConfig has one slot per caller, and a requests limit per caller
// that the tests do not reach.
func connsConfig() stack.Config {
	return stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "in-flight", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Connections: []stack.Rate{{Rate: 1, Period: "second"}}}}},
		{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 10_000_000, Period: "minute"}}}}},
	}}
}

// A Reservation's records are reused once settled: a stale copy of a
// settled Reservation must not act on the record's next use.
func TestStaleReservationCannotSettleAReusedRecord(t *testing.T) {
	for _, slots := range []bool{false, true} {
		t.Run(map[bool]string{false: "Reserve", true: "ReserveSlots"}[slots], func(t *testing.T) {
			s := newReserver(t, connsConfig(), limitertest.NewClock(limitertest.Start))
			keys := sluice.NewKeys("caller", "alice")
			take := func() (sluice.Reservation, sluice.Decision) {
				var (
					r   sluice.Reservation
					d   sluice.Decision
					err error
				)
				if slots {
					r, d, err = s.ReserveSlots(context.Background(), keys)
				} else {
					r, d, err = s.Reserve(context.Background(), keys, 0)
				}
				if err != nil {
					t.Fatal(err)
				}
				return r, d
			}
			r1, d := take()
			if !d.Allowed || !r1.Held() {
				t.Fatalf("first: %+v", d)
			}
			stale := r1 // a copy, as a defer would keep
			if err := r1.Reconcile(0); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 50; i++ { // the pool hands the record back out, sooner or later
				r2, d := take()
				if !d.Allowed {
					t.Fatalf("round %d: the slot was not released: %+v", i, d)
				}
				stale.Cancel()
				if err := stale.Reconcile(0); err != nil {
					t.Fatal(err)
				}
				if _, d := take(); d.Allowed || d.Metric != sluice.MetricConnections {
					t.Fatalf("round %d: a stale Reservation released the slot held by the next one: %+v", i, d)
				}
				stale = r2
				r2.Cancel()
			}
		})
	}
}

func TestReserveSlots(t *testing.T) {
	ctx := context.Background()
	t.Run("no connections limit: an Allow, nothing held", func(t *testing.T) {
		s := newReserver(t, tpmConfig(50), limitertest.NewClock(limitertest.Start))
		cfg := tpmConfig(50)
		cfg.RateLimits[1].Entries[0].Requests[0] = stack.Rate{Rate: 1, Period: "minute"}
		if err := s.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		r, d, err := s.ReserveSlots(ctx, llmKeys)
		if err != nil || !d.Allowed || r.Held() || r != sluice.NoReservation {
			t.Fatalf("%+v %v %v", d, err, r.Held())
		}
		if d.LimitID != "per-caller-rpm" || d.Limit != 1 || d.Remaining != 0 {
			t.Errorf("decision %+v, want the per-caller-rpm bucket with 0 left", d)
		}
		if _, d, _ := s.ReserveSlots(ctx, llmKeys); d.Allowed {
			t.Error("the request was not charged")
		}
	})
	t.Run("slots held, released, requests stay charged", func(t *testing.T) {
		cfg := connsConfig()
		cfg.RateLimits[1].Entries[0].Requests[0] = stack.Rate{Rate: 2, Period: "minute"}
		s := newReserver(t, cfg, limitertest.NewClock(limitertest.Start))
		alice := sluice.NewKeys("caller", "alice")
		r, d, err := s.ReserveSlots(ctx, alice)
		if err != nil || !d.Allowed || !r.Held() {
			t.Fatalf("%+v %v", d, err)
		}
		if _, d, _ := s.ReserveSlots(ctx, alice); d.Allowed || d.Metric != sluice.MetricConnections {
			t.Fatalf("second in flight: %+v, want a connections denial", d)
		}
		r.Cancel() // releases the slot; the request stays charged
		if r, d, _ := s.ReserveSlots(ctx, alice); !d.Allowed {
			t.Fatalf("after the release: %+v", d)
		} else {
			_ = r.Reconcile(0)
		}
		if _, d, _ := s.ReserveSlots(ctx, alice); d.Allowed || d.LimitID != "per-caller" {
			t.Fatalf("third request of 2 a minute: %+v; Cancel must not refund requests here", d)
		}
	})
	t.Run("no connections limit applies to the request", func(t *testing.T) {
		cfg := connsConfig()
		cfg.RateLimits[0].Entries[0].Dimensions["caller"] = "bob"
		s := newReserver(t, cfg, limitertest.NewClock(limitertest.Start))
		r, d, err := s.ReserveSlots(ctx, sluice.NewKeys("caller", "alice"))
		if err != nil || !d.Allowed || r.Held() {
			t.Fatalf("%+v %v held=%v", d, err, r.Held())
		}
		r, d, err = s.ReserveSlots(ctx, sluice.NewKeys("caller", "bob"))
		if err != nil || !d.Allowed || !r.Held() {
			t.Fatalf("bob: %+v %v held=%v", d, err, r.Held())
		}
		r.Cancel()
	})
	t.Run("through a backend the slots are held there", func(t *testing.T) {
		// The middlewares admit through ReserveSlots: a Stack on a Backend
		// (slots a fleet shares) must hold them too, not decide as Allow.
		cfg := connsConfig()
		cfg.RateLimits[1].Entries[0].Requests[0] = stack.Rate{Rate: 2, Period: "minute"}
		be := stack.NewMemoryBackend()
		s := newReserver(t, cfg, limitertest.NewClock(limitertest.Start), stack.WithBackend(be))
		alice := sluice.NewKeys("caller", "alice")
		r, d, err := s.ReserveSlots(ctx, alice)
		if err != nil || !d.Allowed || !r.Held() {
			t.Fatalf("first: %+v %v held=%v", d, err, r.Held())
		}
		// A second process on the same backend sees the slot taken.
		other := newReserver(t, cfg, limitertest.NewClock(limitertest.Start), stack.WithBackend(be))
		if r2, d, err := other.ReserveSlots(ctx, alice); err != nil || d.Allowed || d.Metric != sluice.MetricConnections || r2.Held() {
			t.Fatalf("second in flight, another process: %+v %v held=%v, want a connections denial", d, err, r2.Held())
		}
		r.Cancel() // releases the slot; the request stays charged
		r.Cancel() // a second release frees nothing more
		r, d, err = other.ReserveSlots(ctx, alice)
		if err != nil || !d.Allowed || !r.Held() {
			t.Fatalf("after the release: %+v %v held=%v", d, err, r.Held())
		}
		if err := r.Reconcile(0); err != nil {
			t.Fatal(err)
		}
		// Two requests a minute were charged: Cancel and Reconcile released
		// slots only.
		if _, d, _ := s.ReserveSlots(ctx, alice); d.Allowed || d.LimitID != "per-caller" {
			t.Fatalf("third request of 2 a minute: %+v; a release must not refund the request", d)
		}
	})
	t.Run("ended context", func(t *testing.T) {
		s := newReserver(t, connsConfig(), limitertest.NewClock(limitertest.Start))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if r, _, err := s.ReserveSlots(cctx, sluice.NewKeys("caller", "alice")); err == nil || r.Held() {
			t.Fatalf("err %v held %v", err, r.Held())
		}
	})
}

func TestReserveSlotsAllocatesNothing(t *testing.T) {
	if racecheck.Enabled {
		t.Skip("allocation counts differ under -race")
	}
	ctx := context.Background()
	keys := sluice.NewKeys("caller", "alice", "qualifiedModelId", "m")
	for name, cfg := range map[string]stack.Config{"connections": connsConfig(), "requests and tokens": threeLimitTokens()} {
		s := newReserver(t, cfg, limitertest.NewClock(limitertest.Start))
		allocs := testing.AllocsPerRun(1000, func() {
			r, d, err := s.ReserveSlots(ctx, keys)
			if err != nil || !d.Allowed {
				t.Fatalf("%+v %v", d, err)
			}
			_ = r.Reconcile(0)
		})
		if allocs > 0 {
			t.Errorf("%s: ReserveSlots+Reconcile allocates %.1f times, want 0", name, allocs)
		}
	}
}

// Many goroutines take and release slots while stale copies of settled
// Reservations are settled again: no more requests are ever in flight than
// the limit allows, and every slot comes back.
func TestReserveSlotsConcurrentWithStaleHandles(t *testing.T) {
	const slots, workers, rounds = 3, 8, 300
	cfg := connsConfig()
	cfg.RateLimits[0].Entries[0].Connections[0].Rate = slots
	s := newReserver(t, cfg, limitertest.NewClock(limitertest.Start))
	keys := sluice.NewKeys("caller", "alice")
	var inFlight, peak atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var stale sluice.Reservation
			for i := 0; i < rounds; i++ {
				r, d, err := s.ReserveSlots(context.Background(), keys)
				if err != nil {
					t.Error(err)
					return
				}
				stale.Cancel() // settled long ago: must do nothing
				if !d.Allowed {
					continue
				}
				n := inFlight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				inFlight.Add(-1)
				_ = r.Reconcile(0)
				stale = r
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > slots || p < 1 {
		t.Errorf("peak in flight %d, want 1..%d", p, slots)
	}
	held := make([]sluice.Reservation, 0, slots)
	for i := 0; i < slots; i++ {
		r, d, _ := s.ReserveSlots(context.Background(), keys)
		if !d.Allowed {
			t.Fatalf("slot %d of %d not given back: %+v", i+1, slots, d)
		}
		held = append(held, r)
	}
	if _, d, _ := s.ReserveSlots(context.Background(), keys); d.Allowed {
		t.Error("more slots than the limit")
	}
	for _, r := range held {
		r.Cancel()
	}
}

// ReserveSlotsAt decides at the instant it is given, not at the Stack's
// clock: requests charged at t refill by t+period whatever the clock says,
// and without a connections limit it is AllowAt's decision.
func TestReserveSlotsAt(t *testing.T) {
	ctx := context.Background()
	for _, conns := range []bool{true, false} {
		t.Run(fmt.Sprintf("connections=%v", conns), func(t *testing.T) {
			cfg := connsConfig()
			cfg.RateLimits[1].Entries[0].Requests[0] = stack.Rate{Rate: 1, Period: "minute"}
			if !conns {
				cfg.RateLimits = cfg.RateLimits[1:]
			}
			clock := limitertest.NewClock(limitertest.Start) // never advanced
			s := newReserver(t, cfg, clock)
			alice := sluice.NewKeys("caller", "alice")
			t0 := limitertest.Start.Add(time.Hour)
			r, d, err := s.ReserveSlotsAt(ctx, t0, alice)
			if err != nil || !d.Allowed || r.Held() != conns {
				t.Fatalf("at t0: %+v %v held=%v", d, err, r.Held())
			}
			r.Cancel()
			if _, d, _ := s.ReserveSlotsAt(ctx, t0.Add(30*time.Second), alice); d.Allowed || d.RetryAfter < 29*time.Second || d.RetryAfter > 30*time.Second {
				t.Fatalf("at t0+30s: %+v, want a denial with RetryAfter about 30s", d)
			}
			r, d, err = s.ReserveSlotsAt(ctx, t0.Add(time.Minute), alice)
			if err != nil || !d.Allowed {
				t.Fatalf("at t0+1m: %+v %v, want the refilled request admitted", d, err)
			}
			r.Cancel()
			if _, d, _ := s.ReserveSlots(ctx, alice); d.Allowed {
				t.Fatalf("on the clock, an hour before t0: %+v, want a denial (time never runs backwards in a bucket)", d)
			}
		})
	}
}

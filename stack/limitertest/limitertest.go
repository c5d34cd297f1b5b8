// Package limitertest tests that a stack.Backend decides as the in-memory stack does.
//
// It is a conformance suite for sluice.Limiter
// implementations built from a stack.Config, in the spirit of
// testing/slogtest. The in-memory stack runs it, and so does every other
// backend (the Redis backend runs it unchanged), so that all of them make the
// same decisions for the same configuration and the same instants.
//
// Run calls the factory once per case with a configuration and a manual
// clock; the limiter must read time only from that clock.
//
// For code that consumes a Limiter rather than implements one (middleware,
// renderers), NewPerValue gives a real per-value token bucket on a clock of
// its own, without a configuration.
package limitertest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/stack"
)

// Clock is a manual clock. The suite advances it; limiters read it. It is
// safe for concurrent use and cheap to read (one atomic load).
//
// It is the one test clock of the repository's own tests too: its Sleep
// advances it instead of sleeping, so code that sleeps on its clock
// (bucket's WaitN, pace's Transport, through their WithClock) runs on
// it without waiting, and Slept tells the test what was waited for.
type Clock struct {
	ns atomic.Int64 // nanoseconds since clockBase

	mu     sync.Mutex
	sleeps *[]time.Duration // behind a pointer: Clock stays comparable, as in v0.1.0
}

// Clock is a sluice.Clock: every WithClock option takes one.
var _ sluice.Clock = (*Clock)(nil)

var clockBase = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// NewClock returns a clock set to t.
func NewClock(t time.Time) *Clock {
	c := &Clock{}
	c.ns.Store(int64(t.Sub(clockBase)))
	return c
}

// Now returns the clock's instant.
func (c *Clock) Now() time.Time { return clockBase.Add(time.Duration(c.ns.Load())) }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Sleep is a sleep on the clock that does not wait: it returns ctx's error
// if ctx is done, and otherwise advances the clock by d (if d > 0) and
// records d for Slept. With Now it satisfies sluice.Clock, so every
// WithClock option takes a *Clock.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	if c.sleeps == nil {
		c.sleeps = new([]time.Duration)
	}
	*c.sleeps = append(*c.sleeps, d)
	c.mu.Unlock()
	if d > 0 {
		c.Advance(d)
	}
	return nil
}

// Slept returns the durations Sleep was called with, in order.
func (c *Clock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sleeps == nil {
		return nil
	}
	return slices.Clone(*c.sleeps)
}

// Factory builds the limiter under test for cfg, reading time from clock.
type Factory func(t *testing.T, cfg stack.Config, clock *Clock) sluice.Limiter

// Start is the instant every case starts at.
var Start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Run runs every conformance case as a subtest.
func Run(t *testing.T, newLimiter Factory) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := NewClock(Start)
			l := newLimiter(t, c.cfg, clock)
			c.run(t, l, clock)
		})
	}
}

type tcase struct {
	name string
	cfg  stack.Config
	run  func(t *testing.T, l sluice.Limiter, clock *Clock)
}

func rps(n int64) []stack.Rate { return []stack.Rate{{Rate: n, Period: stack.Second}} }
func rpm(n int64) []stack.Rate { return []stack.Rate{{Rate: n, Period: stack.Minute}} }

func dims(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func allow(t *testing.T, l sluice.Limiter, keys sluice.Keys) sluice.Decision {
	t.Helper()
	d, err := l.Allow(context.Background(), keys)
	if err != nil {
		t.Fatalf("Allow(%v): %v", keys, err)
	}
	return d
}

// countAllowed calls Allow n times at the current instant and counts grants.
func countAllowed(t *testing.T, l sluice.Limiter, keys sluice.Keys, n int) int {
	t.Helper()
	got := 0
	for i := 0; i < n; i++ {
		if allow(t, l, keys).Allowed {
			got++
		}
	}
	return got
}

func expectCount(t *testing.T, what string, got, want int) {
	t.Helper()
	if got != want {
		t.Errorf("%s: %d allowed, want %d", what, got, want)
	}
}

var tool = []string{"targetName", "toolName"}

var cases = []tcase{
	{
		name: "burst then sustained rate",
		cfg: stack.Config{RateLimits: []stack.RateLimit{{
			RateLimitID: "cluster-read", DimensionKeys: []string{"action"},
			Entries: []stack.Entry{{Dimensions: dims("action", "*"), Requests: []stack.Rate{{Rate: 20, Period: stack.Second, Burst: 50}}}},
		}}},
		run: func(t *testing.T, l sluice.Limiter, clock *Clock) {
			k := sluice.NewKeys("action", "DescribeClusters")
			expectCount(t, "burst", countAllowed(t, l, k, 60), 50)
			clock.Advance(time.Second)
			expectCount(t, "after 1s", countAllowed(t, l, k, 60), 20)
			clock.Advance(2500 * time.Millisecond)
			expectCount(t, "after 2.5s idle", countAllowed(t, l, k, 60), 50)
		},
	},
	{
		name: "exact entry is one shared bucket, wildcard is per value",
		cfg: stack.Config{RateLimits: []stack.RateLimit{{
			RateLimitID: "per-tool", DimensionKeys: tool,
			Entries: []stack.Entry{
				{Dimensions: dims("targetName", "t1", "toolName", "readData"), Requests: rps(3)},
				{Dimensions: dims("targetName", "t1", "toolName", "*"), Requests: rps(2)},
			},
		}}},
		run: func(t *testing.T, l sluice.Limiter, clock *Clock) {
			expectCount(t, "exact entry", countAllowed(t, l, sluice.NewKeys("targetName", "t1", "toolName", "readData"), 5), 3)
			expectCount(t, "wildcard value a", countAllowed(t, l, sluice.NewKeys("targetName", "t1", "toolName", "a"), 5), 2)
			expectCount(t, "wildcard value b has its own bucket", countAllowed(t, l, sluice.NewKeys("targetName", "t1", "toolName", "b"), 5), 2)
			expectCount(t, "no entry for t2: limit skipped", countAllowed(t, l, sluice.NewKeys("targetName", "t2", "toolName", "a"), 10), 10)
		},
	},
	{
		name: "missing dimension skips the limit",
		cfg: stack.Config{RateLimits: []stack.RateLimit{{
			RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: dims("caller", "*"), Requests: rps(1)}},
		}}},
		run: func(t *testing.T, l sluice.Limiter, clock *Clock) {
			expectCount(t, "no caller key", countAllowed(t, l, sluice.NewKeys("other", "x"), 5), 5)
			expectCount(t, "with caller", countAllowed(t, l, sluice.NewKeys("caller", "alice"), 5), 1)
		},
	},
	{
		name: "rate 0 blocks permanently",
		cfg: stack.Config{RateLimits: []stack.RateLimit{{
			RateLimitID: "blocked", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: dims("caller", "mallory"), Requests: rps(0)}, {Dimensions: dims("caller", "*"), Requests: rps(5)}},
		}}},
		run: func(t *testing.T, l sluice.Limiter, clock *Clock) {
			d := allow(t, l, sluice.NewKeys("caller", "mallory"))
			if d.Allowed || !d.Permanent || d.RetryAfter != 0 {
				t.Errorf("rate 0: %+v; want a permanent denial with no RetryAfter", d)
			}
			clock.Advance(time.Hour)
			if allow(t, l, sluice.NewKeys("caller", "mallory")).Allowed {
				t.Error("rate 0 admitted a request an hour later")
			}
			if !allow(t, l, sluice.NewKeys("caller", "bob")).Allowed {
				t.Error("another caller was blocked")
			}
		},
	},
	{
		name: "AND stacking: a denied request consumes nothing",
		cfg: stack.Config{RateLimits: []stack.RateLimit{
			{RateLimitID: "per-target", DimensionKeys: []string{"targetName"},
				Entries: []stack.Entry{{Dimensions: dims("targetName", "*"), Requests: rps(10)}}},
			{RateLimitID: "per-tool", DimensionKeys: tool,
				Entries: []stack.Entry{{Dimensions: dims("targetName", "t", "toolName", "*"), Requests: rps(2)}}},
		}},
		run: func(t *testing.T, l sluice.Limiter, clock *Clock) {
			// Two tools share the target's 10; each tool has 2. Denials by the
			// per-tool limit must not eat the target's budget.
			for i := 0; i < 50; i++ {
				allow(t, l, sluice.NewKeys("targetName", "t", "toolName", "a"))
			}
			expectCount(t, "other tools after 50 denied calls",
				countAllowed(t, l, sluice.NewKeys("targetName", "t", "toolName", "b"), 5)+
					countAllowed(t, l, sluice.NewKeys("targetName", "t", "toolName", "c"), 5)+
					countAllowed(t, l, sluice.NewKeys("targetName", "t", "toolName", "d"), 5)+
					countAllowed(t, l, sluice.NewKeys("targetName", "t", "toolName", "e"), 5), 8)
		},
	},
	{
		name: "order: more dimensions first, then stricter rate",
		cfg: stack.Config{RateLimits: []stack.RateLimit{
			{RateLimitID: "loose-1d", DimensionKeys: []string{"targetName"},
				Entries: []stack.Entry{{Dimensions: dims("targetName", "*"), Requests: rps(1)}}},
			{RateLimitID: "strict-1d", DimensionKeys: []string{"caller"},
				Entries: []stack.Entry{{Dimensions: dims("caller", "*"), Requests: []stack.Rate{{Rate: 30, Period: stack.Minute, Burst: 1}}}}},
			{RateLimitID: "two-d", DimensionKeys: tool,
				Entries: []stack.Entry{{Dimensions: dims("targetName", "*", "toolName", "*"), Requests: rps(1)}}},
		}},
		run: func(t *testing.T, l sluice.Limiter, clock *Clock) {
			k := sluice.NewKeys("targetName", "t", "toolName", "x", "caller", "c")
			if !allow(t, l, k).Allowed {
				t.Fatal("first request denied")
			}
			d := allow(t, l, k)
			if d.Allowed || d.LimitID != "two-d" {
				t.Errorf("second request: denied by %q, want the two-dimension limit first", d.LimitID)
			}
			// Exhaust nothing else: a different tool passes two-d; the 1-d
			// limits are both empty; the stricter (30/min = 0.5/s) is first.
			d = allow(t, l, sluice.NewKeys("targetName", "t", "toolName", "y", "caller", "c"))
			if d.Allowed || d.LimitID != "strict-1d" {
				t.Errorf("third request: denied by %q, want strict-1d (0.5/s before 1/s)", d.LimitID)
			}
		},
	},
	{
		name: "denial names the limit, key, metric, entry and values",
		cfg: stack.Config{RateLimits: []stack.RateLimit{{
			RateLimitID: "rl-abc123", DimensionKeys: tool,
			Entries: []stack.Entry{{Dimensions: dims("targetName", "my-target", "toolName", "*"), Requests: rps(1)}},
		}}},
		run: func(t *testing.T, l sluice.Limiter, clock *Clock) {
			k := sluice.NewKeys("targetName", "my-target", "toolName", "readData")
			allow(t, l, k)
			d := allow(t, l, k)
			if d.Allowed {
				t.Fatal("second request allowed")
			}
			if d.LimitID != "rl-abc123" || d.LimitKey != "rl-abc123/targetName=my-target,toolName=readData" || d.Metric != "requests" {
				t.Errorf("denial = id %q key %q metric %q", d.LimitID, d.LimitKey, d.Metric)
			}
			if !slices.Equal(d.MatchedEntry, []string{"my-target", "*"}) || !slices.Equal(d.ResolvedValues, []string{"my-target", "readData"}) {
				t.Errorf("matched %q resolved %q", d.MatchedEntry, d.ResolvedValues)
			}
			if d.RetryAfter <= 0 || d.RetryAfter > time.Second {
				t.Errorf("RetryAfter = %v, want in (0, 1s]", d.RetryAfter)
			}
			err := d.Err()
			var te *slerrors.ThrottledError
			if !errors.Is(err, slerrors.ErrThrottled) || !errors.As(err, &te) || te.LimitKey != d.LimitKey {
				t.Errorf("Err() = %v", err)
			}
		},
	},
	{
		name: "RetryAfter is never early, across stacked limits",
		cfg: stack.Config{RateLimits: []stack.RateLimit{
			{RateLimitID: "fast", DimensionKeys: tool,
				Entries: []stack.Entry{{Dimensions: dims("targetName", "*", "toolName", "*"), Requests: rps(10)}}},
			{RateLimitID: "slow", DimensionKeys: []string{"targetName"},
				Entries: []stack.Entry{{Dimensions: dims("targetName", "*"), Requests: []stack.Rate{{Rate: 6, Period: stack.Minute, Burst: 2}}}}},
		}},
		run: func(t *testing.T, l sluice.Limiter, clock *Clock) {
			k := sluice.NewKeys("targetName", "t", "toolName", "x")
			for i := 0; i < 1000; i++ {
				d := allow(t, l, k)
				if d.Allowed {
					continue
				}
				if d.RetryAfter <= 0 {
					t.Fatalf("denial %+v without RetryAfter", d)
				}
				clock.Advance(d.RetryAfter)
				if d2 := allow(t, l, k); !d2.Allowed {
					t.Fatalf("retry after %v was denied again by %s (RetryAfter %v)", d.RetryAfter, d2.LimitID, d2.RetryAfter)
				}
				if d.RetryAfter > time.Second {
					// The slow limit governs: 10/min, so about 10 s.
					if d.RetryAfter > 10*time.Second {
						t.Fatalf("RetryAfter %v longer than the slow limit's interval", d.RetryAfter)
					}
				}
				if i > 200 {
					return
				}
			}
		},
	},
	{
		// 250 a day AND 10 a second on one entry, and 3 an hour on another
		// limit: the day's burst is spent in 25 s, then one request per
		// 345.6 s (86400/250) refills; the hour's interval is 20 min.
		name: "hour and day periods: exact bursts, intervals and RetryAfter, ANDed with a per-second rate",
		cfg: stack.Config{RateLimits: []stack.RateLimit{
			{RateLimitID: "daily", DimensionKeys: []string{"caller"},
				Entries: []stack.Entry{{Dimensions: dims("caller", "*"), Requests: []stack.Rate{
					{Rate: 10, Period: stack.Second}, {Rate: 250, Period: stack.Day}}}}},
			{RateLimitID: "hourly", DimensionKeys: []string{"report"},
				Entries: []stack.Entry{{Dimensions: dims("report", "*"), Requests: []stack.Rate{{Rate: 3, Period: stack.Hour}}}}},
		}},
		run: func(t *testing.T, l sluice.Limiter, clock *Clock) {
			c := sluice.NewKeys("caller", "c")
			total := 0
			for s := 0; s < 25; s++ {
				got := countAllowed(t, l, c, 12)
				expectCount(t, "second "+time.Duration(s*int(time.Second)).String(), got, 10)
				total += got
				clock.Advance(time.Second)
			}
			clock.Advance(-time.Second) // back to +24 s, the last second that took
			d := allow(t, l, c)
			// Package bucket holds a rate as a float (rate.Limit), so its
			// interval may differ from 345.6 s by a fraction of a
			// microsecond; the Redis script's integer ticks are exact.
			const interval = 345600 * time.Millisecond
			if want := interval - 24*time.Second; d.Allowed || (d.RetryAfter-want).Abs() > time.Microsecond {
				t.Fatalf("after %d in 24 s: %+v, want denied with RetryAfter %v", total, d, want)
			}
			clock.Advance(d.RetryAfter - time.Millisecond)
			if allow(t, l, c).Allowed {
				t.Fatal("allowed 1 ms before RetryAfter")
			}
			clock.Advance(time.Millisecond)
			expectCount(t, "at RetryAfter", countAllowed(t, l, c, 3), 1)
			// A whole day later the day's bucket is full again: 250, ten a second.
			clock.Advance(24 * time.Hour)
			total = 0
			for s := 0; s < 30; s++ {
				total += countAllowed(t, l, c, 12)
				clock.Advance(time.Second)
			}
			expectCount(t, "a day later, over 30 s", total, 250)

			r := sluice.NewKeys("report", "r")
			expectCount(t, "hour burst", countAllowed(t, l, r, 5), 3)
			d = allow(t, l, r)
			if d.Allowed || (d.RetryAfter-20*time.Minute).Abs() > time.Microsecond {
				t.Fatalf("hourly denial %+v, want RetryAfter 20m", d)
			}
			// Over the next 24 hours, one request every 20 minutes: 72.
			got := 0
			for m := 0; m < 24*60; m++ {
				clock.Advance(time.Minute)
				got += countAllowed(t, l, r, 2)
			}
			expectCount(t, "24 h at 3/hour", got, 72)
		},
	},
	{
		name: "service-managed limits after customer limits, both must pass",
		cfg: stack.Config{
			RateLimits: []stack.RateLimit{{RateLimitID: "customer", DimensionKeys: []string{"caller"},
				Entries: []stack.Entry{{Dimensions: dims("caller", "*"), Requests: rps(3)}}}},
			ServiceLimits: []stack.RateLimit{{RateLimitID: "service", DimensionKeys: tool,
				Entries: []stack.Entry{{Dimensions: dims("targetName", "*", "toolName", "*"), Requests: rps(2)}}}},
		},
		run: func(t *testing.T, l sluice.Limiter, clock *Clock) {
			k := sluice.NewKeys("caller", "a", "targetName", "t", "toolName", "x")
			expectCount(t, "min of both", countAllowed(t, l, k, 5), 2)
			d := allow(t, l, k)
			if d.LimitID != "service" {
				t.Errorf("denied by %q, want service", d.LimitID)
			}
			// The customer limit was not consumed by the service denials.
			expectCount(t, "customer budget left", countAllowed(t, l, sluice.NewKeys("caller", "a"), 5), 1)
		},
	},
	{
		name: "tokens metric charges the cost",
		cfg: stack.Config{RateLimits: []stack.RateLimit{{
			RateLimitID: "tpm", DimensionKeys: []string{"qualifiedModelId"},
			Entries: []stack.Entry{{Dimensions: dims("qualifiedModelId", "*"), Tokens: rpm(50)}},
		}}},
		run: func(t *testing.T, l sluice.Limiter, clock *Clock) {
			n, ok := l.(interface {
				AllowN(context.Context, sluice.Keys, int) (sluice.Decision, error)
			})
			if !ok {
				t.Fatal("a limiter built from a stack.Config must have AllowN(ctx, keys, tokens)")
			}
			k := sluice.NewKeys("qualifiedModelId", "m")
			d, err := n.AllowN(context.Background(), k, 51)
			if err != nil || d.Allowed || !d.Permanent || !errors.Is(d.Err(), slerrors.ErrCostExceedsBurst) {
				t.Errorf("estimate 51 over a limit of 50: %+v, %v", d, err)
			}
			if d, _ := n.AllowN(context.Background(), k, 30); !d.Allowed {
				t.Error("30 of 50 denied")
			}
			d, _ = n.AllowN(context.Background(), k, 30)
			if d.Allowed || d.Metric != "tokens" {
				t.Errorf("30 more: %+v", d)
			}
			clock.Advance(d.RetryAfter)
			if d, _ := n.AllowN(context.Background(), k, 30); !d.Allowed {
				t.Errorf("after RetryAfter: %+v", d)
			}
		},
	},
	{
		name: "tokens empty, in debt or at rate 0 deny even a request that costs nothing (a check passes only while a whole token is held)",
		cfg: stack.Config{RateLimits: []stack.RateLimit{{
			RateLimitID: "tpm", DimensionKeys: []string{"qualifiedModelId"},
			Entries: []stack.Entry{
				{Dimensions: dims("qualifiedModelId", "frozen"), Tokens: rpm(0)},
				{Dimensions: dims("qualifiedModelId", "*"), Tokens: rpm(60)},
			},
		}}},
		run: func(t *testing.T, l sluice.Limiter, clock *Clock) {
			r, ok := l.(sluice.Reserver)
			if !ok {
				t.Fatal("a limiter built from a stack.Config must implement sluice.Reserver")
			}
			if d := allow(t, l, sluice.NewKeys("qualifiedModelId", "frozen")); d.Allowed || !d.Permanent {
				t.Errorf("rate 0 tokens limit, Allow: %+v; want a permanent denial", d)
			}
			k := sluice.NewKeys("qualifiedModelId", "m")
			res, d, err := r.Reserve(context.Background(), k, 10)
			if err != nil || !d.Allowed {
				t.Fatalf("reserve 10 of 60: %+v %v", d, err)
			}
			if err := res.Reconcile(70); err != nil { // 10 tokens of debt
				t.Fatal(err)
			}
			d = allow(t, l, k)
			if d.Allowed || d.Metric != "tokens" {
				t.Fatalf("Allow with the tokens bucket in debt: %+v; want a denial", d)
			}
			if d.RetryAfter < 11*time.Second || d.RetryAfter > 11*time.Second+time.Millisecond {
				t.Errorf("RetryAfter %v, want 11s (10 tokens of debt and the one a check needs, at 1/s)", d.RetryAfter)
			}
			clock.Advance(d.RetryAfter)
			if d := allow(t, l, k); !d.Allowed {
				t.Errorf("after the debt is refilled: %+v", d)
			}
		},
	},
	{
		name: "connections: slots held by Reserve, released by Reconcile and Cancel, reclaimed after the lease TTL",
		cfg: stack.Config{RateLimits: []stack.RateLimit{
			{RateLimitID: "in-flight", DimensionKeys: []string{"targetName"},
				Entries: []stack.Entry{{Dimensions: dims("targetName", "*"), Connections: []stack.Rate{{Rate: 2, Period: stack.Second}}}}},
			{RateLimitID: "per-tool", DimensionKeys: []string{"targetName", "toolName"},
				Entries: []stack.Entry{{Dimensions: dims("targetName", "t", "toolName", "blocked"), Requests: rps(0)}}},
		}},
		run: func(t *testing.T, l sluice.Limiter, clock *Clock) {
			rs, ok := l.(sluice.Reserver)
			if !ok {
				t.Fatal("a limiter built from a stack.Config must implement sluice.Reserver")
			}
			keys := func(tool string) sluice.Keys { return sluice.NewKeys("targetName", "t", "toolName", tool) }
			res := func(tool string) (sluice.Reservation, sluice.Decision) {
				r, d, err := rs.Reserve(context.Background(), keys(tool), 0)
				if err != nil {
					t.Fatal(err)
				}
				return r, d
			}
			for i := 0; i < 3; i++ { // denied by another limit: holds no slot
				if _, d := res("blocked"); d.Allowed {
					t.Fatal("rate 0 allowed")
				}
			}
			r1, d1 := res("a")
			r2, d2 := res("b")
			_, d3 := res("c")
			if !d1.Allowed || !d2.Allowed || d3.Allowed || d3.Metric != sluice.MetricConnections ||
				d3.LimitKey != "in-flight/targetName=t" || d3.RetryAfter <= 0 || d3.Permanent {
				t.Fatalf("two slots: %v %v %+v", d1.Allowed, d2.Allowed, d3)
			}
			if d := allow(t, l, keys("d")); !d.Allowed { // Allow takes no slot
				t.Errorf("Allow with the slots full: %+v", d)
			}
			if err := r1.Reconcile(0); err != nil {
				t.Fatal(err)
			}
			r1.Cancel() // no effect after Reconcile: must not free r2's slot
			r4, d4 := res("e")
			if !d4.Allowed {
				t.Fatalf("a released slot was not reusable: %+v", d4)
			}
			if _, d := res("f"); d.Allowed {
				t.Fatal("a double release freed a second slot")
			}
			r2.Cancel()
			if _, d := res("g"); !d.Allowed { // held until the lease TTL
				t.Fatal("a cancelled slot was not released")
			}
			_ = r4
			if _, d := res("h"); d.Allowed {
				t.Fatal("three slots held at once")
			}
			clock.Advance(stack.DefaultLeaseTTL + time.Second) // nobody settled r4 and g
			r5, d5 := res("i")
			r6, d6 := res("j")
			if !d5.Allowed || !d6.Allowed {
				t.Fatalf("after the lease TTL the slots must be reclaimed: %+v %+v", d5, d6)
			}
			r5.Cancel()
			r6.Cancel()
		},
	},
}

package stack_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/racecheck"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func newStack(t testing.TB, cfg stack.Config, clock *limitertest.Clock) *stack.Stack {
	t.Helper()
	s, err := stack.New(cfg, stack.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, cfg stack.Config, clock *limitertest.Clock) sluice.Limiter {
		return newStack(t, cfg, clock)
	})
}

const gatewayJSON = `{
  "rateLimitId": "rl-abc123",
  "description": "per tool",
  "dimensionKeys": ["targetName", "toolName"],
  "entries": [
    {"dimensions": {"targetName": "my-target", "toolName": "readData"}, "requests": [{"rate": 5, "period": "second"}]},
    {"dimensions": {"targetName": "my-target", "toolName": "*"}, "requests": [{"rate": 2, "period": "second"}, {"rate": 60, "period": "minute"}]},
    {"dimensions": {"targetName": "*", "toolName": "*"}, "requests": [{"rate": 1, "period": "second"}]}
  ]
}`

func TestLoadGatewayShapes(t *testing.T) {
	for name, doc := range map[string]string{
		"single":  gatewayJSON,
		"array":   "[" + gatewayJSON + "]",
		"wrapped": `{"rateLimits": [` + gatewayJSON + `]}`,
	} {
		cfg, err := stack.Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(cfg.RateLimits) != 1 || cfg.RateLimits[0].RateLimitID != "rl-abc123" || len(cfg.RateLimits[0].Entries) != 3 ||
			!slices.Equal(cfg.RateLimits[0].Entries[1].Requests, []stack.Rate{{Rate: 2, Period: "second"}, {Rate: 60, Period: "minute"}}) {
			t.Errorf("%s: parsed %+v", name, cfg)
		}
	}
}

func TestParseReportsEveryProblemWithItsPath(t *testing.T) {
	doc := `{"rateLimits": [
	  {"rateLimitId": "x", "dimensionKeys": ["a", "b"], "bogus": 1, "entries": [
	    {"dimensions": {"a": "*", "b": "v"}, "requests": [{"rate": -1, "period": "week"}]},
	    {"dimensions": {"a": "v"}, "tokens": [{"rate": 1.5, "period": "minute"}]},
	    {"dimensions": {"a": "v", "b": "w", "c": "z"}, "requests": [{"rate": 1, "period": "second", "extra": true}]}
	  ]},
	  {"rateLimitId": "x", "dimensionKeys": ["a"], "entries": []}
	], "other": {}}`
	_, err := stack.Parse([]byte(doc))
	var ce *stack.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Parse = %v, want *stack.ConfigError", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"other: unknown field",
		"rateLimits[0].bogus: unknown field",
		`rateLimits[0].rateLimitId: "x" must be 2–64 characters`,
		"rateLimits[0].entries[0].requests[0].rate: -1 is out of range",
		`rateLimits[0].entries[0].requests[0].period: "week" must be "second", "minute", "hour" or "day"`,
		`rateLimits[0].entries[0].dimensions.b: exact value "v" after a "*"`,
		"rateLimits[0].entries[1].tokens[0].rate: 1.5 is not a whole number",
		`rateLimits[0].entries[1].dimensions: no value for dimension key "b"`,
		`rateLimits[0].entries[2].dimensions.c: "c" is not one of the dimension keys`,
		"rateLimits[0].entries[2].requests[0].extra: unknown field",
		"rateLimits[1].entries: at least one entry is required",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(msg)
	}
}

func TestParseBadJSON(t *testing.T) {
	for doc, want := range map[string]string{
		"":                          "empty input",
		"{\n  \"rateLimits\": [,]}": "line 2, column 18: invalid JSON",
		`{"rateLimits": 3}`:         "rateLimits: must be an array",
		`"x"`:                       "must be an object or an array",
		`[] []`:                     "unexpected data after",
	} {
		_, err := stack.Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want it to mention %q", doc, err, want)
		}
	}
	big := make([]byte, stack.MaxConfigBytes+1)
	if _, err := stack.Parse(big); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("oversize config: %v", err)
	}
	var many []string
	for i := 0; i < 51; i++ {
		many = append(many, fmt.Sprintf(`{"rateLimitId":"rl-%d","dimensionKeys":["a"],"entries":[{"dimensions":{"a":"*"},"requests":[{"rate":1,"period":"second"}]}]}`, i))
	}
	if _, err := stack.Parse([]byte("[" + strings.Join(many, ",") + "]")); err == nil || !strings.Contains(err.Error(), "51 rate limits, at most 50") {
		t.Errorf("51 limits: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(gatewayJSON))
	f.Add([]byte(`{"rateLimits":[],"serviceLimits":[{"rateLimitId":"ab","dimensionKeys":["k"],"entries":[{"dimensions":{"k":"*"},"tokens":[{"rate":0,"period":"minute","burst":3}]}]}]}`))
	f.Add([]byte(`[{"rateLimitId":null,"entries":[1,{"dimensions":[]}]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := stack.Parse(data)
		if err != nil {
			var ce *stack.ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error %v is not a *stack.ConfigError", err)
			}
			return
		}
		// Whatever parses must build and decide without panicking.
		s, err := stack.New(cfg)
		if err != nil {
			t.Fatalf("parsed config failed to build: %v", err)
		}
		keys := sluice.NewKeys("targetName", "my-target", "toolName", "readData", "k", "v", "a", "b")
		if _, err := s.AllowN(context.Background(), keys, 3); err != nil {
			t.Fatal(err)
		}
	})
}

func TestEvaluatedOnlyWhenAsked(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	s := newStack(t, stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "per-caller-rpm", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 100, Period: "minute"}}}}},
		{RateLimitID: "per-target-rps", DimensionKeys: []string{"targetName"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "*"}, Requests: []stack.Rate{{Rate: 10, Period: "second"}}}}},
	}}, clock)
	keys := sluice.NewKeys("targetName", "my-target", "caller", "alice")
	d, _ := s.Allow(context.Background(), keys)
	if d.Evaluated != nil {
		t.Errorf("Evaluated built without being asked: %q", d.Evaluated)
	}
	d, _ = s.Allow(sluice.WithEvaluated(context.Background()), keys)
	want := []string{"per-caller-rpm:requests:alice", "per-target-rps:requests:my-target"}
	if !slices.Equal(d.Evaluated, want) {
		t.Errorf("Evaluated = %q, want %q", d.Evaluated, want)
	}
	if !d.Allowed || d.LimitID != "per-target-rps" || d.Limit != 10 || d.Remaining != 8 || d.Window != time.Second {
		t.Errorf("quota of the tightest bucket: id %q limit %d remaining %d window %v", d.LimitID, d.Limit, d.Remaining, d.Window)
	}
}

func TestShadowNeverDenies(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	s := newStack(t, stack.Config{RateLimits: []stack.RateLimit{{
		RateLimitID: "new-limit", Shadow: true, DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 2, Period: "second"}}}},
	}}}, clock)
	keys := sluice.NewKeys("caller", "alice")
	var shadowed int
	for i := 0; i < 5; i++ {
		d, _ := s.Allow(context.Background(), keys)
		if !d.Allowed {
			t.Fatal("a shadow limit denied")
		}
		if len(d.Shadowed) > 0 {
			shadowed++
			if d.Shadowed[0] != "new-limit/caller=alice" {
				t.Errorf("Shadowed = %q", d.Shadowed)
			}
		}
	}
	if shadowed != 3 {
		t.Errorf("%d of 5 requests reported as shadow-denied, want 3", shadowed)
	}
}

func TestReload(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	limitFor := func(id string, r int64) stack.RateLimit {
		return stack.RateLimit{RateLimitID: id, DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: r, Period: "second"}}}}}
	}
	s := newStack(t, stack.Config{RateLimits: []stack.RateLimit{limitFor("aa", 10), limitFor("bb", 100)}}, clock)
	alice := sluice.NewKeys("caller", "alice")
	count := func(n int) int {
		got := 0
		for i := 0; i < n; i++ {
			if d, _ := s.Allow(context.Background(), alice); d.Allowed {
				got++
			}
		}
		return got
	}
	if got := count(4); got != 4 {
		t.Fatalf("%d of 4", got)
	}
	// Keep "a" with a higher rate: it keeps its 6 tokens (capped at the new
	// burst 20, so still 6). "b" is removed and must stop at once.
	if err := s.Reload(stack.Config{RateLimits: []stack.RateLimit{limitFor("aa", 20)}}); err != nil {
		t.Fatal(err)
	}
	if got := count(30); got != 6 {
		t.Errorf("after raising the rate, %d allowed; want the 6 tokens kept", got)
	}
	clock.Advance(time.Second)
	// Lower the rate to 3: tokens (20 after a second) are capped at 3.
	if err := s.Reload(stack.Config{RateLimits: []stack.RateLimit{limitFor("aa", 3)}}); err != nil {
		t.Fatal(err)
	}
	if got := count(30); got != 3 {
		t.Errorf("after lowering the rate, %d allowed; want 3 (capped at the new burst)", got)
	}
	// A failed reload keeps the last good configuration and lists every error.
	bad := stack.Config{RateLimits: []stack.RateLimit{limitFor("aa", -5), limitFor("", 1)}}
	err := s.Reload(bad)
	var ce *stack.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 2 {
		t.Fatalf("bad reload: %v", err)
	}
	if got := s.Config().RateLimits[0].Entries[0].Requests[0].Rate; got != 3 {
		t.Errorf("configuration in force has rate %d, want the last good 3", got)
	}
	if err := s.ReloadJSON([]byte(`{`)); err == nil {
		t.Error("ReloadJSON accepted invalid JSON")
	}
}

func TestReloadUnderTraffic(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	cfg := func(r int64) stack.Config {
		return stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "aa", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: r, Period: "minute"}}}}}}}
	}
	s := newStack(t, cfg(100), clock)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if d, _ := s.Allow(context.Background(), sluice.NewKeys("caller", "c")); d.Allowed {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < 50; i++ {
		if err := s.Reload(cfg(int64(100 + i%2))); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	// The clock never moved, so at most the largest burst in force (101)
	// can have been admitted: reloads keep consumed state.
	if allowed > 101 || allowed < 100 {
		t.Errorf("%d admitted across reloads at one instant, want 100 or 101", allowed)
	}
}

func TestAllowedPathDoesNotAllocate(t *testing.T) {
	if racecheck.Enabled {
		t.Skip("allocation counts differ under -race")
	}
	clock := limitertest.NewClock(limitertest.Start)
	var l sluice.Limiter = newStack(t, gatewayConfig(), clock)
	callers := make([]string, 64)
	for i := range callers {
		callers[i] = fmt.Sprintf("caller-%d", i)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		keys := sluice.NewKeys("targetName", "target-7", "toolName", "tool-3", "caller", callers[i%len(callers)])
		d, err := l.Allow(context.Background(), keys)
		if err != nil || !d.Allowed {
			t.Fatalf("denied: %+v %v", d, err)
		}
	})
	if allocs != 0 {
		t.Errorf("Allow allocates %.1f times per call on the allowed path; want 0", allocs)
	}
}

// gatewayConfig is the benchmark's configuration: (targetName, toolName) with
// 1000 exact entries plus trailing "*" entries; (targetName) with "*";
// (caller) with "*". Rates are high so the benchmark stays on the allowed path.
func gatewayConfig() stack.Config {
	var tt []stack.Entry
	for i := 0; i < 990; i++ {
		tt = append(tt, stack.Entry{
			Dimensions: map[string]string{"targetName": fmt.Sprintf("target-%d", i%100), "toolName": fmt.Sprintf("tool-%d", i/100)},
			Requests:   []stack.Rate{{Rate: 10_000_000, Period: "minute"}},
		})
	}
	for i := 0; i < 10; i++ {
		tt = append(tt, stack.Entry{
			Dimensions: map[string]string{"targetName": fmt.Sprintf("target-%d", i), "toolName": "*"},
			Requests:   []stack.Rate{{Rate: 10_000_000, Period: "minute"}},
		})
	}
	return stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "per-tool", DimensionKeys: []string{"targetName", "toolName"}, Entries: tt},
		{RateLimitID: "per-target", DimensionKeys: []string{"targetName"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "*"}, Requests: []stack.Rate{{Rate: 10_000_000, Period: "minute"}}}}},
		{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 10_000_000, Period: "minute"}}}}},
	}}
}

func TestReloadRemovedLimitStopsAtOnce(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	block := stack.RateLimit{RateLimitID: "freeze", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 0, Period: "second"}}}}}
	open := stack.RateLimit{RateLimitID: "open", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 5, Period: "second"}}}}}
	s := newStack(t, stack.Config{RateLimits: []stack.RateLimit{block, open}}, clock)
	keys := sluice.NewKeys("caller", "alice")
	if d, _ := s.Allow(context.Background(), keys); d.Allowed || d.LimitID != "freeze" {
		t.Fatalf("before reload: %+v", d)
	}
	if err := s.Reload(stack.Config{RateLimits: []stack.RateLimit{open}}); err != nil {
		t.Fatal(err)
	}
	// Same instant: the removed limit no longer applies, and "open" kept its
	// state (the denied request above consumed nothing from it).
	allowed := 0
	for i := 0; i < 10; i++ {
		if d, _ := s.Allow(context.Background(), keys); d.Allowed {
			allowed++
		}
	}
	if allowed != 5 {
		t.Errorf("%d allowed after removing the blocking limit, want 5", allowed)
	}
}

// Evaluated follows evaluation order (the seed's example lists the stricter
// per-target-rps before per-caller-rpm), not the alphabet.
func TestEvaluatedInEvaluationOrder(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	s := newStack(t, stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "per-caller-rpm", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 600, Period: "minute"}}}}},
		{RateLimitID: "per-target-rps", DimensionKeys: []string{"targetName"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "*"},
				Requests: []stack.Rate{{Rate: 1, Period: "second"}, {Rate: 30, Period: "minute"}}}}},
	}}, clock)
	d, _ := s.Allow(sluice.WithEvaluated(context.Background()), sluice.NewKeys("targetName", "my-target", "caller", "alice"))
	want := []string{"per-target-rps:requests:my-target", "per-caller-rpm:requests:alice"}
	if !slices.Equal(d.Evaluated, want) {
		t.Errorf("Evaluated = %q, want %q", d.Evaluated, want)
	}
}

// LimitKey escapes its separators inside values, so that two different
// requests never render the same key; plain values render unchanged.
func TestLimitKeyIsUnambiguous(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	s := newStack(t, stack.Config{RateLimits: []stack.RateLimit{{
		RateLimitID: "rl", DimensionKeys: []string{"path", "route"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"path": "*", "route": "*"}, Requests: []stack.Rate{{Rate: 0, Period: "second"}}}},
	}}}, clock)
	for _, c := range []struct{ path, route, want string }{
		{"p,route=q", "r", "rl/path=p%2Croute%3Dq,route=r"},
		{"p", "q,route=r", "rl/path=p,route=q%2Croute%3Dr"},
		{"a/b%2C", "50%", "rl/path=a%2Fb%252C,route=50%25"},
		{"my-target", "read.Data_1", "rl/path=my-target,route=read.Data_1"},
	} {
		d, err := s.Allow(context.Background(), sluice.NewKeys("path", c.path, "route", c.route))
		if err != nil || d.Allowed {
			t.Fatalf("(%q, %q): %+v %v", c.path, c.route, d, err)
		}
		if d.LimitKey != c.want {
			t.Errorf("(%q, %q): LimitKey %q, want %q", c.path, c.route, d.LimitKey, c.want)
		}
		if !slices.Equal(d.ResolvedValues, []string{c.path, c.route}) {
			t.Errorf("ResolvedValues %q keep the raw values", d.ResolvedValues)
		}
	}
}

// Per-value buckets are keyed by the values whatever their length and
// content: values that concatenate alike, and long values (keyed by a
// digest), still get a bucket each, and the same values share one.
func TestPerValueBucketsAreDistinct(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	s := newStack(t, stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "pair", DimensionKeys: []string{"x", "y"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"x": "*", "y": "*"}, Requests: []stack.Rate{{Rate: 1, Period: "minute"}}}}},
		{RateLimitID: "one", DimensionKeys: []string{"z"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"z": "*"}, Requests: []stack.Rate{{Rate: 1, Period: "minute"}}}}},
	}}, clock)
	long := strings.Repeat("k", 10_000)
	reqs := []sluice.Keys{
		sluice.NewKeys("x", "a,b", "y", "c"),
		sluice.NewKeys("x", "a", "y", "b,c"),
		sluice.NewKeys("x", "ab", "y", "c"),
		sluice.NewKeys("x", "", "y", "abc"),
		sluice.NewKeys("z", long),
		sluice.NewKeys("z", long+"!"),
		sluice.NewKeys("z", strings.Repeat("k", 32)),
		sluice.NewKeys("z", strings.Repeat("k", 33)),
	}
	for i, k := range reqs {
		if d, _ := s.Allow(context.Background(), k); !d.Allowed {
			t.Errorf("request %d (%v) denied: it shares a bucket with an earlier one", i, k)
		}
	}
	// The same values (a fresh copy of the long one too) find their bucket empty.
	for i, k := range []sluice.Keys{sluice.NewKeys("x", "a,b", "y", "c"), sluice.NewKeys("z", strings.Clone(long))} {
		if d, _ := s.Allow(context.Background(), k); d.Allowed {
			t.Errorf("repeat %d allowed: the same values must share their bucket", i)
		}
	}
}

// WithClock is the clock Allow reads; a nil clock keeps the default.
func TestWithClock(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 1, Period: "minute"}}}}}}}
	s, err := stack.New(cfg, stack.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	keys := sluice.NewKeys("caller", "alice")
	if d, _ := s.Allow(context.Background(), keys); !d.Allowed {
		t.Fatal(d)
	}
	if d, _ := s.Allow(context.Background(), keys); d.Allowed || d.RetryAfter < 59*time.Second || d.RetryAfter > time.Minute {
		t.Fatalf("second request: %+v, want a denial for about a minute", d)
	}
	clock.Advance(time.Minute) // the Stack reads this clock: the bucket has refilled
	if d, _ := s.Allow(context.Background(), keys); !d.Allowed {
		t.Fatalf("after a minute on the Stack's clock: %+v", d)
	}
	if _, err := stack.New(cfg, stack.WithClock(nil)); err != nil {
		t.Fatal(err)
	}
}

// Limits with the same dimension keys share one resolution of the request
// (and its hashes) but each matches its own entries, whatever their depth.
func TestLimitsSharingDimensionKeys(t *testing.T) {
	clock := limitertest.NewClock(limitertest.Start)
	lim := func(id string, entries ...[2]string) stack.RateLimit {
		rl := stack.RateLimit{RateLimitID: id, DimensionKeys: []string{"a", "b"}}
		for _, e := range entries {
			rl.Entries = append(rl.Entries, stack.Entry{Dimensions: map[string]string{"a": e[0], "b": e[1]}, Requests: []stack.Rate{{Rate: 10, Period: "minute"}}})
		}
		return rl
	}
	s := newStack(t, stack.Config{RateLimits: []stack.RateLimit{
		lim("none", [2]string{"x", "y"}),                        // (x, z) matches nothing here
		lim("shallow", [2]string{"x", "*"}),                     // depth 1
		lim("deep", [2]string{"x", "z"}, [2]string{"*", "*"}),   // depth 2, after a depth-1 limit
		lim("other", [2]string{"q", "*"}, [2]string{"x", "zz"}), // no match for (x, z)
	}}, clock)
	d, err := s.Allow(sluice.WithEvaluated(context.Background()), sluice.NewKeys("a", "x", "b", "z"))
	if err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	want := []string{"shallow:requests:x,z", "deep:requests:x,z"}
	if !slices.Equal(d.Evaluated, want) {
		t.Errorf("Evaluated = %q, want %q", d.Evaluated, want)
	}
	// A request without b skips all four; one with other values matches
	// only the catch-all of "deep".
	if d, _ := s.Allow(sluice.WithEvaluated(context.Background()), sluice.NewKeys("a", "x")); len(d.Evaluated) != 0 {
		t.Errorf("a request without b was evaluated against %q", d.Evaluated)
	}
	d, _ = s.Allow(sluice.WithEvaluated(context.Background()), sluice.NewKeys("a", "p", "b", "y"))
	if want := []string{"deep:requests:p,y"}; !slices.Equal(d.Evaluated, want) {
		t.Errorf("Evaluated = %q, want %q", d.Evaluated, want)
	}
}

package category_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/category"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/internal/racecheck"
	"github.com/sluicehq/sluice/stack/limitertest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var clusterRead = category.Category{Name: "Cluster read", Burst: 50, Refill: 20, Actions: []string{"DescribeClusters", "ListClusters"}}
var clusterModify = category.Category{Name: "Cluster modify", Burst: 20, Refill: 1, Actions: []string{"CreateCluster", "DeleteCluster"}}

func count(t *testing.T, s *category.Set, at time.Time, action string, n int) int {
	t.Helper()
	got := 0
	for i := 0; i < n; i++ {
		d, err := s.AllowActionAt(at, action, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			got++
		}
	}
	return got
}

func TestSeedCombinationsShareOneBucket(t *testing.T) {
	for _, c := range []struct{ describe, list, want int }{
		{25, 25, 50}, {30, 20, 50}, {50, 0, 50}, {0, 50, 50}, {50, 50, 50},
	} {
		s, err := category.New([]category.Category{clusterRead, clusterModify})
		if err != nil {
			t.Fatal(err)
		}
		got := count(t, s, t0, "DescribeClusters", c.describe) + count(t, s, t0, "ListClusters", c.list)
		if got != c.want {
			t.Errorf("%d DescribeClusters + %d ListClusters in one instant: %d allowed, want %d", c.describe, c.list, got, c.want)
		}
		// Another category is untouched.
		if got := count(t, s, t0, "CreateCluster", 25); got != 20 {
			t.Errorf("cluster modify: %d allowed, want its own burst of 20", got)
		}
	}
}

func TestSustainedRateAppliesToTheCategory(t *testing.T) {
	s, _ := category.New([]category.Category{clusterRead})
	count(t, s, t0, "DescribeClusters", 50)
	// Each following second: 20 tokens in total, whichever action uses them.
	for sec := 1; sec <= 5; sec++ {
		at := t0.Add(time.Duration(sec) * time.Second)
		got := count(t, s, at, "DescribeClusters", 15) + count(t, s, at, "ListClusters", 15)
		if got != 20 {
			t.Errorf("second %d: %d allowed, want 20", sec, got)
		}
	}
}

func TestPerActionMode(t *testing.T) {
	s, err := category.New([]category.Category{clusterRead}, category.WithPerAction())
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, s, t0, "DescribeClusters", 60) + count(t, s, t0, "ListClusters", 60); got != 100 {
		t.Errorf("per-action buckets: %d allowed, want 50 + 50", got)
	}
}

func TestResourceBucketStacksWithRequestBucket(t *testing.T) {
	run := category.Category{Name: "Mutating", Burst: 5, Refill: 2, Actions: []string{"RunInstances"}}
	s, err := category.New([]category.Category{run}, category.WithPerAction(),
		category.WithResourceBucket("RunInstances", 1000, 2))
	if err != nil {
		t.Fatal(err)
	}
	// 400 + 400 instances fit; the third call for 400 does not (200 left),
	// and its denial must not consume a request token.
	for i, want := range []bool{true, true, false} {
		d, err := s.AllowActionAt(t0, "RunInstances", 400)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != want {
			t.Fatalf("call %d: allowed=%v, want %v (%+v)", i, d.Allowed, want, d)
		}
		if !want && (d.Metric != category.MetricResources || d.RetryAfter != 100*time.Second) {
			t.Errorf("denial metric %q RetryAfter %v; want resources, 100s (200 short at 2/s)", d.Metric, d.RetryAfter)
		}
	}
	// Request bucket: 5 burst, 2 used; 3 more small calls fit, then denied.
	if got := count(t, s, t0, "RunInstances", 5); got != 3 {
		t.Errorf("%d small calls allowed, want 3: a resource denial consumed a request token", got)
	}
	d, _ := s.AllowActionAt(t0, "RunInstances", 2000)
	if d.Allowed {
		t.Error("2000 resources allowed by a bucket of 1000")
	}
}

func TestUnknownActionAndDefault(t *testing.T) {
	s, _ := category.New([]category.Category{clusterRead})
	if _, err := s.AllowActionAt(t0, "Nope", 1); !errors.Is(err, category.ErrUnknownAction) || !strings.Contains(err.Error(), `"Nope"`) {
		t.Errorf("unknown action: %v", err)
	}
	other := category.Category{Name: "Other", Burst: 2, Refill: 1}
	s, err := category.New([]category.Category{clusterRead, other}, category.WithDefault("Other"))
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, s, t0, "Nope", 3) + count(t, s, t0, "AlsoNope", 3); got != 2 {
		t.Errorf("unknown actions in the default category: %d allowed, want its burst 2", got)
	}
	d, _ := s.AllowActionAt(t0, "Nope", 1)
	if d.LimitKey != "Other/action=Nope" {
		t.Errorf("LimitKey %q", d.LimitKey)
	}
}

func TestValidation(t *testing.T) {
	_, err := category.New([]category.Category{
		{Name: "", Burst: 1, Refill: 1},
		{Name: "a", Burst: -1, Refill: -2, Actions: []string{"X", ""}},
		{Name: "a", Burst: 1, Refill: 1, Actions: []string{"X"}},
	}, category.WithDefault("missing"), category.WithResourceBucket("Y", 1, 1))
	if err == nil {
		t.Fatal("invalid categories accepted")
	}
	for _, want := range []string{
		"categories[0]: empty name", "negative burst -1", "refill -2", "categories[1].actions[1]: empty action",
		`duplicate category "a"`, `action "X" is already in category "a"`, `WithDefault("missing"): the category is not defined`, `WithResourceBucket("Y", 1, 1): no category has the action`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestLimiterInterface(t *testing.T) {
	clock := limitertest.NewClock(t0)
	s, _ := category.New([]category.Category{clusterModify}, category.WithClock(clock))
	var l sluice.Limiter = s
	keys := sluice.NewKeys(category.ActionKey, "CreateCluster")
	allowed := 0
	for i := 0; i < 30; i++ {
		d, err := l.Allow(context.Background(), keys)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		} else if d.LimitID != "Cluster modify" || d.RetryAfter != time.Second || !errors.Is(d.Err(), slerrors.ErrThrottled) {
			t.Fatalf("denial %+v", d)
		}
	}
	if allowed != 20 {
		t.Errorf("%d allowed, want 20", allowed)
	}
	if _, err := l.Allow(context.Background(), sluice.NewKeys("other", "x")); err == nil {
		t.Error("no action dimension: want an error")
	}
	if _, err := l.Allow(context.Background(), sluice.NewKeys(category.ActionKey, "CreateCluster", category.ResourcesKey, "lots")); err == nil {
		t.Error("a non-numeric resource count: want an error")
	}
}

// Allow reads the Set's clock; AllowAt decides at the instant it is given
// and ignores the clock: the same Keys, the same bucket.
func TestAllowAtTakesTheInstant(t *testing.T) {
	clock := limitertest.NewClock(t0)
	s, _ := category.New([]category.Category{{Name: "one", Burst: 1, Refill: 1, Actions: []string{"A"}}}, category.WithClock(clock))
	keys := sluice.NewKeys(category.ActionKey, "A")
	ctx := context.Background()
	if d, err := s.Allow(ctx, keys); err != nil || !d.Allowed {
		t.Fatalf("first request: %+v, %v", d, err)
	}
	if d, _ := s.Allow(ctx, keys); d.Allowed || d.RetryAfter != time.Second {
		t.Fatalf("second request at the same instant: %+v, want a 1s denial", d)
	}
	// A second later by the instant given, the clock unmoved.
	if d, err := s.AllowAt(ctx, t0.Add(time.Second), keys); err != nil || !d.Allowed {
		t.Fatalf("AllowAt a second later: %+v, %v", d, err)
	}
	if d, _ := s.Allow(ctx, keys); d.Allowed {
		t.Fatalf("Allow on the unmoved clock after AllowAt took the refill: %+v, want a denial", d)
	}
	clock.Advance(2 * time.Second)
	if d, _ := s.Allow(ctx, keys); !d.Allowed {
		t.Fatalf("Allow after the clock moved on: %+v", d)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.AllowAt(cancelled, t0.Add(time.Hour), keys); !errors.Is(err, context.Canceled) {
		t.Errorf("AllowAt with an ended context: %v", err)
	}
}

func TestAllowActionAtDoesNotAllocate(t *testing.T) {
	if racecheck.Enabled {
		t.Skip("allocation counts differ under -race")
	}
	s, _ := category.New([]category.Category{{Name: "big", Burst: 1 << 30, Refill: 1e6, Actions: []string{"A"}}})
	allocs := testing.AllocsPerRun(1000, func() {
		if d, _ := s.AllowActionAt(t0, "A", 1); !d.Allowed {
			t.Fatal("denied")
		}
	})
	if allocs != 0 {
		t.Errorf("AllowActionAt allocates %.1f times on the allowed path", allocs)
	}
}

// TestLimitKeyEscapes checks that category and action names render with
// the escaping of every limit key, so that a name holding a separator
// cannot read as another category's or action's.
func TestLimitKeyEscapes(t *testing.T) {
	s, err := category.New([]category.Category{
		{Name: "a/action=b", Burst: 0, Refill: 0, Actions: []string{"c"}},
		{Name: "a", Burst: 0, Refill: 0, Actions: []string{"b/action=c", "x,y#z%"}},
	}, category.WithDefault("a"))
	if err != nil {
		t.Fatal(err)
	}
	for action, want := range map[string]string{
		"c":          "a%2Faction%3Db/action=c",
		"b/action=c": "a/action=b%2Faction%3Dc",
		"x,y:z%":     "a/action=x%2Cy%3Az%25",
		"un=known":   "a/action=un%3Dknown", // the default category's path
	} {
		d, err := s.AllowActionAt(t0, action, 1)
		if err != nil || d.Allowed || d.LimitKey != want {
			t.Errorf("%q: allowed %v, LimitKey %q, %v; want denied by %q", action, d.Allowed, d.LimitKey, err, want)
		}
	}
}

package category_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/category"
)

// TestOptionsNotGiven walks every option with the values the option rule
// calls "not given" (zero, negative, NaN, nil): none
// panics, New succeeds, and the Set behaves as with no option at all.
func TestOptionsNotGiven(t *testing.T) {
	cats := []category.Category{{Name: "c", Burst: 2, Refill: 1e-6, Actions: []string{"A", "B"}}}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]category.Option{
		"nil Option":                   nil,
		"WithDefault(\"\")":            category.WithDefault(""),
		"WithActionKey(\"\")":          category.WithActionKey(""),
		"WithResourcesKey(\"\")":       category.WithResourcesKey(""),
		"WithClock(nil)":               category.WithClock(nil),
		"WithResourceBucket(\"\",5,1)": category.WithResourceBucket("", 5, 1),
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := category.New(cats, o)
			if err != nil {
				t.Fatal(err)
			}
			// shared buckets (the default), no resource bucket: A and B share a burst of 2,
			// whatever resource count a request carries.
			for i, a := range []string{"A", "B", "A"} {
				d, err := s.AllowActionAt(t0, a, 1000)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed != (i < 2) {
					t.Fatalf("request %d (%s): allowed %v; want the shared bucket of 2 without a resource bucket", i, a, d.Allowed)
				}
			}
			// No default category: an unknown action is an error.
			if _, err := s.AllowActionAt(t0, "Z", 1); !errors.Is(err, category.ErrUnknownAction) {
				t.Errorf("unknown action: %v, want ErrUnknownAction", err)
			}
			// The default dimensions (ActionKey, ResourcesKey) on the
			// default clock: a fresh Set allows one request.
			s, _ = category.New(cats, o)
			d, err := s.Allow(t.Context(), sluice.NewKeys(category.ActionKey, "B", category.ResourcesKey, "7"))
			if err != nil || !d.Allowed {
				t.Fatalf("Allow with the default keys: %+v, %v", d, err)
			}
			if _, err := s.Allow(t.Context(), sluice.NewKeys(category.ActionKey, "B", category.ResourcesKey, "x")); err == nil || !strings.Contains(err.Error(), "resource count") {
				t.Errorf("Allow with resources=x: %v; want the default ResourcesKey read and refused", err)
			}
		})
	}
}

// TestOptionsInvalid checks that an option value wrong in another way than
// "not given" makes New fail with an error naming the option and value.
func TestOptionsInvalid(t *testing.T) {
	cats := []category.Category{{Name: "c", Burst: 2, Refill: 1, Actions: []string{"A"}}}
	cases := []struct {
		o    category.Option
		want string
	}{
		{category.WithDefault("missing"), `WithDefault("missing")`},
		{category.WithResourceBucket("Z", 1, 1), `WithResourceBucket("Z", 1, 1)`},
		{category.WithResourceBucket("A", 1, math.Inf(1)), `WithResourceBucket("A", 1, +Inf)`},
		{category.WithResourceBucket("A", -1, 1), `WithResourceBucket("A", -1, 1)`},
		{category.WithResourceBucket("A", 5, -1), `WithResourceBucket("A", 5, -1)`},
		{category.WithResourceBucket("A", 5, math.NaN()), `WithResourceBucket("A", 5, NaN)`},
	}
	for _, c := range cases {
		s, err := category.New(cats, c.o)
		if err == nil || s != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New with %s: %v, %v; want an error naming it", c.want, s, err)
		}
	}
}

// A resource bucket's zeros mean what a Category's do: a refill of 0 is an
// allowance that never refills, a burst of 0 refuses every request that
// carries resources (and none that carries none).
func TestResourceBucketZeros(t *testing.T) {
	cats := []category.Category{{Name: "c", Burst: 100, Refill: 100, Actions: []string{"A"}}}
	s, err := category.New(cats, category.WithResourceBucket("A", 5, 0))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		d, err := s.AllowActionAt(t0, "A", 5)
		if err != nil || d.Allowed != want {
			t.Fatalf("refill 0, request %d of 5 resources: %+v %v, want allowed %v", i, d, err, want)
		}
	}
	if d, _ := s.AllowActionAt(t0.Add(time.Hour), "A", 1); d.Allowed {
		t.Error("refill 0: a resource came back after an hour")
	}
	s, err = category.New(cats, category.WithResourceBucket("A", 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := s.AllowActionAt(t0, "A", 1); d.Allowed {
		t.Error("burst 0: a request with a resource was allowed")
	}
	if d, _ := s.AllowActionAt(t0, "A", 0); !d.Allowed {
		t.Error("burst 0: a request without resources was refused")
	}
}

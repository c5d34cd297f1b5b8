package stack_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucketkey"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// nameParts is what a limit key says: the limit and its dimension keys
// with the request's values.
type nameParts struct {
	id    string
	pairs [][2]string
}

// unescapePart decodes one part of a name, which must hold no separator.
func unescapePart(t *testing.T, name, s string) string {
	t.Helper()
	if strings.ContainsAny(s, ",=/:") {
		t.Fatalf("%q: part %q holds an unescaped separator", name, s)
	}
	u, err := url.PathUnescape(s)
	if err != nil {
		t.Fatalf("%q: part %q: %v", name, s, err)
	}
	return u
}

// parseName splits a limit key at the separators of the package
// documentation ("Names of limits and buckets") and decodes the escapes,
// independently of the code that renders it.
func parseName(t *testing.T, name string) nameParts {
	t.Helper()
	var p nameParts
	id, dims, ok := strings.Cut(name, "/")
	if !ok {
		t.Fatalf("%q has no '/' after the id", name)
	}
	p.id = unescapePart(t, name, id)
	for _, d := range strings.Split(dims, ",") {
		k, v, ok := strings.Cut(d, "=")
		if !ok {
			t.Fatalf("%q: dimension %q has no '='", name, d)
		}
		p.pairs = append(p.pairs, [2]string{unescapePart(t, name, k), unescapePart(t, name, v)})
	}
	return p
}

// parseEvaluated splits an Evaluated entry, "<id>:<metric>:<v1>,<v2>…",
// and decodes its parts.
func parseEvaluated(t *testing.T, name string) (id, metric string, values []string) {
	t.Helper()
	parts := strings.Split(name, ":")
	if len(parts) != 3 {
		t.Fatalf("%q has %d ':'-separated parts, want 3", name, len(parts))
	}
	for _, v := range strings.Split(parts[2], ",") {
		values = append(values, unescapePart(t, name, v))
	}
	return unescapePart(t, name, parts[0]), unescapePart(t, name, parts[1]), values
}

// FuzzBucketNames checks that distinct buckets always get distinct names:
// for two requests' values (holding any separator of any name format),
// the LimitKey of a denial, the Shadowed entry of a shadow limit, the
// Evaluated entries and the BucketKey each decode back to the values
// (LimitKey, Shadowed, Evaluated) and differ between the two requests
// whenever their values differ.
func FuzzBucketNames(f *testing.F) {
	tricky := []string{"", "x", ",", "=", "/", "#", "%", ":", "|", "*", "%2C", "%25", "%3A", "a,b=c", "x:requests", "1:a", "a/b=c,d=e:f"}
	for _, a := range tricky {
		for _, b := range tricky {
			f.Add(a, b, b, a)
		}
	}
	f.Add("a,b", "c", "a", "b,c")
	f.Add("a", "b=c", "a,b", "c")
	f.Add("a:requests", "b", "a", "b:requests")
	f.Add("a,b", "", "a", "b")

	clock := limitertest.NewClock(limitertest.Start)
	pair := func(shadow bool, r stack.Rate, tokens bool) stack.Config {
		e := stack.Entry{Dimensions: map[string]string{"a=1": "*", "b,2": "*"}, Requests: []stack.Rate{r}}
		if tokens {
			e.Tokens = []stack.Rate{r}
		}
		return stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "pair", Shadow: shadow,
			DimensionKeys: []string{"a=1", "b,2"}, Entries: []stack.Entry{e}}}}
	}
	deny := newStack(f, pair(false, stack.Rate{Rate: 0, Period: "second"}, false), clock)
	shadow := newStack(f, pair(true, stack.Rate{Rate: 0, Period: "second"}, false), clock)
	eval := newStack(f, pair(false, stack.Rate{Rate: 1000, Period: "second"}, true), clock)
	ctx := sluice.WithEvaluated(context.Background())

	type names struct {
		limitKey, shadowed, bucketKey string
		evaluated                     []string
	}
	render := func(t *testing.T, x, y string) names {
		t.Helper()
		keys := sluice.NewKeys("a=1", x, "b,2", y)
		want := nameParts{id: "pair", pairs: [][2]string{{"a=1", x}, {"b,2", y}}}
		check := func(what, name string) {
			t.Helper()
			if got := parseName(t, name); got.id != want.id || !slices.Equal(got.pairs, want.pairs) {
				t.Fatalf("%s %q decodes to %+v, want %+v", what, name, got, want)
			}
		}
		var n names
		d, err := deny.Allow(context.Background(), keys)
		if err != nil || d.Allowed {
			t.Fatalf("rate 0 did not deny (%q, %q): %+v, %v", x, y, d, err)
		}
		n.limitKey = d.LimitKey
		check("LimitKey", n.limitKey)

		d, err = shadow.Allow(context.Background(), keys)
		if err != nil || !d.Allowed || len(d.Shadowed) != 1 {
			t.Fatalf("shadow limit (%q, %q): %+v, %v", x, y, d, err)
		}
		n.shadowed = d.Shadowed[0]
		check("Shadowed", n.shadowed)
		if n.shadowed != n.limitKey {
			t.Fatalf("Shadowed %q and LimitKey %q name one limit differently", n.shadowed, n.limitKey)
		}

		clock.Advance(time.Second) // the buckets refill: every call passes
		d, err = eval.AllowN(ctx, keys, 1)
		if err != nil || !d.Allowed || len(d.Evaluated) != 2 {
			t.Fatalf("evaluated (%q, %q): %+v, %v", x, y, d, err)
		}
		n.evaluated = d.Evaluated
		metrics := []string{sluice.MetricRequests, sluice.MetricTokens}
		for _, e := range n.evaluated {
			id, m, vals := parseEvaluated(t, e)
			if i := slices.Index(metrics, m); i < 0 {
				t.Fatalf("Evaluated %q: metric %q twice or unknown", e, m)
			} else {
				metrics = slices.Delete(metrics, i, i+1)
			}
			if id != "pair" || !slices.Equal(vals, []string{x, y}) {
				t.Fatalf("Evaluated %q decodes to %q, %q, want pair, %q", e, id, vals, []string{x, y})
			}
		}
		n.bucketKey = bucketkey.Render("pair", sluice.MetricRequests, 0, []string{"*", "*"}, []string{x, y})
		return n
	}

	f.Fuzz(func(t *testing.T, v1, v2, w1, w2 string) {
		v, w := render(t, v1, v2), render(t, w1, w2)
		if v1 == w1 && v2 == w2 {
			if v.limitKey != w.limitKey || !slices.Equal(v.evaluated, w.evaluated) || v.bucketKey != w.bucketKey {
				t.Fatalf("one bucket, two names: %+v and %+v", v, w)
			}
			return
		}
		if v.limitKey == w.limitKey {
			t.Errorf("(%q, %q) and (%q, %q) share the LimitKey %q", v1, v2, w1, w2, v.limitKey)
		}
		for _, e := range v.evaluated {
			if slices.Contains(w.evaluated, e) {
				t.Errorf("(%q, %q) and (%q, %q) share the Evaluated entry %q", v1, v2, w1, w2, e)
			}
		}
		if v.bucketKey == w.bucketKey {
			t.Errorf("(%q, %q) and (%q, %q) share the BucketKey %q", v1, v2, w1, w2, v.bucketKey)
		}
	})
}

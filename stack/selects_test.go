package stack_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
)

// Selects names exactly the limits whose buckets Allow checks: for random
// keys (names and values drawn from a small alphabet, so that misses,
// exact hits and trailing wildcards all occur) the ids in an allowed
// Decision's Evaluated list are the ids Selects returns.
func TestSelectsAgreesWithAllow(t *testing.T) {
	s, err := stack.Load([]byte(`{"rateLimits": [
	  {"rateLimitId": "per-ip", "dimensionKeys": ["ip"], "entries": [
	    {"dimensions": {"ip": "*"}, "requests": [{"rate": 10000000, "period": "second"}]}]},
	  {"rateLimitId": "per-tool", "dimensionKeys": ["caller", "tool"], "entries": [
	    {"dimensions": {"caller": "a", "tool": "x"}, "requests": [{"rate": 10000000, "period": "second"}]},
	    {"dimensions": {"caller": "b", "tool": "*"}, "requests": [{"rate": 10000000, "period": "second"}]}]},
	  {"rateLimitId": "exact", "dimensionKeys": ["caller"], "entries": [
	    {"dimensions": {"caller": "a"}, "requests": [{"rate": 10000000, "period": "second"}]}]}
	 ],
	 "serviceLimits": [
	  {"rateLimitId": "svc", "dimensionKeys": ["tool", "caller"], "entries": [
	    {"dimensions": {"tool": "x", "caller": "*"}, "requests": [{"rate": 10000000, "period": "second"}]}]}
	 ]}`))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"ip", "IP", "caller", "tool", "Tool"}
	values := []string{"a", "b", "x", "*"}
	for i := range 2000 {
		var keys sluice.Keys
		for range rng.IntN(5) {
			keys.Set(names[rng.IntN(len(names))], values[rng.IntN(len(values))])
		}
		d, err := s.Allow(sluice.WithEvaluated(context.Background()), keys)
		if err != nil || !d.Allowed {
			t.Fatalf("keys %v: %+v %v", keys, d, err)
		}
		var evaluated []string
		for _, e := range d.Evaluated {
			id, _, _ := strings.Cut(e, ":")
			if !slices.Contains(evaluated, id) {
				evaluated = append(evaluated, id)
			}
		}
		got := s.Selects(keys)
		slices.Sort(evaluated)
		slices.Sort(got)
		if !slices.Equal(got, evaluated) {
			t.Fatalf("case %d, keys %v: Selects %v, Allow evaluated %v", i, keys, got, evaluated)
		}
	}
}

// A document without "rateLimits" is an error naming it, wherever it comes
// from; an explicit empty list is a configuration without limits.
func TestMissingRateLimitsIsAnError(t *testing.T) {
	for _, doc := range []string{`{}`, `{"serviceLimits": []}`, `{"ratelimits": []}`} {
		_, err := stack.Load([]byte(doc))
		var ce *stack.ConfigError
		if !errors.As(err, &ce) || !slices.ContainsFunc(ce.Problems, func(p stack.Problem) bool { return p.Path == "rateLimits" }) {
			t.Errorf("Load(%s) = %v, want a *ConfigError at rateLimits", doc, err)
		}
	}
	s, err := stack.Load([]byte(`{"rateLimits": []}`))
	if err != nil {
		t.Fatalf(`Load({"rateLimits": []}) = %v`, err)
	}
	if ids := s.Selects(sluice.NewKeys("caller", "alice")); len(ids) != 0 {
		t.Errorf("an empty configuration selects %v", ids)
	}
	if err := s.ReloadJSON([]byte(`{}`)); err == nil {
		t.Error(`ReloadJSON({}) = nil, want the error naming rateLimits`)
	}
}

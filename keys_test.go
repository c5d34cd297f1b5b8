package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/internal/racecheck"
)

func TestKeys(t *testing.T) {
	k := sluice.NewKeys("targetName", "t1", "toolName", "readData", "dangling")
	if v, ok := k.Get("toolName"); !ok || v != "readData" {
		t.Errorf("Get(toolName) = %q, %v", v, ok)
	}
	if v, ok := k.Get("dangling"); !ok || v != "" {
		t.Errorf("a trailing name gets the empty value: %q, %v", v, ok)
	}
	if _, ok := k.Get("missing"); ok {
		t.Error("Get(missing) found a value")
	}
	k.Set("targetName", "t2") // replaces in place
	if k.Len() != 3 || k.At(0) != (sluice.KV{Name: "targetName", Value: "t2"}) {
		t.Errorf("after Set: %v", k)
	}
	// Past the inline capacity, pairs spill and With copies the spill.
	for i := 0; i < 12; i++ {
		k.Set(fmt.Sprintf("k%d", i), fmt.Sprint(i))
	}
	k2 := k.With("k11", "changed")
	if v, _ := k.Get("k11"); v != "11" {
		t.Errorf("With modified the original: k11=%q", v)
	}
	if v, _ := k2.Get("k11"); v != "changed" || k2.Len() != 15 {
		t.Errorf("With: k11=%q len %d", v, k2.Len())
	}
	var names []string
	for n := range k.All() {
		names = append(names, n)
	}
	if len(names) != 15 || names[0] != "targetName" || names[14] != "k11" {
		t.Errorf("All order: %q", names)
	}
	if s := sluice.NewKeys("a", "1", "b", "2").String(); s != "a=1,b=2" {
		t.Errorf("String = %q", s)
	}
}

// limiterSink defeats the compiler's knowledge of the concrete type, as a
// real caller holding a sluice.Limiter would.
var limiterSink sluice.Limiter = sluice.LimiterFunc(func(_ context.Context, k sluice.Keys) (sluice.Decision, error) {
	_, ok := k.Get("caller")
	return sluice.Decision{Allowed: ok}, nil
})

func TestKeysThroughInterfaceDoNotAllocate(t *testing.T) {
	if racecheck.Enabled {
		t.Skip("allocation counts differ under -race")
	}
	caller := "alice"
	allocs := testing.AllocsPerRun(1000, func() {
		keys := sluice.NewKeys("targetName", "t1", "toolName", "readData", "caller", caller, "model", "m")
		keys.Set("region", "eu")
		d, _ := limiterSink.Allow(context.Background(), keys)
		if !d.Allowed {
			t.Fatal("caller missing")
		}
	})
	if allocs != 0 {
		t.Errorf("building Keys and calling a Limiter allocates %.1f times; want 0", allocs)
	}
}

func BenchmarkKeysThroughInterface(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		keys := sluice.NewKeys("targetName", "t1", "toolName", "readData", "caller", "alice")
		limiterSink.Allow(ctx, keys)
	}
}

func TestUnlimitedAndDeny(t *testing.T) {
	d, err := sluice.Unlimited.Allow(context.Background(), sluice.Keys{})
	if err != nil || !d.Allowed || d.Err() != nil {
		t.Errorf("Unlimited: %+v %v", d, err)
	}
	d, err = sluice.Deny.Allow(context.Background(), sluice.Keys{})
	if err != nil || d.Allowed || !d.Permanent {
		t.Errorf("Deny: %+v %v", d, err)
	}
	if !errors.Is(d.Err(), slerrors.ErrThrottled) || errors.Is(d.Err(), slerrors.ErrCostExceedsBurst) {
		t.Errorf("Deny.Err() = %v", d.Err())
	}
}

func TestDecisionErr(t *testing.T) {
	d := sluice.Decision{LimitID: "rl", LimitKey: "rl/caller=a", Metric: "tokens", RetryAfter: 1500_000_000,
		MatchedEntry: []string{"*"}, ResolvedValues: []string{"a"}}
	err := fmt.Errorf("handler: %w", d.Err())
	te, ok := slerrors.AsThrottled(err)
	if !ok || !errors.Is(err, slerrors.ErrThrottled) {
		t.Fatalf("wrapped Err() not matched: %v", err)
	}
	if te.LimitKey != "rl/caller=a" || te.Metric != "tokens" || te.RetryAfterSeconds() != 2 || !slices.Equal(te.ResolvedValues, []string{"a"}) {
		t.Errorf("ThrottledError = %+v", te)
	}
	if want := "sluice: rate limit exceeded for rl/caller=a (tokens), retry after 1.5s"; te.Error() != want {
		t.Errorf("Error() = %q, want %q", te.Error(), want)
	}
	d = sluice.Decision{LimitKey: "rl/m=x", Metric: "tokens", Permanent: true, OverBurst: true}
	if !errors.Is(d.Err(), slerrors.ErrCostExceedsBurst) || !errors.Is(d.Err(), slerrors.ErrThrottled) {
		t.Errorf("over-burst Err() = %v", d.Err())
	}
}

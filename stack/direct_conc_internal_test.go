package stack

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Under concurrency (and concurrent reloads that keep the state), with the
// clock frozen, no bucket admits beyond its burst, and the refunds of the
// direct and ordered paths' fallbacks leak nothing: after the storm every bucket has
// exactly burst − admitted left.
func TestDirectConcurrentNeverOverAdmits(t *testing.T) {
	// With the pair entry (o, *) the plan is ordered (evaluate's ordered plan);
	// with (*, *) its bucket key is a digest and the general plan decides.
	for _, pairOrg := range []string{"o", "*"} {
		t.Run("pair org "+pairOrg, func(t *testing.T) { directConcurrentNeverOverAdmits(t, pairOrg) })
	}
}

func directConcurrentNeverOverAdmits(t *testing.T, pairOrg string) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return at }
	cfg := Config{RateLimits: []RateLimit{
		{RateLimitID: "pair", DimensionKeys: []string{"org", "caller"}, Entries: []Entry{
			{Dimensions: map[string]string{"org": pairOrg, "caller": "*"}, Requests: []Rate{{Rate: 1, Period: Minute, Burst: 7}}},
		}},
		{RateLimitID: "org", DimensionKeys: []string{"org"}, Entries: []Entry{
			{Dimensions: map[string]string{"org": "o"}, Requests: []Rate{{Rate: 1, Period: Minute, Burst: 40}}},
		}},
	}, ServiceLimits: []RateLimit{
		{RateLimitID: "svc", DimensionKeys: []string{"caller"}, Entries: []Entry{
			{Dimensions: map[string]string{"caller": "*"}, Requests: []Rate{{Rate: 1, Period: Minute, Burst: 5}}},
		}},
	}}
	s, err := New(cfg, WithClock(sluice.ClockFunc(now)))
	if err != nil {
		t.Fatal(err)
	}
	if c := s.cfg.Load(); c.big || (c.ordered != nil) != (pairOrg == "o") {
		t.Fatalf("not the plan this test is about: big %v, ordered %v", c.big, c.ordered != nil)
	}
	const callers = 10
	var admitted [callers]atomic.Int64
	var total atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() { // reloads keeping the state
		for {
			select {
			case <-stop:
				return
			default:
				_ = s.Reload(cfg)
			}
		}
	}()
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 400 {
				c := (g + i) % callers
				d, err := s.Allow(context.Background(), sluice.NewKeys("org", "o", "caller", fmt.Sprint("c", c)))
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted[c].Add(1)
					total.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if n := total.Load(); n > 40 {
		t.Errorf("org admitted %d, burst 40", n)
	}
	for c := range callers {
		if n := admitted[c].Load(); n > 5 {
			t.Errorf("caller %d admitted %d, burst 5", c, n)
		}
	}
	// Nothing leaked: what is left is exactly burst − admitted.
	for c := range callers {
		d, _ := s.Allow(context.Background(), sluice.NewKeys("caller", fmt.Sprint("c", c)))
		want := 5 - admitted[c].Load()
		if want > 0 && (!d.Allowed || d.Remaining != want-1) {
			t.Errorf("caller %d: %d admitted, then %+v", c, admitted[c].Load(), d)
		}
	}
	t.Logf("admitted %d", total.Load())
}

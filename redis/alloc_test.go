package redis_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/racecheck"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
)

// TestDecisionAllocations pins the Go side's allocations per decision
// through a Stack on a real redis-server (issue 11: the benchmark's three
// stacked limits cost 37 allocations a decision, one limit 23; most were
// go-redis's boxing of the script's arguments). What is left: the bucket
// keys (the Stack's and the Redis key, one each per bucket), go-redis's
// command, connection check and reply (a boxed int64 per remaining count
// above 255), and the outcome.
func TestDecisionAllocations(t *testing.T) {
	if racecheck.Enabled || testing.CoverMode() != "" {
		t.Skip("allocation counts differ under -race and -cover")
	}
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  stack.Config
		max  float64
	}{
		{"1limit", oneLimit, 12},
		{"3limits", benchLimits, 18},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(uniquePrefix("alloc")))
			if err != nil {
				t.Fatal(err)
			}
			s, err := stack.New(tc.cfg, stack.WithBackend(be), stack.WithFailClosed())
			if err != nil {
				t.Fatal(err)
			}
			allow := func() {
				d, err := s.Allow(ctx, threeKeys)
				if err != nil || !d.Allowed {
					t.Fatalf("%+v, %v", d, err)
				}
			}
			allow() // the script loaded, the connection dialled
			got := testing.AllocsPerRun(200, allow)
			t.Logf("%.1f allocations per decision", got)
			if got > tc.max {
				t.Errorf("%.1f allocations per decision, want at most %v", got, tc.max)
			}
		})
	}
}

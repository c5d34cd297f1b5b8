package mcplimit_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sluicehq/sluice/internal/racecheck"
	"github.com/sluicehq/sluice/mcplimit"
	"github.com/sluicehq/sluice/stack"
)

// An admitted tool call costs the middleware no allocation, with a
// connections slot held for the call (the reservation is pooled) or
// without one.
func TestMiddlewareAllocatesNothing(t *testing.T) {
	if racecheck.Enabled || testing.CoverMode() != "" {
		t.Skip("allocation counts differ under -race and coverage")
	}
	for _, conns := range []bool{false, true} {
		cfg := stack.Config{RateLimits: []stack.RateLimit{{
			RateLimitID: "per-tool", DimensionKeys: []string{"targetName", "toolName"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "t", "toolName": "*"}, Requests: []stack.Rate{{Rate: 10_000_000, Period: "minute"}}}},
		}}}
		if conns {
			cfg.RateLimits[0].Entries[0].Connections = []stack.Rate{{Rate: 1, Period: "second"}}
		}
		s, err := stack.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		next := func(context.Context, string, mcp.Request) (mcp.Result, error) { calls++; return nil, nil }
		h := mcplimit.Middleware(s, mcplimit.ToolKeys("t"))(next)
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "read"}}
		ctx := context.Background()
		allocs := testing.AllocsPerRun(1000, func() {
			if _, err := h(ctx, "tools/call", req); err != nil {
				t.Fatal(err) // with one slot, a leaked slot denies the next call
			}
		})
		if calls < 1000 {
			t.Fatalf("tool ran %d times", calls)
		}
		if allocs > 0 {
			t.Errorf("connections limit %v: the middleware allocates %.1f times per call, want 0", conns, allocs)
		}
	}
}

package mcplimit_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sluicehq/sluice/mcplimit"
	"github.com/sluicehq/sluice/stack"
)

// With a stack (a sluice.Reserver) a tool call holds a connections slot
// until it returns.
func TestToolCallHoldsConnectionSlot(t *testing.T) {
	limits, err := stack.New(stack.Config{RateLimits: []stack.RateLimit{{
		RateLimitID: "tool-concurrency", DimensionKeys: []string{"targetName", "toolName"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "my-target", "toolName": "*"},
			Connections: []stack.Rate{{Rate: 1, Period: "second"}}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	s := mcp.NewServer(&mcp.Implementation{Name: "my-target", Version: "v1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(context.Context, *mcp.CallToolRequest, echoIn) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		<-release
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	s.AddReceivingMiddleware(mcplimit.Middleware(limits, mcplimit.ToolKeys("my-target"), mcplimit.WithJSONRPCCode(429)))
	cs := connect(t, s)

	first := make(chan error, 1)
	go func() { _, err := call(cs, "slow"); first <- err }()
	<-started // the first call is in its handler, holding the slot
	_, err = call(cs, "slow")
	data, ok := mcplimit.ParseError(err, 429)
	if !ok || data.Metric != "connections" || data.LimitKey != "tool-concurrency/targetName=my-target,toolName=slow" {
		t.Fatalf("second call while the first is in flight: %v (%+v)", err, data)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first call: %v", err)
	}
	go func() { <-started }()
	if _, err := call(cs, "slow"); err != nil {
		t.Errorf("a call after the first returned: %v", err)
	}
}

package mcplimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sluicehq/sluice/mcplimit"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func ExampleMiddleware() {
	// One call per tool per second (any sluice.Limiter works here).
	limiter, _ := limitertest.NewPerValue("toolName", 1, time.Second)

	server := mcp.NewServer(&mcp.Implementation{Name: "my-target", Version: "v1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "readData"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "data"}}}, nil, nil
	})
	// The gateway's code is -32003, but the Go SDK's own client reads that
	// code as "client is closing"; a server for Go clients picks another.
	server.AddReceivingMiddleware(mcplimit.Middleware(limiter, mcplimit.ToolKeys("my-target"), mcplimit.WithJSONRPCCode(429)))

	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, _ := server.Connect(ctx, st, nil)
	defer ss.Close()
	cs, _ := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "v1"}, nil).Connect(ctx, ct, nil)
	defer cs.Close()

	for range 2 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "readData"})
		if data, ok := mcplimit.ParseError(err, 429); ok {
			fmt.Printf("throttled: %s, retry in %ds\n", data.LimitKey, data.RetryAfter)
			continue
		}
		fmt.Println("result:", res.Content[0].(*mcp.TextContent).Text)
	}
	// Output:
	// result: data
	// throttled: per-toolName/toolName=readData, retry in 1s
}

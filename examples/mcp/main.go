// Command mcp is an MCP server (official Go SDK, streamable HTTP) whose tool
// calls are rate-limited per tool with mcplimit, using the gateway's
// configuration format: readData may be called 2 times per second, every
// other tool once per second. A throttled call gets the gateway's JSON-RPC
// error, code -32003, with data.retryAfter.
//
//	go run ./examples/mcp -addr 127.0.0.1:8081
//
// Note: the Go SDK's own client reads -32003 as "client is closing"; for Go
// clients pass -code 429 (see package mcplimit).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/mcplimit"
	"github.com/sluicehq/sluice/stack"
)

const target = "my-target"

const config = `{"rateLimits": [
  {"rateLimitId": "per-tool", "dimensionKeys": ["targetName", "toolName"], "entries": [
    {"dimensions": {"targetName": "my-target", "toolName": "readData"}, "requests": [{"rate": 2, "period": "second"}]},
    {"dimensions": {"targetName": "my-target", "toolName": "*"},        "requests": [{"rate": 1, "period": "second"}]}
  ]}
]}`

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address")
	code := flag.Int("code", slerrors.DefaultJSONRPCCode, "JSON-RPC error code of a throttled call")
	flag.Parse()
	h, err := newHandler(time.Now, *code)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log.Printf("MCP server on http://%s (streamable HTTP)", *addr)
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

type textIn struct {
	Text string `json:"text" jsonschema:"the text to work on"`
}

// newServer returns the MCP server with its tools and the rate limits.
func newServer(now func() time.Time, code int) (*mcp.Server, error) {
	limits, err := stack.Load([]byte(config), stack.WithClock(now))
	if err != nil {
		return nil, err
	}
	s := mcp.NewServer(&mcp.Implementation{Name: target, Version: "v1"}, nil)
	tool := func(name, desc string, f func(string) string) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc}, func(_ context.Context, _ *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: f(in.Text)}}}, nil, nil
		})
	}
	tool("readData", "returns the text", func(s string) string { return s })
	tool("upper", "upper-cases the text", strings.ToUpper)
	s.AddReceivingMiddleware(mcplimit.Middleware(limits, mcplimit.ToolKeys(target), mcplimit.WithJSONRPCCode(code)))
	return s, nil
}

func newHandler(now func() time.Time, code int) (http.Handler, error) {
	s, err := newServer(now, code)
	if err != nil {
		return nil, err
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: true}), nil
}

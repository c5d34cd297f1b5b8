// Command mcp is an MCP server (official Go SDK, streamable HTTP) whose tool
// calls are rate-limited per tool with mcplimit, using the gateway's
// configuration format: readData may be called 2 times per second, every
// other tool once per second. A throttled call gets the gateway's JSON-RPC
// error, code -32003, with data.retryAfter.
//
//	go run ./examples/mcp                        # demonstrate on a port of its own and exit
//	go run ./examples/mcp -addr 127.0.0.1:8083   # serve until interrupted
//
// Without -addr it serves on a loopback port of its own, on a clock that
// stands still (nothing sleeps), and is its own client, speaking raw
// JSON-RPC over HTTP as any MCP client does: it initializes a session, calls
// readData three times (the third is throttled) and upper twice (the second
// is), prints each answer, moves the clock on by the retryAfter the error
// carried, calls readData again, and exits. A throttled call answers:
//
//	{"jsonrpc":"2.0","id":3,"error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":"per-tool/targetName=my-target,toolName=readData","metric":"requests","retryAfter":1}}}
//
// Note: the Go SDK's own client reads -32003 as "client is closing"; for Go
// clients pass -code 429 (see package mcplimit).
//
// Flags:
//
//	-addr ADDR   address to serve on until interrupted (default: demonstrate
//	             on a loopback port of its own and exit)
//	-code N      JSON-RPC error code of a throttled call, a non-zero 32-bit
//	             integer (default -32003)
//
// An address that cannot be listened on or a flag out of range is reported
// in one line and the exit status is 1.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sluicehq/sluice"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runArgs(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "mcp:", err)
		}
		os.Exit(1)
	}
}

// runArgs parses args and serves (with -addr) or demonstrates.
func runArgs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "address to serve on until interrupted (empty: demonstrate on a loopback port of its own and exit)")
	code := fs.Int("code", slerrors.DefaultJSONRPCCode, "JSON-RPC error code of a throttled call, a non-zero 32-bit integer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q: all input is given by flags", fs.Arg(0))
	case *code == 0 || *code < math.MinInt32 || *code > math.MaxInt32:
		return fmt.Errorf("-code %d: must be a non-zero 32-bit integer", *code)
	}
	if *addr == "" {
		return demo(ctx, stdout, *code)
	}
	h, err := newHandler(time.Now, *code)
	if err != nil {
		return err
	}
	lis, err := listen(*addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "MCP server on http://%s (streamable HTTP), throttled calls answer JSON-RPC code %d\n", lis.Addr(), *code)
	return serve(ctx, h, lis)
}

// listen listens on addr, naming the flag in its error.
func listen(addr string) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-addr %s: %w", addr, err)
	}
	return lis, nil
}

// serve serves h on lis until ctx ends.
func serve(ctx context.Context, h http.Handler, lis net.Listener) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		srv.Close()
	}()
	err := srv.Serve(lis)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

type textIn struct {
	Text string `json:"text" jsonschema:"the text to work on"`
}

// newServer returns the MCP server with its tools and the rate limits.
func newServer(now func() time.Time, code int) (*mcp.Server, error) {
	limits, err := stack.Load([]byte(config), stack.WithClock(sluice.ClockFunc(now)))
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

// stillClock is the demonstration's clock: it moves only when told to.
type stillClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stillClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stillClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// rpcClient speaks raw JSON-RPC to a streamable HTTP MCP endpoint.
type rpcClient struct {
	ctx      context.Context
	http     *http.Client
	endpoint string
	session  string
}

// post sends one JSON-RPC message and returns the answer's body.
func (c *rpcClient) post(body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, c.endpoint, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if id := res.Header.Get("Mcp-Session-Id"); id != "" {
		c.session = id
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if res.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s answered %s: %s", c.endpoint, res.Status, bytes.TrimSpace(b))
	}
	return bytes.TrimSpace(b), nil
}

// demo serves on a loopback port of its own, on a clock that stands still,
// and calls the tools as a client until throttled.
func demo(ctx context.Context, w io.Writer, code int) error {
	clock := &stillClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h, err := newHandler(clock.now, code)
	if err != nil {
		return err
	}
	lis, err := listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serve(ctx, h, lis) }()
	defer func() { cancel(); <-served }()
	c := &rpcClient{ctx: ctx, http: &http.Client{Timeout: 10 * time.Second}, endpoint: "http://" + lis.Addr().String()}
	defer c.http.CloseIdleConnections()
	fmt.Fprintf(w, "MCP server on %s (streamable HTTP), the clock standing still; readData 2 calls a second, other tools 1:\n", c.endpoint)

	if _, err := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}`); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if _, err := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`); err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	id := 0
	var retryAfter time.Duration
	call := func(tool, text string) error {
		id++
		req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
			"params": map[string]any{"name": tool, "arguments": map[string]string{"text": text}}})
		if err != nil {
			return err
		}
		b, err := c.post(string(req))
		if err != nil {
			return fmt.Errorf("tools/call %s: %w", tool, err)
		}
		var res struct {
			Result *struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"result"`
			Error *struct {
				Data struct {
					RetryAfter float64 `json:"retryAfter"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &res); err != nil {
			return fmt.Errorf("tools/call %s: %w in %s", tool, err, b)
		}
		switch {
		case res.Error != nil:
			retryAfter = time.Duration(res.Error.Data.RetryAfter * float64(time.Second))
			fmt.Fprintf(w, "call %d, %s(%q): throttled\n  %s\n", id, tool, text, b)
		case res.Result != nil && len(res.Result.Content) > 0:
			fmt.Fprintf(w, "call %d, %s(%q): %q\n", id, tool, text, res.Result.Content[0].Text)
		default:
			return fmt.Errorf("tools/call %s: unexpected answer %s", tool, b)
		}
		return nil
	}
	for _, tc := range [][2]string{{"readData", "a"}, {"readData", "b"}, {"readData", "c"}, {"upper", "d"}, {"upper", "e"}} {
		if err := call(tc[0], tc[1]); err != nil {
			return err
		}
	}
	if retryAfter <= 0 {
		return errors.New("no call was throttled")
	}
	clock.add(retryAfter)
	fmt.Fprintf(w, "(the clock moves %v on, as retryAfter asked)\n", retryAfter.Round(time.Millisecond))
	return call("readData", "f")
}

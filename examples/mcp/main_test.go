package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/mcplimit"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestWire speaks raw JSON-RPC over HTTP to the running server, as any MCP
// client would, and checks the throttled response byte for byte.
func TestWire(t *testing.T) {
	h, err := newHandler(func() time.Time { return t0 }, slerrors.DefaultJSONRPCCode)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	session := ""
	post := func(body string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if id := res.Header.Get("Mcp-Session-Id"); id != "" {
			session = id
		}
		b, _ := io.ReadAll(res.Body)
		return string(bytes.TrimSpace(b))
	}
	post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	post(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	call := func(id, tool string) string {
		return post(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"text":"hi"}}}`)
	}
	for i := range 2 {
		if got := call("1", "readData"); !strings.Contains(got, `"text":"hi"`) {
			t.Fatalf("readData call %d: %s", i, got)
		}
	}
	want := `{"jsonrpc":"2.0","id":"request-1","error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":"per-tool/targetName=my-target,toolName=readData","metric":"requests","retryAfter":1}}}`
	if got := call(`"request-1"`, "readData"); got != want {
		t.Errorf("third readData:\n got %s\nwant %s", got, want)
	}
	// upper has its own (my-target, *) bucket: 1 per second.
	if got := call("2", "upper"); !strings.Contains(got, `"text":"HI"`) {
		t.Errorf("upper: %s", got)
	}
	if got := call("3", "upper"); !strings.Contains(got, `"id":3,"error":{"code":-32003,`) || !strings.Contains(got, `toolName=upper`) {
		t.Errorf("second upper: %s", got)
	}
}

// TestGoClient uses the Go SDK's client over streamable HTTP, with the code
// a Go client can read (the SDK keeps -32003 for itself).
func TestGoClient(t *testing.T) {
	h, err := newHandler(func() time.Time { return t0 }, 429)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: srv.Client()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var throttled []mcplimit.ErrorData
	for range 3 {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "upper", Arguments: map[string]any{"text": "x"}})
		if d, ok := mcplimit.ParseError(err, 429); ok {
			throttled = append(throttled, d)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if len(throttled) != 2 || throttled[0].LimitKey != "per-tool/targetName=my-target,toolName=upper" || throttled[0].RetryAfter != 1 {
		t.Errorf("throttled calls: %+v, want 2 with retryAfter 1", throttled)
	}
}

// Without flags the example serves on a port of its own and calls its
// tools until throttled, printing the JSON-RPC error, and is served again
// once its clock has moved on by retryAfter.
func TestDefaultRun(t *testing.T) {
	var out strings.Builder
	if err := runArgs(context.Background(), nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []string{
		"call 2, readData(\"b\"): \"b\"\ncall 3, readData(\"c\"): throttled\n" +
			`  {"jsonrpc":"2.0","id":3,"error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":"per-tool/targetName=my-target,toolName=readData","metric":"requests","retryAfter":1}}}` + "\n",
		"call 4, upper(\"d\"): \"D\"\ncall 5, upper(\"e\"): throttled\n",
		"(the clock moves 1s on, as retryAfter asked)\ncall 6, readData(\"f\"): \"f\"\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	out.Reset()
	if err := runArgs(context.Background(), []string{"-code", "429"}, &out, io.Discard); err != nil || !strings.Contains(out.String(), `"error":{"code":429,`) {
		t.Errorf("-code 429: %v\n%s", err, out.String())
	}
}

func TestFlagsOutOfRange(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-code", "0"}, "-code 0:"},
		{[]string{"-code", "4294967296"}, "-code 4294967296:"},
		{[]string{"-addr", busy.Addr().String()}, "-addr " + busy.Addr().String() + ":"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var out strings.Builder
		err := runArgs(context.Background(), tc.args, &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") || out.Len() != 0 {
			t.Errorf("%q: error %v (printed %q), want one line naming %q", tc.args, err, out.String(), tc.want)
		}
	}
}

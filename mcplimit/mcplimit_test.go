package mcplimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/mcplimit"
	"github.com/sluicehq/sluice/stack/limitertest"
)

type echoIn struct {
	Text string `json:"text"`
}

func newServer(mw mcp.Middleware) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "my-target", Version: "v1"}, nil)
	for _, name := range []string{"readData", "writeData"} {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: name}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ":" + in.Text}}}, nil, nil
		})
	}
	s.AddReceivingMiddleware(mw)
	return s
}

// connect runs server and a client over the SDK's in-memory transports.
func connect(t *testing.T, s *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "v1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(cs *mcp.ClientSession, tool string) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "x"}})
}

func TestLimitsPerTool(t *testing.T) {
	lim, clock := limitertest.NewPerValue("toolName", 1, 2*time.Second)
	var seen []string
	lim2 := sluice.LimiterFunc(func(ctx context.Context, k sluice.Keys) (sluice.Decision, error) {
		seen = append(seen, k.String())
		return lim.Allow(ctx, k)
	})
	// The Go SDK's client reads -32003 as "client is closing" (see
	// TestGoClientMisreadsDefaultCode), so Go clients need another code.
	cs := connect(t, newServer(mcplimit.Middleware(lim2, mcplimit.ToolKeys("my-target"), mcplimit.WithJSONRPCCode(429))))

	if res, err := call(cs, "readData"); err != nil || res.Content[0].(*mcp.TextContent).Text != "readData:x" {
		t.Fatalf("first call: %v %v", res, err)
	}
	_, err := call(cs, "readData")
	data, ok := mcplimit.ParseError(err, 429)
	if !ok {
		t.Fatalf("second call: %v, want the rate-limit error", err)
	}
	want := mcplimit.ErrorData{LimitKey: "per-toolName/toolName=readData", Metric: "requests", RetryAfter: 2}
	if data != want {
		t.Errorf("data %+v, want %+v", data, want)
	}
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != 429 || we.Message != "Rate limit exceeded" {
		t.Errorf("error %#v", we)
	}
	if _, err := call(cs, "writeData"); err != nil {
		t.Errorf("writeData limited by readData's bucket: %v", err)
	}
	for range 5 {
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatalf("tools/list limited: %v", err)
		}
	}
	if len(seen) != 3 || seen[0] != "targetName=my-target,toolName=readData" {
		t.Errorf("limiter saw %v, want only the three tool calls", seen)
	}
	clock.Advance(2 * time.Second)
	if _, err := call(cs, "readData"); err != nil {
		t.Errorf("throttled after waiting retryAfter: %v", err)
	}
}

func TestKeysCodeAndFailure(t *testing.T) {
	tool := mcplimit.ToolKeys("my-target")
	byCaller := mcplimit.KeyFunc(func(ctx context.Context, req *mcp.CallToolRequest) (sluice.Keys, error) {
		k, _ := tool(ctx, req)
		var in echoIn
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.Text == "bad" {
			return k, errors.New("no caller")
		}
		k.Set("caller", in.Text)
		return k, nil
	})
	lim, _ := limitertest.NewPerValue("caller", 1, time.Second)
	var observed []error // the handlers run on the server's goroutines, one call at a time here
	cs := connect(t, newServer(mcplimit.Middleware(lim, byCaller, mcplimit.WithJSONRPCCode(-32050), mcplimit.WithErrorHandler(func(err error) { observed = append(observed, err) }))))
	callAs := func(caller string) error {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "readData", Arguments: map[string]any{"text": caller}})
		return err
	}
	if err := callAs("alice"); err != nil {
		t.Fatal(err)
	}
	if err := callAs("bob"); err != nil {
		t.Errorf("bob limited by alice: %v", err)
	}
	err := callAs("alice")
	if d, ok := mcplimit.ParseError(err, -32050); !ok || d.LimitKey != "per-caller/caller=alice" {
		t.Errorf("custom code: %v (%+v)", err, d)
	}
	var we *jsonrpc.Error
	if err := callAs("bad"); !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("key error: %v", err)
	}
	if len(observed) != 1 || !strings.Contains(observed[0].Error(), "no caller") {
		t.Errorf("error handler observed %v, want the key error", observed)
	}

	broken := sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) {
		return sluice.Decision{}, errors.New("backend down")
	})
	var limiterErrs []error
	closed := connect(t, newServer(mcplimit.Middleware(broken, mcplimit.ToolKeys("t"), mcplimit.WithErrorHandler(func(err error) { limiterErrs = append(limiterErrs, err) }))))
	if _, err := call(closed, "readData"); !errors.As(err, &we) || we.Code != jsonrpc.CodeInternalError {
		t.Errorf("limiter error: %v, want code %d", err, jsonrpc.CodeInternalError)
	}
	if len(limiterErrs) != 1 || !strings.Contains(limiterErrs[0].Error(), "backend down") {
		t.Errorf("error handler observed %v, want the limiter's error", limiterErrs)
	}
}

// TestWireShape speaks raw JSON-RPC to the SDK's streamable HTTP handler and
// checks that the throttled response is the gateway's, byte for byte, with
// the request's id echoed.
func TestWireShape(t *testing.T) {
	lim, _ := limitertest.NewPerValue("toolName", 1, time.Second)
	s := newServer(mcplimit.Middleware(lim, mcplimit.ToolKeys("my-target")))
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	defer srv.Close()

	session := ""
	post := func(body string) (int, string) {
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
		return res.StatusCode, string(bytes.TrimSpace(b))
	}
	if code, body := post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`); code != 200 {
		t.Fatalf("initialize: %d %s", code, body)
	}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	callBody := `{"jsonrpc":"2.0","id":"request-1","method":"tools/call","params":{"name":"readData","arguments":{"text":"x"}}}`
	if code, body := post(callBody); code != 200 || !strings.Contains(body, `"result"`) {
		t.Fatalf("first call: %d %s", code, body)
	}
	code, body := post(callBody)
	want := `{"jsonrpc":"2.0","id":"request-1","error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":"per-toolName/toolName=readData","metric":"requests","retryAfter":1}}}`
	if code != 200 || body != want {
		t.Errorf("throttled call: %d\n got %s\nwant %s", code, body, want)
	}
	code, body = post(strings.Replace(callBody, `"request-1"`, `42`, 1))
	if !strings.HasPrefix(body, `{"jsonrpc":"2.0","id":42,"error":{"code":-32003,`) {
		t.Errorf("numeric id: %d %s", code, body)
	}
}

// TestGoClientMisreadsDefaultCode pins down a clash in the Go SDK v1.8.0:
// its client maps any error with code -32003 to its own "client is closing"
// error and drops the data, so a Go client cannot read retryAfter from the
// gateway's default code. The session itself stays usable. If this test
// starts failing, the SDK has fixed the clash and the advice in the package
// documentation can go.
func TestGoClientMisreadsDefaultCode(t *testing.T) {
	lim, _ := limitertest.NewPerValue("toolName", 1, time.Second)
	cs := connect(t, newServer(mcplimit.Middleware(lim, mcplimit.ToolKeys("my-target"))))
	if _, err := call(cs, "readData"); err != nil {
		t.Fatal(err)
	}
	_, err := call(cs, "readData")
	if !errors.Is(err, mcp.ErrConnectionClosed) {
		t.Fatalf("err %v: the SDK no longer misreads -32003", err)
	}
	if _, ok := mcplimit.ParseError(err, 0); ok {
		t.Error("ParseError claims data the SDK dropped")
	}
	if _, err := call(cs, "writeData"); err != nil {
		t.Errorf("session unusable after the throttled call: %v", err)
	}
}

package errors_test

import (
	"fmt"
	"net/http/httptest"
	"time"

	slerrors "github.com/sluicehq/sluice/errors"
)

func ExampleResponse() {
	e := &slerrors.ThrottledError{
		LimitID:    "rl-abc123",
		LimitKey:   "rl-abc123/targetName=my-target",
		Metric:     "requests",
		RetryAfter: 250 * time.Millisecond,
		Limit:      10, Remaining: 0, Window: 10 * time.Second,
	}
	rec := httptest.NewRecorder()
	_ = slerrors.Response{Format: slerrors.HTTPJSON}.Write(rec, e)
	fmt.Println(rec.Code)
	fmt.Println("Retry-After:", rec.Header().Get("Retry-After"))
	fmt.Println("retry-after-ms:", rec.Header().Get("retry-after-ms"))
	fmt.Println("RateLimit-Policy:", rec.Header().Get("RateLimit-Policy"))
	fmt.Println("RateLimit:", rec.Header().Get("RateLimit"))
	fmt.Println(rec.Body.String())
	// Output:
	// 429
	// Retry-After: 1
	// retry-after-ms: 250
	// RateLimit-Policy: "rl-abc123";q=10;w=10
	// RateLimit: "rl-abc123";r=0;t=1
	// {"error":"Rate limit exceeded","success":false,"limitKey":"rl-abc123/targetName=my-target","metric":"requests","retryAfter":1}
}

// The JSON-RPC body echoes the request's id when it is one, and null
// otherwise; Code replaces the default -32003.
func ExampleResponse_jsonrpc() {
	e := &slerrors.ThrottledError{LimitKey: "rl-abc123/targetName=my-target", Metric: "requests", RetryAfter: time.Second}
	fmt.Println(string(slerrors.Response{Format: slerrors.JSONRPC, ID: []byte(`"request-1"`)}.Marshal(e)))
	fmt.Println(string(slerrors.Response{Format: slerrors.JSONRPC, ID: []byte(`{"not":"an id"}`), Code: -32050}.Marshal(e)))
	// Output:
	// {"jsonrpc":"2.0","id":"request-1","error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":"rl-abc123/targetName=my-target","metric":"requests","retryAfter":1}}}
	// {"jsonrpc":"2.0","id":null,"error":{"code":-32050,"message":"Rate limit exceeded","data":{"limitKey":"rl-abc123/targetName=my-target","metric":"requests","retryAfter":1}}}
}

// The bodies OpenAI's, Anthropic's and AWS's SDKs read; a permanent denial
// says that no wait helps.
func ExampleFormat() {
	e := &slerrors.ThrottledError{LimitKey: "rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet", Metric: "tokens", RetryAfter: 59500 * time.Millisecond}
	for _, f := range []slerrors.Format{slerrors.OpenAI, slerrors.Anthropic, slerrors.AWS} {
		fmt.Println(f.Status(), string(slerrors.Response{Format: f}.Marshal(e)))
	}
	e.Permanent = true
	fmt.Println(string(slerrors.Response{}.Marshal(e)))
	// Output:
	// 429 {"error":{"message":"Rate limit exceeded","type":"rate_limit_error","code":"429","limitKey":"rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet","metric":"tokens","retryAfter":60}}
	// 429 {"type":"error","error":{"type":"rate_limit_error","message":"Rate limit exceeded","limitKey":"rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet","metric":"tokens","retryAfter":60}}
	// 400 {"__type":"ThrottlingException","message":"Rate exceeded","limitKey":"rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet","metric":"tokens","retryAfter":60}
	// {"error":"Rate limit exceeded","success":false,"limitKey":"rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet","metric":"tokens","permanent":true}
}

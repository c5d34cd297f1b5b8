package errors_test

import (
	"fmt"
	"net/http/httptest"
	"time"

	slerrors "github.com/sluicehq/sluice/errors"
)

func ExampleFormat_Write() {
	e := &slerrors.ThrottledError{
		LimitID:    "rl-abc123",
		LimitKey:   "rl-abc123/targetName=my-target",
		Metric:     "requests",
		RetryAfter: 250 * time.Millisecond,
		Limit:      10, Remaining: 0, Window: 10 * time.Second,
	}
	rec := httptest.NewRecorder()
	_ = slerrors.HTTPJSON.Write(rec, e)
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

func ExampleAppendJSONRPC() {
	e := &slerrors.ThrottledError{LimitKey: "rl-abc123/targetName=my-target", Metric: "requests", RetryAfter: time.Second}
	fmt.Println(string(slerrors.AppendJSONRPC(nil, e, []byte(`"request-1"`), slerrors.DefaultJSONRPCCode)))
	fmt.Println(string(slerrors.AppendJSONRPC(nil, e, []byte(`{"not":"an id"}`), -32050)))
	// Output:
	// {"jsonrpc":"2.0","id":"request-1","error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":"rl-abc123/targetName=my-target","metric":"requests","retryAfter":1}}}
	// {"jsonrpc":"2.0","id":null,"error":{"code":-32050,"message":"Rate limit exceeded","data":{"limitKey":"rl-abc123/targetName=my-target","metric":"requests","retryAfter":1}}}
}

func ExampleAppendOpenAI() {
	e := &slerrors.ThrottledError{LimitKey: "rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet", Metric: "tokens", RetryAfter: 59500 * time.Millisecond}
	fmt.Println(string(slerrors.AppendOpenAI(nil, e)))
	fmt.Println(string(slerrors.AppendAnthropic(nil, e)))
	fmt.Println(string(slerrors.AppendAWS(nil, e)))
	// Output:
	// {"error":{"message":"Rate limit exceeded","type":"rate_limit_error","code":"429","limitKey":"rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet","metric":"tokens","retryAfter":60}}
	// {"type":"error","error":{"type":"rate_limit_error","message":"Rate limit exceeded","limitKey":"rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet","metric":"tokens","retryAfter":60}}
	// {"__type":"ThrottlingException","message":"Rate exceeded","limitKey":"rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet","metric":"tokens","retryAfter":60}
}

package errors_test

import (
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
)

// A denied sluice.Decision becomes a complete response in one call, here
// Anthropic-compatible: status, retry headers and body.
func ExampleResponse_Write() {
	d := sluice.Decision{
		LimitID: "tpm", LimitKey: "tpm/qualifiedModelId=claude", Metric: "tokens",
		RetryAfter: 1500 * time.Millisecond, Limit: 1000, Window: time.Minute,
	}
	rec := httptest.NewRecorder()
	if err := (slerrors.Response{Format: slerrors.Anthropic}).Write(rec, d.Err()); err != nil {
		panic(err)
	}
	fmt.Println(rec.Code, "Retry-After:", rec.Header().Get("Retry-After"), "retry-after-ms:", rec.Header().Get("retry-after-ms"))
	fmt.Println(rec.Body.String())
	// Output:
	// 429 Retry-After: 2 retry-after-ms: 1500
	// {"type":"error","error":{"type":"rate_limit_error","message":"Rate limit exceeded","limitKey":"tpm/qualifiedModelId=claude","metric":"tokens","retryAfter":2}}
}

// The JSON-RPC body echoes the request's id; an allowed decision renders
// nothing.
func ExampleResponse_Marshal() {
	denied := sluice.Decision{LimitKey: "rl-abc123/targetName=my-target", Metric: "requests", RetryAfter: 350 * time.Millisecond}
	r := slerrors.Response{Format: slerrors.JSONRPC, ID: []byte(`"request-1"`)}
	fmt.Println(string(r.Marshal(denied.Err())))
	fmt.Println(r.Marshal(sluice.Decision{Allowed: true}.Err()) == nil)
	// Output:
	// {"jsonrpc":"2.0","id":"request-1","error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":"rl-abc123/targetName=my-target","metric":"requests","retryAfter":1}}}
	// true
}

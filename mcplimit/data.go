package mcplimit

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	slerrors "github.com/sluicehq/sluice/errors"
)

// ErrorData is the data member of the throttled JSON-RPC error.
type ErrorData struct {
	LimitKey string `json:"limitKey"`
	Metric   string `json:"metric"`
	// RetryAfter is the wait before a retry can succeed, in whole seconds
	// rounded up (at least 1); 0 on a permanent denial.
	RetryAfter int64 `json:"retryAfter,omitempty"`
	// Permanent is set on a denial that no wait cures (the call's cost is
	// over the limit's burst, or the limit is 0): retrying cannot succeed.
	Permanent bool `json:"permanent,omitempty"`
}

// dataMember precedes the data member of errors' JSON-RPC body.
var dataMember = []byte(`"data":`)

// errorData returns the data member of the JSON-RPC body slerrors.Response
// renders for te, byte for byte. The body is
// {"jsonrpc":"2.0","id":null,"error":{"code":…,"message":"…","data":{…}}}:
// before the data member it holds no text of the request's (a null id, the
// code, a constant message), so the first "data": is the member's, and the
// body ends with the member and two braces.
func errorData(te *slerrors.ThrottledError) json.RawMessage {
	body := slerrors.Response{Format: slerrors.JSONRPC}.Append(make([]byte, 0, 192), te)
	i := bytes.Index(body, dataMember)
	return body[i+len(dataMember) : len(body)-2]
}

// ParseError returns the data of a throttled tool call's error as an MCP
// client receives it: the limit key, the metric and the whole seconds to
// wait before retrying. ok is false when err is not a JSON-RPC error with
// code (0 means slerrors.DefaultJSONRPCCode) and that data.
func ParseError(err error, code int) (data ErrorData, ok bool) {
	if code == 0 {
		code = slerrors.DefaultJSONRPCCode
	}
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != int64(code) {
		return ErrorData{}, false
	}
	var d ErrorData
	if json.Unmarshal(we.Data, &d) != nil {
		return ErrorData{}, false
	}
	return d, true
}

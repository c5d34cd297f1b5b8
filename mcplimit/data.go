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

// errorData renders the ErrorData of te as the errors package renders the
// data member of its JSON-RPC body: the same members, in the same order,
// with the same values (and, as there, no HTML escaping).
func errorData(te *slerrors.ThrottledError) json.RawMessage {
	if te == nil {
		te = &slerrors.ThrottledError{}
	}
	d := ErrorData{LimitKey: te.LimitKey, Metric: te.Metric, Permanent: te.Permanent}
	if !te.Permanent {
		d.RetryAfter = te.RetryAfterSeconds()
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(d) // a struct of strings and numbers: cannot fail
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
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

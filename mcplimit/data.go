package mcplimit

import (
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	slerrors "github.com/sluicehq/sluice/errors"
)

// ErrorData is the data member of the throttled JSON-RPC error.
type ErrorData struct {
	LimitKey   string `json:"limitKey"`
	Metric     string `json:"metric"`
	RetryAfter int64  `json:"retryAfter"` // whole seconds, rounded up
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

package mcplimit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/mcplimit"
)

// TestOptionsNotGiven walks every option with the values the option rule
// calls "not given" (0 for the code, nil): none panics, and the middleware
// keeps the defaults: a throttled call carries DefaultJSONRPCCode, a
// limiter error fails the call with -32603. Middleware has no error result: no
// option can be wrong in another way (a negative code is a JSON-RPC code).
func TestOptionsNotGiven(t *testing.T) {
	broken := sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) {
		return sluice.Decision{}, errors.New("backend down")
	})
	for name, o := range map[string]mcplimit.Option{
		"nil Option":            nil,
		"WithJSONRPCCode(0)":    mcplimit.WithJSONRPCCode(0),
		"WithErrorHandler(nil)": mcplimit.WithErrorHandler(nil),
	} {
		t.Run(name, func(t *testing.T) {
			cs := connect(t, newServer(mcplimit.Middleware(sluice.Deny, mcplimit.ToolKeys("t"), o)))
			// The Go SDK's client reads -32003, the default code, as
			// ErrConnectionClosed (TestGoClientMisreadsDefaultCode): that is
			// how the default shows here.
			if _, err := call(cs, "readData"); !errors.Is(err, mcp.ErrConnectionClosed) {
				t.Errorf("throttled call: %v, want code %d", err, slerrors.DefaultJSONRPCCode)
			}
			closed := connect(t, newServer(mcplimit.Middleware(broken, mcplimit.ToolKeys("t"), o)))
			var we *jsonrpc.Error
			if _, err := call(closed, "readData"); !errors.As(err, &we) || we.Code != jsonrpc.CodeInternalError {
				t.Errorf("limiter error: %v, want code %d", err, jsonrpc.CodeInternalError)
			}
		})
	}
	// 0 after another code keeps it: it is not given.
	cs := connect(t, newServer(mcplimit.Middleware(sluice.Deny, mcplimit.ToolKeys("t"), mcplimit.WithJSONRPCCode(-32050), mcplimit.WithJSONRPCCode(0))))
	var we *jsonrpc.Error
	if _, err := call(cs, "readData"); !errors.As(err, &we) || we.Code != -32050 {
		t.Errorf("WithJSONRPCCode(-32050), then 0: %v, want -32050", err)
	}
}

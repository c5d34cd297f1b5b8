// Package mcplimit rate-limits the tool calls of an MCP server.
//
// It is middleware for servers built on the
// official Go SDK (github.com/modelcontextprotocol/go-sdk), limiting the way the
// gateway does: each tools/call is checked against a sluice.Limiter with
// the keys targetName (the server) and toolName (the tool), and a throttled
// call fails with the gateway's JSON-RPC error:
//
//	{"jsonrpc":"2.0","id":…,"error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":…,"metric":"requests","retryAfter":1}}}
//
// The SDK echoes the request's id. Other methods (initialize, tools/list, …)
// are not limited.
//
// # The -32003 clash
//
// The default code, -32003, is the gateway's, for clients written against
// it. The Go SDK's own client (v1.8.0) uses -32003 internally for "client is
// closing": it turns such an error into mcp.ErrConnectionClosed and drops
// the data, although the session stays usable. A server whose clients use
// the Go SDK should pass WithJSONRPCCode with a code outside
// -32768..-32000 (the MCP specification also asks implementations not to
// allocate codes in -32000..-32099), for instance 429.
//
// # When the limiter cannot decide
//
// A Limiter error means "could not decide": the tool call fails with
// JSON-RPC code -32603 (internal error) and the tool does not run. Whether
// a failed backend is such an error is the policy of the engine that talks
// to it, set there once: a stack.Stack over a Backend fails open by default
// (it admits and returns no error, so calls pass) and fails closed with
// stack.WithFailClosed (it returns the error, so every call fails).
package mcplimit

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
)

// Dimension names of the keys every tool call gets, as the gateway names
// them.
const (
	DimTargetName = "targetName"
	DimToolName   = "toolName"
)

// KeyFunc resolves the rate-limit keys of a tool call (req.Params is never
// nil). ToolKeys gives the gateway's keys; a KeyFunc of your own can start
// from them and add the caller (from req.Extra.TokenInfo or
// req.Extra.Header) with Keys.With. An error fails the call with JSON-RPC
// code -32602 (invalid params) without asking the Limiter; the error
// handler (WithErrorHandler) observes it.
type KeyFunc func(ctx context.Context, req *mcp.CallToolRequest) (sluice.Keys, error)

// ToolKeys returns the KeyFunc of the gateway's keys: targetName = target
// (the server's name) and toolName = the called tool.
func ToolKeys(target string) KeyFunc {
	return func(_ context.Context, req *mcp.CallToolRequest) (sluice.Keys, error) {
		return sluice.NewKeys(DimTargetName, target, DimToolName, req.Params.Name), nil
	}
}

type config struct {
	code    int64
	onError func(error)
}

// Option configures Middleware.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithJSONRPCCode sets the error code of a throttled call. 0 means the
// default, slerrors.DefaultJSONRPCCode (-32003, the gateway's); any other
// code is used as given, negative ones included (JSON-RPC's codes are
// negative; the MCP specification reserves -32000..-32099, so pick another
// if -32003 clashes).
func WithJSONRPCCode(code int) Option {
	return optionFunc(func(c *config) {
		if code != 0 {
			c.code = int64(code)
		}
	})
}

// WithErrorHandler sets a function that observes every error the
// middleware handles without returning it to you: the Limiter's (the call
// then fails with -32603) and the KeyFunc's, for logs and metrics. It must be safe for concurrent use and quick. nil means the
// default: no handler.
func WithErrorHandler(f func(error)) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.onError = f
		}
	})
}

// Middleware returns receiving middleware for mcp.Server.AddReceivingMiddleware
// that limits tools/call requests with l, under the keys that keys resolves
// (ToolKeys(target) for the gateway's). Calls are admitted through a
// sluice.Admitter: when l is a sluice.SlotReserver (a stack is) each call is
// admitted with ReserveSlots, and when it is only a sluice.Reserver with
// Reserve, so connections limits bound the tool calls in flight.
//
// It panics, at construction, when l or keys is nil (a programming error;
// the message names the argument): the keys are what select a call's
// limits, and the gateway's need the server's name, so there is no default
// (ToolKeys(target) gives them). A nil Option is ignored.
func Middleware(l sluice.Limiter, keys KeyFunc, opts ...Option) mcp.Middleware {
	if l == nil {
		panic("mcplimit: Middleware: the Limiter l is nil")
	}
	if keys == nil {
		panic("mcplimit: Middleware: the KeyFunc keys is nil")
	}
	c := config{code: slerrors.DefaultJSONRPCCode}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	adm := sluice.NewAdmitter(l)
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			call, ok := req.(*mcp.CallToolRequest)
			if !ok || method != "tools/call" || call.Params == nil {
				return next(ctx, method, req)
			}
			k, err := keys(ctx, call)
			if err != nil {
				err = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "mcplimit: resolving rate-limit keys: " + err.Error()}
				if c.onError != nil {
					c.onError(err)
				}
				return nil, err
			}
			// A stack holds connections slots for the length of the tool
			// call; they are released when it returns.
			slots, d, err := adm.Admit(ctx, k)
			if err != nil {
				if c.onError != nil {
					c.onError(fmt.Errorf("mcplimit: rate limiter failed: %w", err))
				}
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcplimit: rate limiter failed: " + err.Error()}
			}
			if !d.Allowed {
				te, _ := slerrors.AsThrottled(d.Err())
				return nil, Error(te, int(c.code))
			}
			if slots.Held() {
				defer slots.Reconcile(0) // also on panic
			}
			return next(ctx, method, req)
		}
	}
}

// Error returns the JSON-RPC error of a throttled call: code (0 means
// slerrors.DefaultJSONRPCCode), message "Rate limit exceeded" and the
// ErrorData {"limitKey","metric","retryAfter"}, or, for a permanent denial
// (no wait helps), {"limitKey","metric","permanent":true}: the data member
// of the body slerrors.Response writes in the JSONRPC format, byte for
// byte. A nil te gives the data of a denial that names no limit.
func Error(te *slerrors.ThrottledError, code int) *jsonrpc.Error {
	if code == 0 {
		code = slerrors.DefaultJSONRPCCode
	}
	return &jsonrpc.Error{
		Code:    int64(code),
		Message: slerrors.Message,
		Data:    errorData(te),
	}
}

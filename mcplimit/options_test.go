package mcplimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

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

// Error's data is the data member of the JSON-RPC body slerrors.Response
// writes, byte for byte, for names that need escaping and for permanent
// denials; ParseError reads it back.
func TestErrorDataIsTheResponses(t *testing.T) {
	for _, key := range []string{"rl/targetName=my-target", `q"uote\back`, "ctl\x00\x08\x0c\n", "\u2028<&>", "bad\xffutf8"} {
		for _, permanent := range []bool{false, true} {
			te := &slerrors.ThrottledError{LimitKey: key, Metric: "tokens", RetryAfter: 1500 * time.Millisecond, Permanent: permanent}
			var body struct {
				Error struct {
					Data json.RawMessage `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(slerrors.Response{Format: slerrors.JSONRPC}.Marshal(te), &body); err != nil {
				t.Fatal(err)
			}
			got := mcplimit.Error(te, 0).Data
			if !json.Valid(got) || !bytes.Equal(got, body.Error.Data) || !sameMembers(t, got, body.Error.Data) {
				t.Errorf("%q permanent=%v: data %s, want the Response's %s", key, permanent, got, body.Error.Data)
			}
			if d, ok := mcplimit.ParseError(mcplimit.Error(te, 0), 0); !ok || d.Permanent != permanent || (d.RetryAfter == 2) == permanent {
				t.Errorf("%q permanent=%v: ParseError = %+v, %v", key, permanent, d, ok)
			}
		}
	}
}

// A nil ThrottledError gives the data of a denial that names no limit.
func TestErrorOfNil(t *testing.T) {
	if got, want := string(mcplimit.Error(nil, 0).Data), `{"limitKey":"","metric":"","retryAfter":1}`; got != want {
		t.Errorf("Error(nil, 0).Data = %s, want %s", got, want)
	}
}

// sameMembers reports whether two JSON objects have the same members, in
// the same order, with the same values.
func sameMembers(t *testing.T, a, b []byte) bool {
	t.Helper()
	members := func(raw []byte) []any {
		dec := json.NewDecoder(bytes.NewReader(raw))
		var out []any
		for {
			tok, err := dec.Token()
			if err != nil {
				return out
			}
			out = append(out, tok)
		}
	}
	return reflect.DeepEqual(members(a), members(b))
}

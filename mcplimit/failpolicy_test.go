package mcplimit_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/mcplimit"
	"github.com/sluicehq/sluice/stack"
)

// downBackend is a stack.Backend whose every call fails, as one whose
// store is unreachable does.
type downBackend struct{ calls atomic.Int32 }

func (b *downBackend) Take(context.Context, time.Time, []stack.Op) (stack.Outcome, error) {
	b.calls.Add(1)
	return stack.Outcome{}, errors.New("backend unreachable")
}

func (b *downBackend) Adjust(context.Context, time.Time, []stack.Op) error {
	b.calls.Add(1)
	return errors.New("backend unreachable")
}

// One call a minute per tool: a Backend that worked would deny from the
// second call.
const failPolicyConfig = `{"rateLimits":[
 {"rateLimitId":"per-tool","dimensionKeys":["toolName"],"entries":[{"dimensions":{"toolName":"*"},
  "requests":[{"rate":1,"period":"minute"}]}]}]}`

// The failure policy is the Stack's, set once: over a Backend that fails
// every call, a Stack with stack.WithFailClosed returns the error and the
// middleware fails every tool call with -32603 (the tool never runs);
// without it the Stack admits and returns no error, and every call passes.
func TestFailurePolicyIsTheStacks(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       []stack.Option
		wantFailed bool
	}{
		{"stack.WithFailClosed", []stack.Option{stack.WithFailClosed()}, true},
		{"default", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &downBackend{}
			st, err := stack.Load([]byte(failPolicyConfig), append([]stack.Option{stack.WithBackend(b)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			cs := connect(t, newServer(mcplimit.Middleware(st, mcplimit.ToolKeys("my-target"))))
			for i := range 5 {
				res, err := call(cs, "readData")
				if tc.wantFailed {
					var we *jsonrpc.Error
					if !errors.As(err, &we) || we.Code != jsonrpc.CodeInternalError || res != nil {
						t.Fatalf("call %d: %v, %v; want code %d and no result", i, res, err, jsonrpc.CodeInternalError)
					}
					continue
				}
				if err != nil || res == nil || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "readData:x" {
					t.Fatalf("call %d: %v, %v; want the tool's answer", i, res, err)
				}
			}
			if b.calls.Load() < 5 {
				t.Errorf("the Backend was asked %d times; every call must ask it", b.calls.Load())
			}
		})
	}
}

// A nil Limiter or KeyFunc is a programming error, caught at construction
// by a panic that names the argument.
func TestMiddlewarePanicsOnNil(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    sluice.Limiter
		keys mcplimit.KeyFunc
		want string
	}{
		{"nil Limiter", nil, mcplimit.ToolKeys("t"), "Limiter l"},
		{"nil KeyFunc", sluice.Unlimited, nil, "KeyFunc keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				p, _ := recover().(string)
				if !strings.Contains(p, tc.want) {
					t.Errorf("panic %q, want one naming %q", p, tc.want)
				}
			}()
			mcplimit.Middleware(tc.l, tc.keys)
		})
	}
}

package grpclimit_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/stack"
)

// downBackend is a stack.Backend whose every call fails, as one whose
// store is unreachable does.
type downBackend struct{ calls atomic.Int32 }

var errDown = errors.New("backend unreachable")

func (b *downBackend) Take(context.Context, time.Time, []stack.Op) (stack.Outcome, error) {
	b.calls.Add(1)
	return stack.Outcome{}, errDown
}

func (b *downBackend) Adjust(context.Context, time.Time, []stack.Op) error {
	b.calls.Add(1)
	return errDown
}

// One call a minute per method: a Backend that worked would deny from the
// second call.
const failPolicyConfig = `{"rateLimits":[
 {"rateLimitId":"per-method","dimensionKeys":["method"],"entries":[{"dimensions":{"method":"*"},
  "requests":[{"rate":1,"period":"minute"}]}]}]}`

// The failure policy is the Stack's, set once: over a Backend that fails
// every call, a Stack with stack.WithFailClosed returns the error and the
// interceptors refuse every call with Unavailable (the handler never
// runs); without it the Stack admits and returns no error, and every call
// passes.
func TestFailurePolicyIsTheStacks(t *testing.T) {
	info := &grpc.UnaryServerInfo{FullMethod: "/pkg.Svc/Call"}
	sinfo := &grpc.StreamServerInfo{FullMethod: "/pkg.Svc/Stream"}
	for _, tc := range []struct {
		name     string
		opts     []stack.Option
		wantCode codes.Code
		wantRuns int32
	}{
		{"stack.WithFailClosed", []stack.Option{stack.WithFailClosed()}, codes.Unavailable, 0},
		{"default", nil, codes.OK, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &downBackend{}
			st, err := stack.Load([]byte(failPolicyConfig), append([]stack.Option{stack.WithBackend(b)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int32
			unary := grpclimit.UnaryServerInterceptor(st, grpclimit.MethodKey("method"))
			stream := grpclimit.StreamServerInterceptor(st, grpclimit.MethodKey("method"))
			for i := range 5 {
				_, err := unary(context.Background(), nil, info, func(context.Context, any) (any, error) { runs.Add(1); return "ok", nil })
				if status.Code(err) != tc.wantCode {
					t.Fatalf("unary call %d: %v, want %v", i, err, tc.wantCode)
				}
				err = stream(nil, fakeStream{}, sinfo, func(any, grpc.ServerStream) error { runs.Add(1); return nil })
				if status.Code(err) != tc.wantCode {
					t.Fatalf("stream %d: %v, want %v", i, err, tc.wantCode)
				}
			}
			if runs.Load() != tc.wantRuns {
				t.Errorf("the handlers ran %d times, want %d", runs.Load(), tc.wantRuns)
			}
			if b.calls.Load() < 10 {
				t.Errorf("the Backend was asked %d times; every call must ask it", b.calls.Load())
			}
		})
	}
}

// fakeStream is the grpc.ServerStream of a stream interceptor called
// directly: its context, and trailers dropped.
type fakeStream struct{ grpc.ServerStream }

func (fakeStream) Context() context.Context { return context.Background() }
func (fakeStream) SetTrailer(metadata.MD)   {}

// A nil Limiter or KeyFunc is a programming error, caught at construction
// by a panic that names the argument.
func TestInterceptorsPanicOnNil(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    sluice.Limiter
		keys grpclimit.KeyFunc
		want string
	}{
		{"nil Limiter", nil, grpclimit.MethodKey("method"), "Limiter l"},
		{"nil KeyFunc", sluice.Unlimited, nil, "KeyFunc keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				p, _ := recover().(string)
				if !strings.Contains(p, tc.want) {
					t.Errorf("panic %q, want one naming %q", p, tc.want)
				}
			}()
			grpclimit.UnaryServerInterceptor(tc.l, tc.keys)
		})
	}
}

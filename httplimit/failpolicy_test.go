package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
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

// failPolicyConfig limits each caller to one request a minute: every
// request of the test asks the Backend, and a Backend that worked would deny
// from the second.
const failPolicyConfig = `{"rateLimits":[
 {"rateLimitId":"per-caller","dimensionKeys":["caller"],"entries":[{"dimensions":{"caller":"*"},
  "requests":[{"rate":1,"period":"minute"}]}]}]}`

// The failure policy is the Stack's, set once: over a Backend that fails
// every call, a Stack with stack.WithFailClosed returns the error and the
// middleware refuses every request (503, the handler never runs); without
// it the Stack admits and returns no error, and every request passes.
func TestFailurePolicyIsTheStacks(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       []stack.Option
		wantStatus int
		wantRuns   int32
	}{
		{"stack.WithFailClosed", []stack.Option{stack.WithFailClosed()}, http.StatusServiceUnavailable, 0},
		{"default", nil, http.StatusOK, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &downBackend{}
			st, err := stack.Load([]byte(failPolicyConfig), append([]stack.Option{stack.WithBackend(b)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int32
			var observed atomic.Int32
			h := httplimit.New(st, callerKey, httplimit.WithErrorHandler(func(err error) {
				var le *httplimit.LimiterError
				if !errors.As(err, &le) || !errors.Is(err, errDown) {
					t.Errorf("error handler got %v, want a *LimiterError wrapping the backend's", err)
				}
				observed.Add(1)
			}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs.Add(1) }))
			for i := range 5 {
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				req.Header.Set("X-Caller", "alice") // the same caller: over its limit from the second request
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != tc.wantStatus {
					t.Fatalf("request %d: status %d, want %d", i, rec.Code, tc.wantStatus)
				}
			}
			if runs.Load() != tc.wantRuns {
				t.Errorf("the handler ran %d times, want %d", runs.Load(), tc.wantRuns)
			}
			if b.calls.Load() < 5 {
				t.Errorf("the Backend was asked %d times; every request must ask it", b.calls.Load())
			}
			if tc.wantStatus == http.StatusServiceUnavailable && observed.Load() != 5 {
				t.Errorf("the error handler observed %d errors, want 5", observed.Load())
			}
		})
	}
}

// A Limiter error always refuses, through the ErrorResponder.
func TestLimiterErrorRefuses(t *testing.T) {
	boom := errors.New("redis: connection refused")
	var calls atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) })
	errLimiter := sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) {
		return sluice.Decision{}, boom
	})

	observed := make(chan error, 1)
	def := httptest.NewServer(httplimit.New(errLimiter, callerKey, httplimit.WithErrorHandler(func(err error) { observed <- err }))(next))
	defer def.Close()
	if res, _ := get(t, def, "a", ""); res.StatusCode != http.StatusServiceUnavailable || calls.Load() != 0 {
		t.Errorf("status %d, handler calls %d; want 503 and none", res.StatusCode, calls.Load())
	}
	var ole *httplimit.LimiterError
	if err := <-observed; !errors.As(err, &ole) || !errors.Is(err, boom) {
		t.Errorf("the error handler observed %v, want the *LimiterError", err)
	}

	var got error
	custom := httptest.NewServer(httplimit.New(errLimiter, callerKey,
		httplimit.WithErrorResponder(func(w http.ResponseWriter, r *http.Request, err error) {
			got = err
			w.WriteHeader(http.StatusTeapot)
		}))(next))
	defer custom.Close()
	res, _ := get(t, custom, "a", "")
	var le *httplimit.LimiterError
	if res.StatusCode != http.StatusTeapot || !errors.As(got, &le) || !errors.Is(got, boom) || calls.Load() != 0 {
		t.Errorf("custom responder: status %d, err %v, handler calls %d", res.StatusCode, got, calls.Load())
	}
}

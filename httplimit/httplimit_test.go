package httplimit_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func callerKey(r *http.Request) (sluice.Keys, error) {
	c := r.Header.Get("X-Caller")
	if c == "bad" {
		return sluice.Keys{}, errors.New("caller header malformed")
	}
	return sluice.NewKeys("caller", c), nil
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.WriteString(w, "ok")
})

func get(t *testing.T, srv *httptest.Server, caller, body string) (*http.Response, string) {
	t.Helper()
	method := http.MethodGet
	if body != "" {
		method = http.MethodPost
	}
	req, _ := http.NewRequest(method, srv.URL, strings.NewReader(body))
	req.Header.Set("X-Caller", caller)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func TestThrottleAndRecover(t *testing.T) {
	lim, clock := limitertest.NewPerValue("caller", 2, 500*time.Millisecond) // 2 per second, burst 2
	srv := httptest.NewServer(httplimit.New(lim, callerKey)(okHandler))
	defer srv.Close()

	for i, wantRemaining := range []string{"1", "0"} {
		res, body := get(t, srv, "alice", "")
		if res.StatusCode != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i, res.StatusCode, body)
		}
		if got := res.Header.Get("RateLimit-Policy"); got != `"per-caller";q=2;w=1` {
			t.Errorf("request %d: RateLimit-Policy %q", i, got)
		}
		if got := res.Header.Get("RateLimit"); !strings.HasPrefix(got, `"per-caller";r=`+wantRemaining+`;t=`) {
			t.Errorf("request %d: RateLimit %q, want r=%s", i, got, wantRemaining)
		}
	}
	res, body := get(t, srv, "alice", "")
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: status %d", res.StatusCode)
	}
	want := `{"error":"Rate limit exceeded","success":false,"limitKey":"per-caller/caller=alice","metric":"requests","retryAfter":1}`
	if body != want {
		t.Errorf("body %s\nwant %s", body, want)
	}
	if res.Header.Get("Retry-After") != "1" || res.Header.Get("Retry-After-Ms") != "500" {
		t.Errorf("Retry-After %q retry-after-ms %q", res.Header.Get("Retry-After"), res.Header.Get("Retry-After-Ms"))
	}
	// Another caller has its own bucket.
	if res, _ := get(t, srv, "bob", ""); res.StatusCode != 200 {
		t.Errorf("bob throttled by alice's bucket: %d", res.StatusCode)
	}
	// Waiting the advertised retry-after-ms is enough, a moment less is not.
	clock.Advance(499 * time.Millisecond)
	if res, _ := get(t, srv, "alice", ""); res.StatusCode != 429 {
		t.Errorf("admitted before retry-after-ms: %d", res.StatusCode)
	}
	clock.Advance(time.Millisecond)
	if res, _ := get(t, srv, "alice", ""); res.StatusCode != 200 {
		t.Errorf("throttled after waiting retry-after-ms: %d", res.StatusCode)
	}
}

func TestFormats(t *testing.T) {
	tests := []struct {
		opts   []httplimit.Option
		body   string
		status int
		want   string
	}{
		{[]httplimit.Option{httplimit.WithFormat(slerrors.OpenAI)}, "", 429,
			`{"error":{"message":"Rate limit exceeded","type":"rate_limit_error","code":"429","limitKey":"per-caller/caller=c","metric":"requests","retryAfter":1}}`},
		{[]httplimit.Option{httplimit.WithFormat(slerrors.Anthropic)}, "", 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit exceeded","limitKey":"per-caller/caller=c","metric":"requests","retryAfter":1}}`},
		{[]httplimit.Option{httplimit.WithFormat(slerrors.AWS)}, "", 400,
			`{"__type":"ThrottlingException","message":"Rate exceeded","limitKey":"per-caller/caller=c","metric":"requests","retryAfter":1}`},
		{[]httplimit.Option{httplimit.WithFormat(slerrors.JSONRPC)}, `{"jsonrpc":"2.0","id":"request-1","method":"tools/call"}`, 200,
			`{"jsonrpc":"2.0","id":"request-1","error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":"per-caller/caller=c","metric":"requests","retryAfter":1}}}`},
		{[]httplimit.Option{httplimit.WithFormat(slerrors.JSONRPC), httplimit.WithJSONRPCCode(-32042)}, `{"id":17,"jsonrpc":"2.0"}`, 200,
			`{"jsonrpc":"2.0","id":17,"error":{"code":-32042,"message":"Rate limit exceeded","data":{"limitKey":"per-caller/caller=c","metric":"requests","retryAfter":1}}}`},
		{[]httplimit.Option{httplimit.WithFormat(slerrors.JSONRPC)}, `[{"id":1},{"id":2}]`, 200,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":"per-caller/caller=c","metric":"requests","retryAfter":1}}}`},
		{[]httplimit.Option{httplimit.WithFormat(slerrors.JSONRPC)}, `{"id":{"x":1}}`, 200,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":"per-caller/caller=c","metric":"requests","retryAfter":1}}}`},
	}
	for i, tt := range tests {
		lim, _ := limitertest.NewPerValue("caller", 1, time.Second)
		srv := httptest.NewServer(httplimit.New(lim, callerKey, tt.opts...)(okHandler))
		if res, _ := get(t, srv, "c", tt.body); res.StatusCode != 200 {
			t.Fatalf("case %d: first request %d", i, res.StatusCode)
		}
		res, body := get(t, srv, "c", tt.body)
		srv.Close()
		if res.StatusCode != tt.status || body != tt.want {
			t.Errorf("case %d: %d %s\nwant %d %s", i, res.StatusCode, body, tt.status, tt.want)
		}
		if res.Header.Get("Retry-After") != "1" {
			t.Errorf("case %d: Retry-After %q", i, res.Header.Get("Retry-After"))
		}
	}
}

func TestKeyFuncError(t *testing.T) {
	var calls atomic.Int32
	observed := make(chan error, 1)
	srv := httptest.NewServer(httplimit.New(sluice.Unlimited, callerKey, httplimit.WithErrorHandler(func(err error) { observed <- err }))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) })))
	defer srv.Close()
	res, body := get(t, srv, "bad", "")
	if res.StatusCode != 400 || calls.Load() != 0 || strings.Contains(body, "malformed") {
		t.Errorf("status %d, handler calls %d, body %q (must not leak the error)", res.StatusCode, calls.Load(), body)
	}
	var ke *httplimit.KeyError
	if err := <-observed; !errors.As(err, &ke) {
		t.Errorf("the error handler observed %v, want the *KeyError", err)
	}
}

func TestPermanentDenial(t *testing.T) {
	srv := httptest.NewServer(httplimit.New(sluice.Deny, callerKey, httplimit.WithFormat(slerrors.OpenAI))(okHandler))
	defer srv.Close()
	res, _ := get(t, srv, "a", "")
	if res.StatusCode != 429 || res.Header.Get("X-Should-Retry") != "false" || res.Header.Get("Retry-After") != "" {
		t.Errorf("status %d, x-should-retry %q, Retry-After %q", res.StatusCode, res.Header.Get("X-Should-Retry"), res.Header.Get("Retry-After"))
	}
}

// TestConcurrentCallersNeverExceedBurst sends many requests at once on a
// frozen clock: exactly burst of them pass, whatever the interleaving.
func TestConcurrentCallersNeverExceedBurst(t *testing.T) {
	lim, _ := limitertest.NewPerValue("caller", 25, time.Second)
	var passed atomic.Int32
	srv := httptest.NewServer(httplimit.New(lim, callerKey)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { passed.Add(1) })))
	defer srv.Close()
	var wg sync.WaitGroup
	var throttled atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				res, body := get(t, srv, "shared", "")
				if res.StatusCode == 429 {
					var b struct{ RetryAfter int64 }
					if json.Unmarshal([]byte(body), &b) != nil || b.RetryAfter < 1 {
						t.Errorf("bad throttled body %q", body)
					}
					throttled.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if passed.Load() != 25 || throttled.Load() != 160-25 {
		t.Errorf("passed %d throttled %d, want 25 and %d", passed.Load(), throttled.Load(), 160-25)
	}
}

// A nil Limiter or KeyFunc is a programming error, caught at construction
// by a panic that names the argument.
func TestNewPanicsOnNil(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    sluice.Limiter
		keys httplimit.KeyFunc
		want string
	}{
		{"nil Limiter", nil, callerKey, "Limiter l"},
		{"nil KeyFunc", sluice.Unlimited, nil, "KeyFunc keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				p, _ := recover().(string)
				if !strings.Contains(p, tc.want) {
					t.Errorf("panic %q, want one naming %q", p, tc.want)
				}
			}()
			httplimit.New(tc.l, tc.keys)
		})
	}
}

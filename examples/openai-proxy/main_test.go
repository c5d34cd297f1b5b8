package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// fakeUpstream is an OpenAI-compatible chat completions server whose answer
// (content pieces, usage, status) the test sets before each call.
type fakeUpstream struct {
	*httptest.Server
	calls     atomic.Int32
	cancelled chan struct{} // a held stream reports its request's cancellation

	mu     sync.Mutex
	last   map[string]any // the last body received
	auth   string
	pieces []string
	usage  usage
	status int  // answer this status with an error body instead
	hold   bool // stream the first piece, then wait for cancellation
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	u := &fakeUpstream{cancelled: make(chan struct{}, 1), pieces: []string{"Hello", " world"}, usage: usage{10, 2, 12}}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *fakeUpstream) set(f func(u *fakeUpstream)) { u.mu.Lock(); f(u); u.mu.Unlock() }

func (u *fakeUpstream) lastBody() map[string]any { u.mu.Lock(); defer u.mu.Unlock(); return u.last }

func (u *fakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	u.calls.Add(1)
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, "bad body", 400)
		return
	}
	u.mu.Lock()
	u.last, u.auth = body, r.Header.Get("Authorization")
	pieces, us, status, hold := u.pieces, u.usage, u.status, u.hold
	u.mu.Unlock()
	if status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"error":{"message":"upstream says no","type":"invalid_request_error","param":null,"code":null}}`)
		return
	}
	model, _ := body["model"].(string)
	if stream, _ := body["stream"].(bool); !stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": strings.Join(pieces, ""), "refusal": nil}}},
			"usage": us,
		})
		return
	}
	opts, _ := body["stream_options"].(map[string]any)
	includeUsage, _ := opts["include_usage"].(bool)
	w.Header().Set("Content-Type", "text/event-stream")
	flusher := w.(http.Flusher)
	send := func(v map[string]any) {
		v["id"], v["object"], v["created"], v["model"] = "chatcmpl-1", "chat.completion.chunk", 1, model
		if _, ok := v["usage"]; !ok && includeUsage {
			v["usage"] = nil
		}
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		flusher.Flush()
	}
	choice := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	for i, p := range pieces {
		delta := map[string]any{"content": p}
		if i == 0 {
			delta["role"] = "assistant"
		}
		send(choice(delta, nil))
		if hold && i == 0 {
			<-r.Context().Done()
			u.cancelled <- struct{}{}
			return
		}
	}
	send(choice(map[string]any{}, "stop"))
	if includeUsage {
		send(map[string]any{"choices": []any{}, "usage": us})
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// harness is the proxy in front of a fake upstream, on a frozen clock.
type harness struct {
	clock  *limitertest.Clock
	up     *fakeUpstream
	srv    *httptest.Server
	served chan struct{} // one value for every request the proxy finished
}

// tpmConfig: tpm tokens per minute per model (rl-abc123, the seed's id), and
// per caller 1000 requests per minute and 8 in flight.
func tpmConfig(tpm int) string {
	return fmt.Sprintf(`{"rateLimits": [
  {"rateLimitId": "rl-abc123", "dimensionKeys": ["qualifiedModelId"], "entries": [
    {"dimensions": {"qualifiedModelId": "*"}, "tokens": [{"rate": %d, "period": "minute"}]}]},
  {"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
    {"dimensions": {"caller": "*"}, "requests": [{"rate": 1000, "period": "minute"}],
     "connections": [{"rate": 8, "period": "second"}]}]}
]}`, tpm)
}

func newHarness(t *testing.T, config string) *harness {
	t.Helper()
	h := &harness{clock: limitertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), up: newFakeUpstream(t), served: make(chan struct{}, 100)}
	limits, err := stack.Load([]byte(config), stack.WithClock(h.clock))
	if err != nil {
		t.Fatal(err)
	}
	p, err := newProxy(limits, h.up.URL+"/v1", h.up.Client())
	if err != nil {
		t.Fatal(err)
	}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { h.served <- struct{}{} }()
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// body is a chat request of one user message whose prompt estimate is
// exactly prompt tokens (ceil(chars/4) + 4), with extra fields.
func body(prompt int, extra map[string]any) string {
	m := map[string]any{"model": "anthropic.claude-3-sonnet",
		"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("a", 4*(prompt-4))}}}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func (h *harness) post(t *testing.T, ctx context.Context, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-test")
	res, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// chat sends body and returns the status and the whole answer.
func (h *harness) chat(t *testing.T, body string) (*http.Response, string) {
	t.Helper()
	res := h.post(t, context.Background(), body)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	<-h.served
	return res, string(b)
}

// fits asserts that exactly n tokens are left: a request estimated at n+1
// is throttled without reaching the upstream, one at n is served.
func (h *harness) fits(t *testing.T, n int) {
	t.Helper()
	before := h.up.calls.Load()
	if res, b := h.chat(t, body(n+1, nil)); res.StatusCode != 429 {
		t.Fatalf("estimate %d with %d left: %d %s", n+1, n, res.StatusCode, b)
	}
	if h.up.calls.Load() != before {
		t.Fatal("a throttled request reached the upstream")
	}
	if res, b := h.chat(t, body(n, nil)); res.StatusCode != 200 {
		t.Fatalf("estimate %d with %d left: %d %s", n, n, res.StatusCode, b)
	}
}

// sse reads the data fields of an event stream.
func sse(t *testing.T, r io.Reader) []string {
	t.Helper()
	var data []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return data
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// TestEstimateOverLimit: an estimate larger than the 50-token limit is
// refused before the upstream is called, for good (x-should-retry: false);
// max_tokens counts towards the estimate.
func TestEstimateOverLimit(t *testing.T) {
	h := newHarness(t, tpmConfig(50))
	for _, b := range []string{
		body(51, nil),
		body(10, map[string]any{"max_tokens": 41}),
		body(10, map[string]any{"max_completion_tokens": 21, "n": 2}),
	} {
		res, got := h.chat(t, b)
		if res.StatusCode != 429 || res.Header.Get("X-Should-Retry") != "false" || !strings.Contains(got, `"metric":"tokens"`) {
			t.Errorf("%d %q x-should-retry %q", res.StatusCode, got, res.Header.Get("X-Should-Retry"))
		}
	}
	if n := h.up.calls.Load(); n != 0 {
		t.Fatalf("the upstream saw %d requests", n)
	}
	h.fits(t, 50) // nothing was consumed
}

// TestSeedBody: 25 tokens estimated, 51 used (one token of debt), so a
// request estimated at 49 waits exactly a minute: the seed's
// OpenAI-compatible body, byte for byte.
func TestSeedBody(t *testing.T) {
	h := newHarness(t, tpmConfig(50))
	h.up.set(func(u *fakeUpstream) { u.usage = usage{PromptTokens: 25, CompletionTokens: 26, TotalTokens: 51} })
	if res, b := h.chat(t, body(25, nil)); res.StatusCode != 200 || !strings.Contains(b, `"total_tokens":51`) {
		t.Fatalf("first request: %d %s", res.StatusCode, b)
	}
	res, b := h.chat(t, body(49, nil))
	want := `{"error":{"message":"Rate limit exceeded","type":"rate_limit_error","code":"429","limitKey":"rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet","metric":"tokens","retryAfter":60}}`
	if res.StatusCode != 429 || b != want {
		t.Fatalf("second request: %d %s\nwant 429 %s", res.StatusCode, b, want)
	}
	if res.Header.Get("Retry-After") != "60" || res.Header.Get("Retry-After-Ms") != "60000" {
		t.Errorf("Retry-After %q retry-after-ms %q", res.Header.Get("Retry-After"), res.Header.Get("Retry-After-Ms"))
	}
}

// TestOverrunChargedToNextRequest: 600 tokens per minute (10 per second);
// estimated 100, used 700: 100 tokens of debt, so the next request of 100
// waits for 200 tokens, 20 s, and is admitted exactly then.
func TestOverrunChargedToNextRequest(t *testing.T) {
	h := newHarness(t, tpmConfig(600))
	h.up.set(func(u *fakeUpstream) { u.usage = usage{PromptTokens: 150, CompletionTokens: 550, TotalTokens: 700} })
	res, b := h.chat(t, body(100, nil))
	if res.StatusCode != 200 || !strings.Contains(b, `"content":"Hello world"`) || !strings.Contains(b, `"total_tokens":700`) {
		t.Fatalf("first request: %d %s", res.StatusCode, b)
	}
	res, b = h.chat(t, body(100, nil))
	if res.StatusCode != 429 || res.Header.Get("Retry-After-Ms") != "20000" || !strings.Contains(b, `"retryAfter":20`) {
		t.Fatalf("after the overrun: %d retry-after-ms %q %s", res.StatusCode, res.Header.Get("Retry-After-Ms"), b)
	}
	h.clock.Advance(20*time.Second - time.Millisecond)
	if res, _ := h.chat(t, body(100, nil)); res.StatusCode != 429 {
		t.Fatalf("admitted before the debt was paid: %d", res.StatusCode)
	}
	h.clock.Advance(time.Millisecond)
	if res, b := h.chat(t, body(100, nil)); res.StatusCode != 200 {
		t.Fatalf("throttled after RetryAfter: %d %s", res.StatusCode, b)
	}
	if n := h.up.calls.Load(); n != 2 {
		t.Errorf("upstream calls %d, want 2", n)
	}
}

// TestUnderrunRefunded: estimated 100 + max_tokens 400, used 150: the
// reservation is reconciled down, so 450 of 600 are left.
func TestUnderrunRefunded(t *testing.T) {
	h := newHarness(t, tpmConfig(600))
	h.up.set(func(u *fakeUpstream) { u.usage = usage{PromptTokens: 100, CompletionTokens: 50, TotalTokens: 150} })
	if res, b := h.chat(t, body(100, map[string]any{"max_tokens": 400})); res.StatusCode != 200 {
		t.Fatalf("%d %s", res.StatusCode, b)
	}
	h.fits(t, 450)
}

// TestStreamingUsage: the proxy asks the upstream for usage, keeps the
// client's other fields, relays every chunk, shows the usage chunk only to a
// client that asked for it, and reconciles with it.
func TestStreamingUsage(t *testing.T) {
	for _, clientAsks := range []bool{false, true} {
		t.Run(map[bool]string{false: "usage stripped", true: "usage relayed"}[clientAsks], func(t *testing.T) {
			h := newHarness(t, tpmConfig(600))
			h.up.set(func(u *fakeUpstream) {
				u.pieces = []string{"one", " two", " three"}
				u.usage = usage{PromptTokens: 90, CompletionTokens: 160, TotalTokens: 250}
			})
			opts := map[string]any{"include_obfuscation": false}
			if clientAsks {
				opts["include_usage"] = true
			}
			res := h.post(t, context.Background(), body(100, map[string]any{"stream": true, "temperature": 0.5, "stream_options": opts}))
			if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "text/event-stream" {
				t.Fatalf("%d %q", res.StatusCode, ct)
			}
			data := sse(t, res.Body)
			res.Body.Close()
			<-h.served

			fwd := h.up.lastBody()
			so, _ := fwd["stream_options"].(map[string]any)
			if so["include_usage"] != true || so["include_obfuscation"] != false || fwd["temperature"] != 0.5 || fwd["stream"] != true {
				t.Errorf("forwarded body %v", fwd)
			}
			var text strings.Builder
			var usageChunks int
			for _, d := range data[:len(data)-1] {
				var c struct {
					Choices []struct{ Delta struct{ Content string } }
					Usage   *usage
				}
				if err := json.Unmarshal([]byte(d), &c); err != nil {
					t.Fatalf("chunk %q: %v", d, err)
				}
				for _, ch := range c.Choices {
					text.WriteString(ch.Delta.Content)
				}
				if c.Usage != nil {
					usageChunks++
					if c.Usage.TotalTokens != 250 {
						t.Errorf("usage %+v", c.Usage)
					}
				}
			}
			if text.String() != "one two three" || data[len(data)-1] != "[DONE]" {
				t.Errorf("relayed %q, events %q", text.String(), data)
			}
			if want := map[bool]int{false: 0, true: 1}[clientAsks]; usageChunks != want {
				t.Errorf("client saw %d usage chunks, want %d", usageChunks, want)
			}
			h.fits(t, 600-250)
		})
	}
}

// TestClientDisconnectMidStream: the client leaves after the first chunk;
// the upstream's request is cancelled and the charge is the prompt estimate
// (100) plus the relayed text (40 characters, 10 tokens): the reserved
// max_tokens (200) are refunded.
func TestClientDisconnectMidStream(t *testing.T) {
	h := newHarness(t, tpmConfig(600))
	h.up.set(func(u *fakeUpstream) {
		u.pieces = []string{strings.Repeat("x", 40), "never sent"}
		u.hold = true
	})
	ctx, cancel := context.WithCancel(context.Background())
	res := h.post(t, ctx, body(100, map[string]any{"stream": true, "max_tokens": 200}))
	first, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil || !strings.Contains(first, strings.Repeat("x", 40)) {
		t.Fatalf("first chunk %q %v", first, err)
	}
	cancel()
	res.Body.Close()
	select {
	case <-h.up.cancelled:
	case <-time.After(10 * time.Second): // a deadline for a hang, not a wait for time
		t.Fatal("the upstream request was not cancelled")
	}
	<-h.served
	h.up.set(func(u *fakeUpstream) { u.hold = false })
	h.fits(t, 600-110)
}

// TestUpstreamFailures: an unreachable upstream and a 5xx give 502 and
// charge no tokens; a 4xx is relayed as is, also charging none.
func TestUpstreamFailures(t *testing.T) {
	h := newHarness(t, tpmConfig(600))
	h.up.set(func(u *fakeUpstream) { u.status = 503 })
	res, b := h.chat(t, body(300, nil))
	if res.StatusCode != 502 || !strings.Contains(b, `"type":"upstream_error"`) || !strings.Contains(b, "503") {
		t.Errorf("5xx: %d %s", res.StatusCode, b)
	}
	h.up.set(func(u *fakeUpstream) { u.status = 400 })
	res, b = h.chat(t, body(300, nil))
	if res.StatusCode != 400 || !strings.Contains(b, "upstream says no") {
		t.Errorf("4xx: %d %s", res.StatusCode, b)
	}
	h.up.set(func(u *fakeUpstream) { u.status = 0 })
	h.fits(t, 600)

	// Nothing listens at the upstream address any more.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	c := limitertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	limits, err := stack.Load([]byte(tpmConfig(600)), stack.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	p, err := newProxy(limits, gone.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body(10, nil))))
	if rec.Code != 502 || !strings.Contains(rec.Body.String(), "could not be reached") {
		t.Errorf("unreachable: %d %s", rec.Code, rec.Body.String())
	}
	keys := sluice.NewKeys("qualifiedModelId", "anthropic.claude-3-sonnet", "caller", "anonymous")
	if _, d, _ := limits.Reserve(context.Background(), keys, 600); !d.Allowed {
		t.Errorf("tokens charged for an unreachable upstream: %+v", d)
	}
}

func TestBadRequests(t *testing.T) {
	h := newHarness(t, tpmConfig(600))
	for _, tt := range []struct{ body, param, msg string }{
		{`{"model":`, "", "not a JSON object"},
		{`[1,2]`, "", "not a JSON object"},
		{`{"messages":[{"role":"user","content":"hi"}]}`, "model", "non-empty string"},
		{`{"model":"m","messages":[]}`, "messages", "non-empty array"},
		{`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"user","content":7}]}`, "messages[1].content", "string or an array"},
		{`{"model":"m","messages":[{"content":"hi"}]}`, "messages[0].role", "non-empty string"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`, "messages[0].content[0].text", "must be a string"},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":-1}`, "max_tokens", "integer from 0"},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":"yes"}`, "stream", "boolean"},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":[]}`, "stream_options", "object"},
	} {
		res, b := h.chat(t, tt.body)
		var e struct {
			Error struct {
				Message string
				Type    string
				Param   *string
			}
		}
		if err := json.Unmarshal([]byte(b), &e); err != nil || res.StatusCode != 400 || e.Error.Type != "invalid_request_error" {
			t.Errorf("%s: %d %s", tt.body, res.StatusCode, b)
			continue
		}
		param := ""
		if e.Error.Param != nil {
			param = *e.Error.Param
		}
		if param != tt.param || !strings.Contains(e.Error.Message, tt.msg) {
			t.Errorf("%s: param %q message %q, want %q and %q", tt.body, param, e.Error.Message, tt.param, tt.msg)
		}
	}
	if h.up.calls.Load() != 0 {
		t.Error("a bad request reached the upstream")
	}
}

// TestCallerKey: the caller is the hashed bearer token; the key is forwarded
// to the upstream but never shows in a 429.
func TestCallerKey(t *testing.T) {
	h := newHarness(t, `{"rateLimits": [{"rateLimitId": "per-caller-rpm", "dimensionKeys": ["caller"], "entries": [
	  {"dimensions": {"caller": "*"}, "requests": [{"rate": 1, "period": "minute"}]}]}]}`)
	if res, _ := h.chat(t, body(10, nil)); res.StatusCode != 200 || h.up.auth != "Bearer sk-test" {
		t.Fatalf("%d, upstream saw Authorization %q", res.StatusCode, h.up.auth)
	}
	res, b := h.chat(t, body(10, nil))
	if res.StatusCode != 429 || strings.Contains(b, "sk-test") || !strings.Contains(b, `"limitKey":"per-caller-rpm/caller=`+callerKey("Bearer sk-test")+`"`) {
		t.Errorf("%d %s", res.StatusCode, b)
	}
	if callerKey("Bearer a") == callerKey("Bearer b") || callerKey("") != "anonymous" || callerKey("Basic x") != "anonymous" {
		t.Error("callerKey does not separate callers")
	}
}

// TestOpenAISDK runs OpenAI's official Go SDK against the proxy: one
// completion, one stream with usage, one stream without, and the 429s.
func TestOpenAISDK(t *testing.T) {
	h := newHarness(t, tpmConfig(600))
	h.up.set(func(u *fakeUpstream) { u.usage = usage{PromptTokens: 20, CompletionTokens: 5, TotalTokens: 25} })
	client := openai.NewClient(option.WithBaseURL(h.srv.URL+"/v1"), option.WithAPIKey("sk-test"),
		option.WithHTTPClient(h.srv.Client()), option.WithMaxRetries(0))
	ctx := context.Background()
	params := func(prompt string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model:     "anthropic.claude-3-sonnet",
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
			MaxTokens: openai.Int(50),
		}
	}
	c, err := client.Chat.Completions.New(ctx, params("hello"))
	<-h.served
	if err != nil || len(c.Choices) != 1 || c.Choices[0].Message.Content != "Hello world" || c.Usage.TotalTokens != 25 {
		t.Fatalf("completion %+v %v", c, err)
	}
	for _, includeUsage := range []bool{true, false} {
		p := params("hello")
		if includeUsage {
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		}
		stream := client.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		<-h.served
		wantTotal := map[bool]int64{true: 25, false: 0}[includeUsage]
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Hello world" || acc.Usage.TotalTokens != wantTotal {
			t.Errorf("include_usage %v: content %q usage %d, want %d", includeUsage, acc.Choices[0].Message.Content, acc.Usage.TotalTokens, wantTotal)
		}
	}
	h.fits(t, 600-3*25) // each call reconciled to its reported usage

	_, err = client.Chat.Completions.New(ctx, params(strings.Repeat("a", 4000)))
	<-h.served
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "429" || apiErr.Type != "rate_limit_error" {
		t.Fatalf("oversized call: %v", err)
	}
	before := h.up.calls.Load()
	_, err = client.Chat.Completions.New(ctx, params(strings.Repeat("a", 4000)), option.WithMaxRetries(2))
	<-h.served
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || h.up.calls.Load() != before {
		t.Errorf("never-admissible call: %v", err)
	}
}

// TestConnectionsPerCaller: a stream in flight holds the caller's only slot
// until it ends, here by the client leaving; the slot then serves the next.
func TestConnectionsPerCaller(t *testing.T) {
	h := newHarness(t, `{"rateLimits": [{"rateLimitId": "per-caller-streams", "dimensionKeys": ["caller"], "entries": [
	  {"dimensions": {"caller": "*"}, "connections": [{"rate": 1, "period": "second"}]}]}]}`)
	h.up.set(func(u *fakeUpstream) { u.hold = true })
	ctx, cancel := context.WithCancel(context.Background())
	res := h.post(t, ctx, body(10, map[string]any{"stream": true}))
	if _, err := bufio.NewReader(res.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	second, b := h.chat(t, body(10, nil))
	if second.StatusCode != 429 || !strings.Contains(b, `"metric":"connections"`) {
		t.Fatalf("second request while a stream holds the slot: %d %s", second.StatusCode, b)
	}
	cancel()
	res.Body.Close()
	<-h.up.cancelled
	<-h.served
	h.up.set(func(u *fakeUpstream) { u.hold = false })
	if res, b := h.chat(t, body(10, nil)); res.StatusCode != 200 {
		t.Fatalf("slot not released: %d %s", res.StatusCode, b)
	}
}

func TestDefaultConfigAndFlags(t *testing.T) {
	limits, err := stack.Load([]byte(defaultConfig))
	if err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, bad := range []string{"", "ftp://x/v1", "http://", "::"} {
		if _, err := newProxy(limits, bad, nil); err == nil || !strings.Contains(err.Error(), "upstream") {
			t.Errorf("upstream %q: %v", bad, err)
		}
	}
}

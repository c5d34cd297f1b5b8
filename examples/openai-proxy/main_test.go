package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func words(n int) string { return strings.TrimSpace(strings.Repeat("w ", n)) }

func start(t *testing.T) (*clock, *httptest.Server, *atomic.Int32) {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h, err := newHandler(c.now)
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return c, srv, &requests
}

func post(t *testing.T, srv *httptest.Server, content string) (*http.Response, string) {
	t.Helper()
	body := `{"model":"anthropic.claude-3-sonnet","messages":[{"role":"user","content":"` + content + `"}]}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k1")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// TestSeedBody: the model's 50 tokens per minute are spent (25 in + 26 out,
// one token of debt), so a request estimated at 49 tokens waits exactly a
// minute: the seed's OpenAI-compatible body, byte for byte.
func TestSeedBody(t *testing.T) {
	c, srv, _ := start(t)
	if res, body := post(t, srv, words(25)); res.StatusCode != 200 || !strings.Contains(body, `"total_tokens":51`) {
		t.Fatalf("first request: %d %s", res.StatusCode, body)
	}
	res, body := post(t, srv, words(49))
	want := `{"error":{"message":"Rate limit exceeded","type":"rate_limit_error","code":"429","limitKey":"rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet","metric":"tokens","retryAfter":60}}`
	if res.StatusCode != 429 || body != want {
		t.Fatalf("second request: %d %s\nwant 429 %s", res.StatusCode, body, want)
	}
	if res.Header.Get("Retry-After") != "60" || res.Header.Get("Retry-After-Ms") != "60000" {
		t.Errorf("Retry-After %q retry-after-ms %q", res.Header.Get("Retry-After"), res.Header.Get("Retry-After-Ms"))
	}
	c.add(60*time.Second - time.Millisecond)
	if res, _ := post(t, srv, words(49)); res.StatusCode != 429 {
		t.Errorf("admitted before retryAfter: %d", res.StatusCode)
	}
	c.add(time.Millisecond)
	if res, body := post(t, srv, words(49)); res.StatusCode != 200 {
		t.Errorf("throttled after waiting retryAfter: %d %s", res.StatusCode, body)
	}
}

// TestOpenAISDK calls the proxy with OpenAI's official Go SDK: it reads the
// 429 as a rate_limit_error with code "429", and a request that can never
// fit (51 tokens > the 50 burst) carries x-should-retry: false, so the SDK
// does not retry it even with retries enabled.
func TestOpenAISDK(t *testing.T) {
	_, srv, requests := start(t)
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("k1"), option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
	ctx := context.Background()
	ask := func(content string, opts ...option.RequestOption) error {
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "anthropic.claude-3-sonnet",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(content)},
		}, opts...)
		return err
	}
	if err := ask(words(20)); err != nil {
		t.Fatal(err)
	}
	err := ask(words(20))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("second call: %v, want *openai.Error", err)
	}
	if apiErr.StatusCode != 429 || apiErr.Code != "429" || apiErr.Type != "rate_limit_error" || apiErr.Message != "Rate limit exceeded" {
		t.Errorf("SDK error: status %d code %q type %q message %q", apiErr.StatusCode, apiErr.Code, apiErr.Type, apiErr.Message)
	}

	before := requests.Load()
	err = ask(words(51), option.WithMaxRetries(2))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
		t.Fatalf("oversized call: %v", err)
	}
	if n := requests.Load() - before; n != 1 {
		t.Errorf("SDK sent the never-admissible request %d times, want 1 (x-should-retry: false)", n)
	}
}

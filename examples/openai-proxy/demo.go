package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
)

// stillClock is the demonstration's clock: it moves only when told to.
type stillClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stillClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// fakeCompletion is the fake upstream's answer.
const fakeCompletion = "Hello from the fake upstream."

// demoUpstream answers POST /v1/chat/completions as OpenAI does, without
// streaming: the prompt tokens are the proxy's own estimate of the request,
// the completion tokens max_tokens (8 without it), as if the model wrote
// all it was allowed to.
func demoUpstream(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		return
	}
	req, perr := parseRequest(data)
	if perr != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", perr.param, perr.Error())
		return
	}
	if req.stream {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "stream", "the fake upstream does not stream")
		return
	}
	completion := req.output
	if completion == 0 {
		completion = 8
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-demo", "object": "chat.completion", "created": 0, "model": req.model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "logprobs": nil,
			"message": map[string]any{"role": "assistant", "content": fakeCompletion, "refusal": nil}}},
		"usage": usage{PromptTokens: req.prompt, CompletionTokens: completion, TotalTokens: req.prompt + completion},
	})
}

// shownHeaders are the headers the demonstration prints, when present.
var shownHeaders = []string{"Retry-After", "retry-after-ms", "RateLimit-Policy", "RateLimit"}

// demo serves a fake upstream and the proxy in front of it, each on a
// loopback port of its own, and calls the proxy as two callers would.
func demo(ctx context.Context, w io.Writer, config []byte, configPath string) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	start := func(h http.Handler) (string, error) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = serve(ctx, h, lis) }()
		return "http://" + lis.Addr().String(), nil
	}
	var upstreamCalls atomic.Int64
	upstream, err := start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamCalls.Add(1)
		demoUpstream(w, r)
	}))
	if err != nil {
		return err
	}
	clock := &stillClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	limits, err := stack.Load(config, stack.WithClock(sluice.ClockFunc(clock.now)))
	if err != nil {
		return fmt.Errorf("-config: %w", err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	h, err := newProxy(limits, upstream+"/v1", client)
	if err != nil {
		return err
	}
	proxy, err := start(h)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "fake OpenAI-compatible upstream on %s/v1, the proxy in front of it on %s/v1/chat/completions, the clock standing still\n", upstream, proxy)
	if configPath == "" {
		fmt.Fprintln(w, "limits: 200k tokens a minute per model; per caller 60 requests and 100k tokens a minute, 4 in flight")
	} else {
		fmt.Fprintf(w, "limits from -config %s\n", configPath)
	}

	chat := func(caller, content string, maxTokens int) error {
		body := map[string]any{"model": "gpt-4o-mini", "messages": []any{map[string]any{"role": "user", "content": content}}}
		if maxTokens > 0 {
			body["max_tokens"] = maxTokens
		}
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy+"/v1/chat/completions", strings.NewReader(string(b)))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer sk-demo-"+caller)
		req.Header.Set("Content-Type", "application/json")
		calls := upstreamCalls.Load()
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		answer, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		if err != nil {
			return err
		}
		asked := "no max_tokens"
		if maxTokens > 0 {
			asked = fmt.Sprintf("max_tokens %d", maxTokens)
		}
		fmt.Fprintf(w, "%s, %q, %s: %s\n", caller, content, asked, res.Status)
		if res.StatusCode == http.StatusOK {
			var c struct {
				Usage usage `json:"usage"`
			}
			if err := json.Unmarshal(answer, &c); err != nil {
				return fmt.Errorf("the proxy's answer: %w in %s", err, answer)
			}
			fmt.Fprintf(w, "  usage %d prompt + %d completion = %d tokens charged\n", c.Usage.PromptTokens, c.Usage.CompletionTokens, c.Usage.total())
			return nil
		}
		var hs []string
		for _, name := range shownHeaders {
			if v := res.Header.Get(name); v != "" {
				hs = append(hs, name+": "+v)
			}
		}
		fmt.Fprintf(w, "  %s\n  %s\n", strings.Join(hs, " | "), strings.TrimSpace(string(answer)))
		if upstreamCalls.Load() == calls {
			fmt.Fprintln(w, "  (answered by the proxy: the upstream was not called)")
		}
		return nil
	}
	for _, c := range []struct {
		caller, content string
		maxTokens       int
	}{
		{"alice", "hello there", 0},
		{"alice", "write me a long story", 40000},
		{"alice", "and another one", 40000},
		{"alice", "and a third", 40000},
		{"bob", "write me a long story", 40000},
	} {
		if err := chat(c.caller, c.content, c.maxTokens); err != nil {
			return err
		}
	}
	return nil
}

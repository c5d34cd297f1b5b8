// Command openai-proxy is an OpenAI-compatible chat completions endpoint
// that enforces the gateway's token-per-minute limits per model and request
// limits per API key, and answers a throttled request with the gateway's
// OpenAI-compatible 429 (which OpenAI's SDKs understand and back off from,
// guided by the retry-after-ms header).
//
// The "model" here is a stand-in that echoes; in a real proxy the handler
// would forward to the upstream and reconcile the reservation with the
// usage it reports.
//
//	go run ./examples/openai-proxy -addr 127.0.0.1:8082
//	curl -i http://127.0.0.1:8082/v1/chat/completions -H 'Authorization: Bearer k1' \
//	  -d '{"model":"anthropic.claude-3-sonnet","messages":[{"role":"user","content":"hello there"}]}'
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/stack"
)

// config: 50 tokens per minute per model, 30 requests per minute per key.
const config = `{"rateLimits": [
  {"rateLimitId": "rl-abc123", "dimensionKeys": ["qualifiedModelId"], "entries": [
    {"dimensions": {"qualifiedModelId": "*"}, "tokens": [{"rate": 50, "period": "minute"}]}
  ]},
  {"rateLimitId": "per-key-rpm", "dimensionKeys": ["apiKey"], "entries": [
    {"dimensions": {"apiKey": "*"}, "requests": [{"rate": 30, "period": "minute"}]}
  ]}
]}`

func main() {
	addr := flag.String("addr", "127.0.0.1:8082", "listen address")
	flag.Parse()
	h, err := newHandler(time.Now)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log.Printf("OpenAI-compatible endpoint on http://%s/v1/chat/completions", *addr)
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// estimateTokens is a crude input estimate: one token per word.
func estimateTokens(req *chatRequest) int {
	n := 0
	for _, m := range req.Messages {
		n += len(strings.Fields(m.Content))
	}
	return n
}

func newHandler(now func() time.Time) (http.Handler, error) {
	limits, err := stack.Load([]byte(config), stack.WithNow(now))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req chatRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || req.Model == "" || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"message":"invalid request body","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		keys := sluice.NewKeys("qualifiedModelId", req.Model)
		if key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			keys.Set("apiKey", key)
		}
		// Reserve the estimated input tokens before calling the model; a
		// request that does not fit is answered 429 without calling it.
		estimate := estimateTokens(&req)
		res, d, err := limits.Reserve(r.Context(), keys, estimate)
		if err != nil {
			http.Error(w, `{"error":{"message":"rate limiter unavailable","type":"server_error"}}`, http.StatusServiceUnavailable)
			return
		}
		if !d.Allowed {
			te, _ := slerrors.AsThrottled(d.Err())
			_ = slerrors.OpenAI.Write(w, te)
			return
		}
		defer res.Cancel() // gives everything back if we fail before Reconcile

		reply := "echo: " + req.Messages[len(req.Messages)-1].Content
		output := len(strings.Fields(reply))
		// Charge what was really used: input + output tokens.
		_ = res.Reconcile(estimate + output)

		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-sluice", "object": "chat.completion", "created": now().Unix(), "model": req.Model,
			"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
				"message": map[string]string{"role": "assistant", "content": reply}}},
			"usage": map[string]int{"prompt_tokens": estimate, "completion_tokens": output, "total_tokens": estimate + output},
		})
	})
	return mux, nil
}

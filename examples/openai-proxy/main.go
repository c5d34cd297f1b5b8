// Command openai-proxy is an OpenAI-compatible chat completions proxy that
// enforces token-per-minute limits per model and request, token and
// concurrency limits per caller in front of any OpenAI-compatible upstream,
// and answers a throttled request with the gateway's OpenAI-compatible 429
// (which OpenAI's SDKs understand and back off from, guided by the
// retry-after-ms header).
//
//	go run ./examples/openai-proxy -addr 127.0.0.1:8082 -upstream https://api.openai.com/v1
//	curl -i http://127.0.0.1:8082/v1/chat/completions -H "Authorization: Bearer $OPENAI_API_KEY" \
//	  -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there"}]}'
//
// Only POST /v1/chat/completions is served. For each request the proxy:
//
//  1. parses the body; a body that is not a chat completions request is
//     answered 400 with an OpenAI-shaped error naming the field (param);
//  2. resolves the keys: qualifiedModelId is the body's model, caller is
//     "key-" and 16 hex digits of the SHA-256 of the Authorization bearer
//     token ("anonymous" without one), so that API keys never show in limit
//     keys, 429 bodies or spans; the Authorization header itself is
//     forwarded to the upstream unchanged;
//  3. estimates the tokens: ceil(characters/4) over the text of every
//     message (content strings and text parts, names, tool call names and
//     arguments) and the tools definitions, plus 4 per message, plus 765 per
//     non-text content part (image, audio, file), plus max_tokens (or
//     max_completion_tokens, the larger) times n when given, since a tokens
//     limit counts input and output;
//  4. reserves that estimate (one request, the tokens and a connection slot)
//     with stack.Stack.Reserve; a request that does not fit is answered 429
//     before the upstream is called;
//  5. forwards the body to <upstream>/chat/completions with the request's
//     context, adding stream_options.include_usage=true to a streaming
//     request (the client's other fields are kept);
//  6. relays the answer, a streaming one chunk by chunk (each flushed), and
//     reconciles the reservation with the usage the upstream reports
//     (total_tokens, or prompt_tokens+completion_tokens): an overrun is
//     charged to the next requests, an underrun refunded. The usage-only
//     final chunk is relayed only to a client that asked for it itself
//     (other chunks then carry "usage":null, as OpenAI sends them).
//
// What is charged when no usage arrives:
//
//   - the client disconnects mid-stream: the upstream request is cancelled
//     (same context) and the charge is the prompt estimate plus the tokens of
//     the generated text received so far, counted from the chunk deltas with
//     the same ceil(characters/4);
//   - the upstream breaks off a stream, or sends no usage: the same;
//   - the upstream cannot be reached or answers 5xx: 502 to the client and a
//     charge of 0 tokens (nothing reached a model), but the request still
//     counts against requests limits, so a caller retrying into a failing
//     upstream is still limited;
//   - the upstream answers 4xx (bad parameter, bad key, its own 429): the
//     answer is relayed as is and 0 tokens are charged.
//
// The limits come from -config (a JSON file in the stack package's format,
// with the dimensions qualifiedModelId and caller) or the built-in default.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/sluicehq/sluice/stack"
)

// defaultConfig: 200k tokens per minute per model; per caller 60 requests
// and 100k tokens per minute and 4 requests in flight.
const defaultConfig = `{"rateLimits": [
  {"rateLimitId": "per-model-tpm", "dimensionKeys": ["qualifiedModelId"], "entries": [
    {"dimensions": {"qualifiedModelId": "*"}, "tokens": [{"rate": 200000, "period": "minute"}]}
  ]},
  {"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
    {"dimensions": {"caller": "*"},
     "requests": [{"rate": 60, "period": "minute"}],
     "tokens": [{"rate": 100000, "period": "minute"}],
     "connections": [{"rate": 4, "period": "second"}]}
  ]}
]}`

func main() {
	addr := flag.String("addr", "127.0.0.1:8082", "listen address")
	upstream := flag.String("upstream", "https://api.openai.com/v1", "base URL of the OpenAI-compatible upstream API")
	configPath := flag.String("config", "", "rate limits JSON file (default: the built-in limits)")
	flag.Parse()
	if err := run(*addr, *upstream, *configPath); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(addr, upstream, configPath string) error {
	config := []byte(defaultConfig)
	if configPath != "" {
		var err error
		if config, err = os.ReadFile(configPath); err != nil {
			return err
		}
	}
	limits, err := stack.Load(config)
	if err != nil {
		return err
	}
	h, err := newProxy(limits, upstream, nil)
	if err != nil {
		return err
	}
	log.Printf("OpenAI-compatible proxy for %s on http://%s/v1/chat/completions", upstream, addr)
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	return srv.ListenAndServe()
}

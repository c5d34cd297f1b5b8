// Command openai-proxy is an OpenAI-compatible chat completions proxy that
// enforces token-per-minute limits per model and request, token and
// concurrency limits per caller in front of any OpenAI-compatible upstream,
// and answers a throttled request with the gateway's OpenAI-compatible 429
// (which OpenAI's SDKs understand and back off from, guided by the
// retry-after-ms header).
//
//	go run ./examples/openai-proxy     # demonstrate against a fake upstream and exit
//	go run ./examples/openai-proxy -addr 127.0.0.1:8082 -upstream https://api.openai.com/v1
//	curl -i http://127.0.0.1:8082/v1/chat/completions -H "Authorization: Bearer $OPENAI_API_KEY" \
//	  -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there"}]}'
//
// Without -addr it demonstrates itself and exits, calling nothing outside
// the machine: it starts a fake OpenAI-compatible upstream on a loopback
// port (it answers every chat completion with max_tokens completion tokens,
// 8 without it, and reports the usage), serves the proxy in front of it on
// another, on a clock that stands still (nothing sleeps), and is its own
// client: alice asks once briefly and then three times with max_tokens
// 40000; the third of those does not fit in her 100k tokens a minute and is
// answered 429 before the upstream is called, with Retry-After,
// retry-after-ms, the RateLimit headers and OpenAI's error body; bob, with
// a bucket of his own, is served.
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
//
// Flags:
//
//	-addr ADDR       address to serve on until interrupted (default:
//	                 demonstrate against a fake upstream and exit)
//	-upstream URL    with -addr: base URL of the OpenAI-compatible upstream
//	                 (default https://api.openai.com/v1); a TCP connection to
//	                 it is tried at startup
//	-config PATH     rate limits JSON file (default: the built-in limits)
//
// An upstream that does not accept a connection within 5 s, an address that
// cannot be listened on, limits that do not load or a flag out of range is
// reported in one line and the exit status is 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
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

// defaultUpstream is where the proxy forwards when serving without -upstream.
const defaultUpstream = "https://api.openai.com/v1"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runArgs(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "openai-proxy:", err)
		}
		os.Exit(1)
	}
}

// runArgs parses args and serves (with -addr) or demonstrates.
func runArgs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("openai-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "address to serve on until interrupted (empty: demonstrate against a fake upstream of its own and exit)")
	upstream := fs.String("upstream", "", "with -addr: base URL of the OpenAI-compatible upstream API (default "+defaultUpstream+")")
	configPath := fs.String("config", "", "rate limits JSON file (default: the built-in limits)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q: all input is given by flags", fs.Arg(0))
	case *upstream != "" && *addr == "":
		return errors.New("-upstream is for serving: add -addr (without it the example demonstrates itself against a fake upstream)")
	}
	config := []byte(defaultConfig)
	if *configPath != "" {
		var err error
		if config, err = os.ReadFile(*configPath); err != nil {
			return fmt.Errorf("-config: %w", err)
		}
	}
	limits, err := stack.Load(config)
	if err != nil {
		return fmt.Errorf("-config %s: %w", *configPath, err)
	}
	if *addr == "" {
		return demo(ctx, stdout, config, *configPath)
	}
	if *upstream == "" {
		*upstream = defaultUpstream
	}
	h, err := newProxy(limits, *upstream, nil)
	if err != nil {
		return fmt.Errorf("-upstream %q: not an http:// or https:// base URL with a host", *upstream)
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("-addr %s: %w", *addr, err)
	}
	defer lis.Close()
	if err := checkReachable(*upstream); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "OpenAI-compatible proxy for %s on http://%s/v1/chat/completions\n", *upstream, lis.Addr())
	return serve(ctx, h, lis)
}

// checkReachable says, in one error naming the upstream, why no TCP
// connection to its host can be made within 5 s.
func checkReachable(upstream string) error {
	u, err := url.Parse(upstream)
	if err != nil {
		return fmt.Errorf("-upstream %q: %w", upstream, err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	c, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		return fmt.Errorf("cannot reach -upstream %s: %w", upstream, err)
	}
	return c.Close()
}

// serve serves h on lis until ctx ends.
func serve(ctx context.Context, h http.Handler, lis net.Listener) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		srv.Close()
	}()
	err := srv.Serve(lis)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

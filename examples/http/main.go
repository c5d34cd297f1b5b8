// Command http is a small JSON API rate-limited with httplimit: every caller
// (its API key, or its address when it sends none) gets 5 requests per
// second, and the expensive route is capped at 2 per minute for everyone
// together. Throttled requests get a 429 with Retry-After and RateLimit
// headers, in the shape -format names; allowed ones carry RateLimit headers
// too.
//
//	go run ./examples/http                       # demonstrate on a port of its own and exit
//	go run ./examples/http -format anthropic     # the same, throttled responses in Anthropic's shape
//	go run ./examples/http -addr 127.0.0.1:8080  # serve until interrupted
//	curl -i -H 'X-API-Key: alice' http://127.0.0.1:8080/report
//
// Without -addr it serves on a loopback port of its own, on a clock that
// stands still (nothing sleeps), and is its own client: alice's sixth
// /hello in the same instant is throttled while bob's first is not; the
// third /report of the minute is throttled for everyone, and served again
// once the clock has moved on by the 30 s the answer asked for; a path with
// no route gets a 404 and uses up nothing. It prints each answer's status,
// its Retry-After, retry-after-ms and RateLimit headers, and a throttled
// answer's body, then exits. The third /report within a minute answers,
// with -format anthropic:
//
//	HTTP/1.1 429 Too Many Requests
//	Retry-After: 30
//	…
//	{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit exceeded","limitKey":"per-route/route=GET %2Freport","metric":"requests","retryAfter":30}}
//
// The middleware is mounted after routing, on each route: a request for a
// path that has no route gets a 404 and uses up nothing.
//
// Flags:
//
//	-addr ADDR     address to serve on until interrupted (default: demonstrate
//	               on a loopback port of its own and exit)
//	-format NAME   shape of throttled responses: http (the gateway's body, the
//	               default), anthropic, openai, aws or jsonrpc
//
// An address that cannot be listened on or a flag out of range is reported
// in one line and the exit status is 1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/otelattr"
	"github.com/sluicehq/sluice/stack"
)

// config is the gateway's JSON configuration format.
const config = `{"rateLimits": [
  {"rateLimitId": "per-route", "dimensionKeys": ["route"], "entries": [
    {"dimensions": {"route": "GET /report"}, "requests": [{"rate": 2, "period": "minute"}]}
  ]},
  {"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
    {"dimensions": {"caller": "*"}, "requests": [{"rate": 5, "period": "second"}]}
  ]}
]}`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runArgs(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "http:", err)
		}
		os.Exit(1)
	}
}

// runArgs parses args and serves (with -addr) or demonstrates.
func runArgs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("http", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "address to serve on until interrupted (empty: demonstrate on a loopback port of its own and exit)")
	formatName := fs.String("format", "http", "shape of throttled responses: http (the gateway's), anthropic, openai, aws or jsonrpc")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: all input is given by flags", fs.Arg(0))
	}
	format, err := slerrors.ParseFormat(*formatName)
	if err != nil {
		return fmt.Errorf("-format %q: want http, anthropic, openai, aws or jsonrpc", *formatName)
	}
	if *addr == "" {
		return demo(ctx, stdout, format)
	}
	h, err := newHandler(time.Now, format)
	if err != nil {
		return err
	}
	lis, err := listen(*addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "listening on http://%s (try /hello and /report), throttled responses in the %s format\n", lis.Addr(), format)
	return serve(ctx, h, lis)
}

// listen listens on addr, naming the flag in its error.
func listen(addr string) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-addr %s: %w", addr, err)
	}
	return lis, nil
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

// newHandler builds the API with the rate-limit middleware mounted on each
// route, on the clock now, answering throttled requests in format.
func newHandler(now func() time.Time, format slerrors.Format) (http.Handler, error) {
	limits, err := stack.Load([]byte(config), stack.WithClock(sluice.ClockFunc(now)))
	if err != nil {
		return nil, err
	}
	// Nobody is trusted to set X-Forwarded-For here; behind a proxy, name it:
	// httplimit.NewTrustedProxies("10.0.0.0/8").
	var proxies *httplimit.TrustedProxies
	keys := func(r *http.Request) (sluice.Keys, error) {
		var k sluice.Keys
		k.Set("route", r.Pattern) // the route the mux matched: mounted after routing
		caller := r.Header.Get("X-API-Key")
		if caller == "" {
			if ip, ok := proxies.ClientIP(r); ok {
				caller = ip.String()
			}
		}
		if caller != "" {
			k.Set("caller", caller)
		}
		return k, nil
	}
	// otelattr.Wrap records each decision on the request's span when one is
	// recording (none is in this example, so it costs nothing).
	limit := httplimit.New(otelattr.Wrap(limits), keys, httplimit.WithFormat(format))

	mux := http.NewServeMux()
	mux.Handle("GET /hello", limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]string{"hello": "world"})
	})))
	mux.Handle("GET /report", limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]int{"rows": 42})
	})))
	return mux, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// stillClock is the demonstration's clock: it moves only when told to.
type stillClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stillClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stillClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// shownHeaders are the headers the demonstration prints, when present.
var shownHeaders = []string{"Retry-After", "retry-after-ms", "RateLimit-Policy", "RateLimit", "X-Amzn-ErrorType"}

// demo serves the API on a loopback port of its own, on a clock that stands
// still, and calls it as a client would, printing each answer.
func demo(ctx context.Context, w io.Writer, format slerrors.Format) error {
	clock := &stillClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h, err := newHandler(clock.now, format)
	if err != nil {
		return err
	}
	lis, err := listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serve(ctx, h, lis) }()
	defer func() { cancel(); <-served }()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	base := "http://" + lis.Addr().String()
	fmt.Fprintf(w, "serving on %s, throttled responses in the %s format, the clock standing still; calling it:\n", base, format)

	get := func(path, key string, verbose bool) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("X-API-Key", key)
		res, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(w, "GET %-14s as %-5s  %s\n", path, key, res.Status)
		if !verbose {
			return res.StatusCode, nil
		}
		var hs []string
		for _, name := range shownHeaders {
			if v := res.Header.Get(name); v != "" {
				hs = append(hs, name+": "+v)
			}
		}
		if len(hs) > 0 {
			fmt.Fprintf(w, "  %s\n", strings.Join(hs, " | "))
		}
		if res.StatusCode != http.StatusOK || res.Header.Get("Retry-After") != "" {
			fmt.Fprintf(w, "  %s\n", strings.TrimSpace(string(body)))
		}
		return res.StatusCode, nil
	}
	type step struct {
		path, key string
		verbose   bool
		wait      time.Duration // moves the clock on before the request
		note      string
	}
	for _, s := range []step{
		{path: "/hello", key: "alice", verbose: true, note: "/hello: 5 a second per caller"},
		{path: "/hello", key: "alice"}, {path: "/hello", key: "alice"}, {path: "/hello", key: "alice"},
		{path: "/hello", key: "alice", verbose: true},
		{path: "/hello", key: "alice", verbose: true},
		{path: "/hello", key: "bob", note: "bob has a bucket of his own"},
		{path: "/report", key: "carol", note: "/report: 2 a minute for everyone together"},
		{path: "/report", key: "dave"},
		{path: "/report", key: "erin", verbose: true},
		{path: "/report", key: "erin", wait: 30 * time.Second},
		{path: "/no-such-route", key: "frank", note: "a path with no route is answered 404 before the middleware, using up nothing"},
	} {
		if s.wait > 0 {
			clock.add(s.wait)
			fmt.Fprintf(w, "(the clock moves %v on, as Retry-After asked)\n", s.wait)
		}
		if s.note != "" {
			fmt.Fprintf(w, "%s:\n", s.note)
		}
		if _, err := get(s.path, s.key, s.verbose); err != nil {
			return err
		}
	}
	return nil
}

// Command metrics serves a rate-limited endpoint and exposes sluice's
// OpenTelemetry metrics for Prometheus, through the OpenTelemetry Prometheus
// exporter, while reloading its limits from a file.
//
//	go run ./examples/metrics                  # demonstrate on a port of its own and exit
//	go run ./examples/metrics -addr 127.0.0.1:8080 -config examples/metrics/limits.json
//	curl -H 'X-API-Key: alice' http://127.0.0.1:8080/hello
//	curl http://127.0.0.1:8080/metrics | grep sluice_
//
// The limits are limits.json, built into the program (5 requests per second
// per caller), unless -config names a file. The file is polled every
// -interval (30 s by default): edit it, or better, write a new one and
// rename it over the old, and the new limits apply within one interval. A
// file that cannot be read or does not hold a valid configuration is
// reported, counted in sluice_config_refresh_errors_total, and the last good
// limits stay in force; sluice_config_refresh_age_seconds says how stale
// they may be.
//
// Without -addr it demonstrates all of that on a loopback port of its own,
// on a clock that stands still (nothing sleeps or polls): it writes the
// built-in limits.json to a temporary file, calls /hello as alice until she
// is throttled, scrapes /metrics, renames a file allowing 10 per second
// over the first and refreshes (bob then gets 10), writes a broken file and
// refreshes (refused and counted, the 10 per second stay), prints the
// sluice_ samples after each step, and exits.
//
// Flags:
//
//	-addr ADDR     address to serve on until interrupted (default: demonstrate
//	               on a loopback port of its own and exit)
//	-config PATH   with -addr: the rate-limit configuration file (the
//	               gateway's JSON) to read and poll (default: the built-in
//	               limits.json, never reloaded)
//	-interval D    with -config: how often the file is read, 100ms to 24h
//	               (default 30s)
//
// An address that cannot be listened on, a configuration file that cannot
// be loaded or a flag out of range is reported in one line and the exit
// status is 1.
package main

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/otelmetric"
	"github.com/sluicehq/sluice/stack"
)

// builtinLimits are the limits without -config: 5 requests per second per
// caller.
//
//go:embed limits.json
var builtinLimits []byte

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runArgs(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "metrics:", err)
		}
		os.Exit(1)
	}
}

// runArgs parses args and serves (with -addr) or demonstrates.
func runArgs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("metrics", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "address to serve on until interrupted (empty: demonstrate on a loopback port of its own and exit)")
	path := fs.String("config", "", "with -addr: rate-limit configuration file, the gateway's JSON (empty: the built-in limits.json, never reloaded)")
	interval := fs.Duration("interval", stack.DefaultRefreshInterval, "with -config: how often the configuration file is read, 100ms to 24h")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var intervalSet bool
	fs.Visit(func(f *flag.Flag) { intervalSet = intervalSet || f.Name == "interval" })
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q: all input is given by flags", fs.Arg(0))
	case *interval < 100*time.Millisecond || *interval > 24*time.Hour:
		return fmt.Errorf("-interval %v: must be between 100ms and 24h", *interval)
	case *path != "" && *addr == "":
		return errors.New("-config is for serving: add -addr (without it the example demonstrates itself on a port of its own and exits)")
	case intervalSet && *path == "":
		return errors.New("-interval is for polling a file: add -config (the built-in limits are never reloaded)")
	}
	if *addr == "" {
		return demo(ctx, stdout)
	}
	logger := log.New(stderr, "", log.LstdFlags)
	a, err := newApp(*path, time.Now, func(err error) { logger.Print(err) }, stack.WithInterval(*interval))
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("-addr %s: %w", *addr, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	refreshed := make(chan error, 1)
	go func() { refreshed <- a.source.Run(ctx) }() // stops with ctx
	defer func() { cancel(); <-refreshed }()
	from := "the built-in limits.json"
	if *path != "" {
		from = fmt.Sprintf("%s every %v", *path, *interval)
	}
	fmt.Fprintf(stdout, "listening on http://%s (/hello, /metrics), limits from %s\n", lis.Addr(), from)
	return serve(ctx, a.handler, lis)
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

// app is the program's parts, built by newApp so that the test builds the
// same ones.
type app struct {
	handler http.Handler
	source  *stack.Source
}

// newApp loads the configuration at path (empty: the built-in limits) and
// wires the limiter, its metrics and the configuration source; the source
// is not running yet. logErr is told of backend errors, fallback events and
// failed refreshes, after they are counted.
func newApp(path string, now func() time.Time, logErr func(error), opts ...stack.SourceOption) (*app, error) {
	// The OpenTelemetry SDK, exporting to a Prometheus registry.
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	metrics, err := otelmetric.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter)))
	if err != nil {
		return nil, err
	}

	data, name := builtinLimits, "the built-in limits.json"
	if path != "" {
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("-config: %w", err)
		}
		name = "-config " + path
	}
	limits, err := stack.Load(data, stack.WithClock(sluice.ClockFunc(now)),
		// Backend errors and fallback events, and failed refreshes: counted,
		// then logged.
		stack.WithErrorHandler(metrics.ErrorHandler(logErr)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var source *stack.Source
	if path != "" {
		source = stack.NewFileSource(limits, path, opts...)
	} else { // the same document every time: one generation, never reloaded
		source = stack.NewSource(limits, func(context.Context) ([]byte, error) { return builtinLimits, nil }, opts...)
	}
	metrics.ObserveSource(source)
	limiter := metrics.Wrap(limits)

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		d, err := limiter.Allow(r.Context(), sluice.NewKeys("caller", r.Header.Get("X-API-Key"), "route", "/hello"))
		if err != nil {
			http.Error(w, "could not decide", http.StatusServiceUnavailable)
			return
		}
		if !d.Allowed {
			w.Header().Set("Retry-After", strconv.FormatInt(int64((d.RetryAfter+time.Second-1)/time.Second), 10))
			http.Error(w, "rate limit exceeded ("+d.LimitKey+")", http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "hello")
	})
	return &app{handler: mux, source: source}, nil
}

// stillClock is the demonstration's clock: it moves only when told to.
type stillClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stillClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stillClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// shownMetrics are the samples the demonstration prints.
var shownMetrics = []string{"sluice_decisions_total", "sluice_config_generation", "sluice_config_refresh_errors_total", "sluice_config_refresh_age_seconds"}

// demo serves on a loopback port of its own, on a clock that stands still,
// with the built-in limits in a temporary file, and calls, scrapes,
// reloads and breaks the file in turn.
func demo(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "sluice-metrics-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "limits.json")
	if err := os.WriteFile(path, builtinLimits, 0o644); err != nil {
		return err
	}
	clock := &stillClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a, err := newApp(path, clock.now, func(err error) { fmt.Fprintf(w, "  logged: %v\n", err) })
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serve(ctx, a.handler, lis) }()
	defer func() { cancel(); <-served }()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	base := "http://" + lis.Addr().String()

	get := func(path, caller string) (*http.Response, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return nil, "", err
		}
		req.Header.Set("X-API-Key", caller)
		res, err := client.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return res, string(b), err
	}
	// hello calls /hello as caller until throttled (at most 20 times) and
	// prints the statuses and the throttled answer.
	hello := func(caller string) error {
		var codes []string
		for range 20 {
			res, body, err := get("/hello", caller)
			if err != nil {
				return err
			}
			codes = append(codes, strconv.Itoa(res.StatusCode))
			if res.StatusCode != http.StatusOK {
				fmt.Fprintf(w, "GET /hello as %s, %d times: %s\n  Retry-After: %s | %s\n", caller, len(codes), strings.Join(codes, " "),
					res.Header.Get("Retry-After"), strings.TrimSpace(body))
				return nil
			}
		}
		return fmt.Errorf("%s was not throttled in %d calls", caller, len(codes))
	}
	scrape := func() error {
		res, body, err := get("/metrics", "")
		if err != nil {
			return err
		}
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("/metrics answered %s", res.Status)
		}
		fmt.Fprintln(w, "GET /metrics | grep sluice_ (some of them):")
		sc := bufio.NewScanner(strings.NewReader(body))
		for sc.Scan() {
			for _, name := range shownMetrics {
				if line := sc.Text(); strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
					fmt.Fprintf(w, "  %s\n", dropScopeLabels(line))
				}
			}
		}
		return sc.Err()
	}
	refresh := func() {
		if err := a.source.Refresh(ctx); err == nil {
			fmt.Fprintf(w, "refreshed: generation %d\n", a.source.Status().Generation)
		}
	}

	fmt.Fprintf(w, "serving /hello and /metrics on %s, limits from a copy of the built-in limits.json (5 a second per caller), the clock standing still:\n", base)
	refresh()
	if err := hello("alice"); err != nil {
		return err
	}
	if err := scrape(); err != nil {
		return err
	}
	fmt.Fprintln(w, "a new limits.json, 10 a second per caller, renamed over the first:")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Replace(string(builtinLimits), `"rate": 5`, `"rate": 10`, 1)), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	refresh()
	if err := hello("bob"); err != nil {
		return err
	}
	clock.add(15 * time.Second)
	fmt.Fprintln(w, "(the clock moves 15s on) a broken limits.json written in place, refused; the 10 a second stay:")
	if err := os.WriteFile(path, []byte(`{"rateLimits": [`), 0o644); err != nil {
		return err
	}
	refresh()
	if err := hello("carol"); err != nil {
		return err
	}
	return scrape()
}

// dropScopeLabels removes the otel_scope_* labels, the same on every
// sample, from a sample line, for reading.
func dropScopeLabels(line string) string {
	open, end := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
	if open < 0 || end < open {
		return line
	}
	var kept []string
	for _, l := range strings.Split(line[open+1:end], ",") {
		if !strings.HasPrefix(l, "otel_scope_") {
			kept = append(kept, l)
		}
	}
	if len(kept) == 0 {
		return line[:open] + line[end+1:]
	}
	return line[:open+1] + strings.Join(kept, ",") + line[end:]
}

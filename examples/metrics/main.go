// Command metrics serves a rate-limited endpoint and exposes sluice's
// OpenTelemetry metrics for Prometheus, through the OpenTelemetry Prometheus
// exporter, while reloading its limits from a file.
//
//	go run ./examples/metrics -config examples/metrics/limits.json -addr 127.0.0.1:8080
//	curl -H 'X-API-Key: alice' http://127.0.0.1:8080/hello
//	curl http://127.0.0.1:8080/metrics | grep sluice_
//
// The file is polled every -interval (30 s by default): edit it, or better,
// write a new one and rename it over the old, and the new limits apply
// within one interval. A file that cannot be read or does not hold a valid
// configuration is reported, counted in sluice_config_refresh_errors_total,
// and the last good limits stay in force; sluice_config_refresh_age_seconds
// says how stale they may be.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/otelmetric"
	"github.com/sluicehq/sluice/stack"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	path := flag.String("config", "limits.json", "rate-limit configuration file (the gateway's JSON)")
	interval := flag.Duration("interval", stack.DefaultRefreshInterval, "how often the configuration file is read")
	flag.Parse()

	a, err := newApp(*path, time.Now, stack.WithInterval(*interval))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go a.source.Run(ctx) // stops with ctx

	srv := &http.Server{Addr: *addr, Handler: a.handler, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Printf("listening on http://%s (/hello, /metrics), limits from %s every %v", *addr, *path, *interval)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

// app is the program's parts, built by newApp so that the test builds the
// same ones.
type app struct {
	handler http.Handler
	source  *stack.Source
}

// newApp loads the configuration at path and wires the limiter, its metrics
// and the configuration source; the source is not running yet.
func newApp(path string, now func() time.Time, opts ...stack.SourceOption) (*app, error) {
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

	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	limits, err := stack.Load(data, stack.WithClock(now),
		// Backend errors and fallback events, and failed refreshes: counted,
		// then logged.
		stack.WithErrorHandler(metrics.ErrorHandler(func(err error) { log.Print(err) })))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	source := stack.NewFileSource(limits, path, opts...)
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

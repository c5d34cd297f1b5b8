// Command sluice-rls is Envoy's rate limit service
// (envoy.service.ratelimit.v3) deciding with sluice's exact token buckets,
// configured as envoyproxy/ratelimit is: the same environment variables with
// the same defaults, the same runtime directory of YAML files
// (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY), the same
// endpoints and the same metric names. Switching is changing the binary or
// the image and keeping the environment.
//
//	go install github.com/sluicehq/sluice/envoyrls/cmd/sluice-rls@latest
//	USE_STATSD=false REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:6379 \
//	  RUNTIME_ROOT=/data RUNTIME_SUBDIRECTORY=ratelimit sluice-rls
//
// Listeners (their defaults): gRPC on GRPC_HOST:GRPC_PORT (0.0.0.0:8081, or
// the unix socket GRPC_UDS) with ShouldRateLimit and the gRPC health service
// (services "" and "ratelimit"); HTTP on HOST:PORT (0.0.0.0:8080) with
// /healthcheck (200 "OK" while healthy; 500 while Redis does not answer, after
// SIGTERM, or, with HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED, until a
// configuration has loaded) and /json (ShouldRateLimit with the request and
// response as protobuf JSON; 429 when over the limit, 400 for a bad request);
// the debug listener on DEBUG_HOST:DEBUG_PORT (0.0.0.0:6070) with /rlconfig
// (the loaded rules as text), /stats and /debug/pprof/; with USE_PROMETHEUS,
// PROMETHEUS_ADDR (:9090) serving PROMETHEUS_PATH (/metrics).
//
// Metrics: per rule, envoyproxy/ratelimit's total_hits, over_limit,
// near_limit, within_limit and shadow_mode: to statsd (USE_STATSD, their
// default true; STATSD_HOST, STATSD_PORT, EXTRA_TAGS, STATS_FLUSH_INTERVAL)
// as ratelimit.service.rate_limit.<domain>.<key_value...>.<stat> through
// lyft/gostats, and to Prometheus through OpenTelemetry's exporter as
// ratelimit_service_rate_limit_<stat>{domain,key1,key2}, the names their
// default statsd-to-Prometheus mapping gives; beside them sluice's own
// OpenTelemetry metrics (package otelmetric: sluice_decisions and the rest,
// see dashboard.json). Series are per configured rule, never per value.
//
// LOCAL_CACHE_SIZE_IN_BYTES sizes the Redis backend's near-cache of
// denials, which answers a bucket's repeated denials in this process until
// the instant Redis would admit it: a positive size in bytes, or 0 for no
// cache, as theirs. Unset, the cache is on with 1 MiB (theirs is off):
// it is exact, a cached denial only denies, and only until the instant
// Redis would admit the bucket as this process last saw it; the startup
// log says so once.
//
// Variables that only tune envoyproxy/ratelimit's implementation (pool
// size, pipeline window and limit, expiration jitter) are accepted and
// logged once as not needed. Variables asking for what is not
// offered (BACKEND_TYPE=memcache, CONFIG_TYPE=GRPC_XDS_SOTW,
// REDIS_PERSECOND*, MERGE_DOMAIN_CONFIG=true, TRACING_ENABLED=true,
// USE_DOG_STATSD=true, PROMETHEUS_MAPPER_YAML) stop the start with an error
// naming them, as does a malformed value (a port that is not a number, an
// unknown LOG_LEVEL): one line, exit status 1. BACKEND_TYPE=memory decides in
// memory (one process; sluice's addition).
//
// Redis is pinged at startup and retried as theirs is
// (REDIS_STARTUP_INITIAL_INTERVAL doubling up to REDIS_STARTUP_MAX_INTERVAL,
// for at most REDIS_STARTUP_MAX_ELAPSED_TIME, 0 meaning until stopped), then
// the start fails with the cause. The configuration directory is read again
// every second (-reload), through RUNTIME_ROOT, so a directory swapped by
// symlink is applied; a bad file is logged and the last good configuration
// stays. SIGTERM turns the health checks to failing, lets requests in flight
// finish, and exits.
//
// Flags, for those who prefer them, win over the environment:
//
//	-config PATH   configuration file or directory (instead of the RUNTIME_* path)
//	-redis ADDR    Redis host:port over TCP (instead of REDIS_*); "" decides in memory
//	-addr ADDR     gRPC address (instead of GRPC_HOST:GRPC_PORT)
//	-http ADDR     HTTP address (instead of HOST:PORT)
//	-debug ADDR    debug address (instead of DEBUG_HOST:DEBUG_PORT)
//	-shadow        global shadow mode (as SHADOW_MODE=true)
//	-fail-closed   answer OVER_LIMIT when Redis cannot decide (default: OK)
//	-reload D      how often to read the configuration again (1s; 0: never)
//	-denial-cache N  bytes of the near-cache of denials, 0: off (instead of LOCAL_CACHE_SIZE_IN_BYTES)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func main() {
	goredis.SetLogger(quietLogger{}) // failures are logged by the command, at a bounded rate
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Environ(), os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "sluice-rls:", err)
		}
		os.Exit(1)
	}
}

// flags are the command line's; set names the ones given.
type flags struct {
	config, redis, addr, http, debug string
	shadow, failClosed               bool
	reload                           time.Duration
	denialCache                      int
	set                              map[string]bool
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	f := flags{set: map[string]bool{}}
	fs := flag.NewFlagSet("sluice-rls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "configuration file or directory (default: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY)")
	fs.StringVar(&f.redis, "redis", "", `Redis host:port over TCP (default: REDIS_*); "" decides in memory`)
	fs.StringVar(&f.addr, "addr", "", "gRPC address host:port (default: GRPC_HOST:GRPC_PORT)")
	fs.StringVar(&f.http, "http", "", "HTTP address host:port (default: HOST:PORT)")
	fs.StringVar(&f.debug, "debug", "", "debug address host:port (default: DEBUG_HOST:DEBUG_PORT)")
	fs.BoolVar(&f.shadow, "shadow", false, "global shadow mode: decide and report, always answer OK (as SHADOW_MODE)")
	fs.BoolVar(&f.failClosed, "fail-closed", false, "answer OVER_LIMIT when Redis cannot decide (default: OK)")
	fs.IntVar(&f.denialCache, "denial-cache", 0, "bytes of the Redis backend's near-cache of denials, 0: off (instead of LOCAL_CACHE_SIZE_IN_BYTES; default: 1 MiB)")
	fs.DurationVar(&f.reload, "reload", time.Second, "how often to read the configuration again, 0 (never) or 100ms to 1h")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	switch {
	case fs.NArg() > 0:
		return f, fmt.Errorf("unexpected argument %q: configure with environment variables or flags", fs.Arg(0))
	case f.reload != 0 && (f.reload < 100*time.Millisecond || f.reload > time.Hour):
		return f, fmt.Errorf("-reload %v: must be 0 (never) or between 100ms and 1h", f.reload)
	case f.denialCache < 0:
		return f, fmt.Errorf("-denial-cache %d: must be 0 (off) or a size in bytes", f.denialCache)
	}
	for _, name := range []string{"config", "addr", "http", "debug"} {
		if f.set[name] && strings.TrimSpace(map[string]string{"config": f.config, "addr": f.addr, "http": f.http, "debug": f.debug}[name]) == "" {
			return f, fmt.Errorf("-%s: empty", name)
		}
	}
	return f, nil
}

// run reads the flags and the environment and serves until ctx ends.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	s, notes, err := loadSettings(lookup, environ)
	if err != nil {
		return err
	}
	svc, err := start(ctx, s, f, notes, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, svc.banner())
	return svc.serve(ctx)
}

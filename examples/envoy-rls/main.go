// Command envoy-rls is Envoy's rate limit service
// (envoy.service.ratelimit.v3), deciding with sluice's exact buckets. It
// loads envoyproxy/ratelimit's YAML unchanged, or sluice's gateway JSON, and
// reloads the file or directory when it changes (each applied reload is
// logged; a bad file is logged and the last good configuration stays).
//
//	go run ./examples/envoy-rls
//	go run ./examples/envoy-rls -config examples/envoy-rls/ratelimit.yaml
//	go run ./examples/envoy-rls -config /etc/ratelimit/config -redis 127.0.0.1:6379 -addr 0.0.0.0:8081
//
// Without -config it demonstrates itself: it serves the ratelimit.yaml
// built into it on a loopback port, asks it four times what Envoy asks for
// the README's bootstrap (a client address; a login path with the client
// address), prints the answers and exits. With -config it serves until
// interrupted.
//
// Flags:
//
//	-config PATH   envoyproxy/ratelimit YAML file or directory, or a gateway JSON file
//	-redis ADDR    Redis host:port; every instance sharing it shares the limits
//	               (empty: in memory). Checked with PING at startup.
//	-addr ADDR     gRPC address to serve on (default 127.0.0.1:8081)
//	-fail-closed   answer OVER_LIMIT when Redis cannot decide (default: OK)
//	-shadow        decide and report, always answer OK
//	-reload D      how often to check -config for changes (default 2s; 0: never)
//
// A Redis that does not answer, an address that cannot be listened on or a
// flag out of range is reported in one line and the exit status is 1. When
// Redis fails while serving, the first failed decision is logged with its
// cause, then at most one summary line every 10 s. See README.md for an
// Envoy bootstrap that points envoy.filters.http.ratelimit at it.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/envoyrls"
	sluiceredis "github.com/sluicehq/sluice/redis"
)

//go:embed ratelimit.yaml
var builtinConfig []byte

// options are the command line's.
type options struct {
	config     string // empty: the built-in ratelimit.yaml, never reloaded
	redis      string
	addr       string
	failClosed bool
	shadow     bool
	reload     time.Duration
	logger     *log.Logger // nil: the log package's default
}

// failureSummaryEvery is how often, at most, repeated backend failures are
// summarized in the log.
const failureSummaryEvery = 10 * time.Second

// quietLogger drops go-redis's own log lines: a failure is reported by the
// example, with its cause, at a bounded rate.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runArgs(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "envoy-rls:", err)
		}
		os.Exit(1)
	}
}

// runArgs parses args and serves (with -config) or runs the demonstration.
func runArgs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	o.logger = log.New(stderr, "", log.LstdFlags)
	if o.config == "" {
		return demo(ctx, stdout, o)
	}
	return run(ctx, stdout, o, time.Now)
}

// parseArgs reads the flags and checks their ranges.
func parseArgs(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("envoy-rls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "", "envoyproxy/ratelimit YAML file or directory, or a gateway JSON file (empty: demonstrate the built-in ratelimit.yaml and exit)")
	fs.StringVar(&o.redis, "redis", "", "Redis address host:port; empty decides in memory")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8081", "gRPC address to serve on")
	fs.BoolVar(&o.failClosed, "fail-closed", false, "answer OVER_LIMIT when Redis cannot decide (default: OK)")
	fs.BoolVar(&o.shadow, "shadow", false, "global shadow mode: decide and report, always answer OK")
	fs.DurationVar(&o.reload, "reload", 2*time.Second, "how often to check the configuration for changes, 0 (never) or 100ms to 1h")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var serveOnly string
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "addr" || f.Name == "reload" {
			serveOnly = f.Name
		}
	})
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q: all input is given by flags", fs.Arg(0))
	case o.config == "" && serveOnly != "":
		return o, fmt.Errorf("-%s is for serving: add -config (without it the example demonstrates itself on a port of its own and exits)", serveOnly)
	case o.reload != 0 && (o.reload < 100*time.Millisecond || o.reload > time.Hour):
		return o, fmt.Errorf("-reload %v: must be 0 (never) or between 100ms and 1h", o.reload)
	case o.addr == "":
		return o, errors.New("-addr: empty; give host:port")
	}
	return o, nil
}

// pingRedis says, in one error naming addr, why the Redis server there does
// not answer PING within 2 s.
func pingRedis(addr string) error {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 2 * time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := cl.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot reach Redis at -redis %s: %w", addr, err)
	}
	return nil
}

// dialTracker remembers the last failed dial to Redis, so that a decision
// that ran out of time while go-redis was redialling reports why
// (connection refused), not only the deadline.
type dialTracker struct {
	last atomic.Pointer[error]
}

func (d *dialTracker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil && ctx.Err() == nil {
		d.last.Store(&err)
	} else if err == nil {
		d.last.Store(nil)
	}
	return c, err
}

// cause adds the last dial failure to a deadline error.
func (d *dialTracker) cause(err error) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if p := d.last.Load(); p != nil {
		return fmt.Errorf("%w (cause: %w)", err, *p)
	}
	return err
}

// failureLog logs backend failures at a bounded rate: a failure after a
// quiet interval at once, then at most one summary line (how many more
// failed, and the last one's error) per interval. Safe for concurrent use.
type failureLog struct {
	now   func() time.Time
	every time.Duration
	logf  func(format string, args ...any)

	mu      sync.Mutex
	last    time.Time // when a line was last written
	logged  bool
	n       int // failures since then, not yet written
	lastErr error
}

func (f *failureLog) report(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.now()
	quiet := !f.logged || t.Sub(f.last) >= f.every
	switch {
	case f.n == 0 && quiet:
		f.logf("rate limit decision failed: %v", err)
	case quiet:
		f.logf("%d more rate limit decisions failed in %v, the last: %v", f.n+1, t.Sub(f.last).Round(time.Second), err)
		f.n = 0
	default:
		f.n++
		f.lastErr = err
		return
	}
	f.logged, f.last = true, t
}

// flush writes what is not written yet.
func (f *failureLog) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n > 0 {
		f.logf("%d more rate limit decisions failed, the last: %v", f.n, f.lastErr)
		f.n = 0
	}
}

// checkReload runs one round of wt and logs a reload it applied.
func checkReload(wt *envoyrls.Watcher, rls *envoyrls.Server, path string, logger *log.Logger) {
	if ok, _ := wt.Check(); ok { // a refused change goes to the watcher's onError
		logger.Printf("reloaded %s: domains %v", path, rls.Config().Domains())
	}
}

// service is a started server, not serving yet.
type service struct {
	srv     *grpc.Server
	lis     net.Listener
	where   string
	domains []string
	cleanup []func()
}

func (s *service) close() {
	for i := len(s.cleanup) - 1; i >= 0; i-- {
		s.cleanup[i]()
	}
}

// start loads the configuration, checks Redis, and listens.
func start(o options, now func() time.Time) (_ *service, err error) {
	logger := o.logger
	if logger == nil {
		logger = log.Default()
	}
	s := &service{where: "in memory"}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	var cfg *envoyrls.Config
	if o.config == "" {
		cfg, err = envoyrls.Parse(map[string][]byte{"ratelimit.yaml": builtinConfig})
	} else {
		cfg, err = envoyrls.Load(o.config)
	}
	if err != nil {
		return nil, err
	}
	var tracker dialTracker
	failures := &failureLog{now: now, every: failureSummaryEvery, logf: logger.Printf}
	s.cleanup = append(s.cleanup, failures.flush)
	onError := func(err error) { failures.report(tracker.cause(err)) }
	opts := []envoyrls.Option{envoyrls.WithClock(sluice.ClockFunc(now)), envoyrls.WithErrorHandler(onError)}
	if o.failClosed {
		opts = append(opts, envoyrls.WithFailClosed())
	}
	if o.shadow {
		opts = append(opts, envoyrls.WithShadowMode())
	}
	if o.redis != "" {
		if err := pingRedis(o.redis); err != nil {
			return nil, err
		}
		client := redis.NewClient(&redis.Options{Addr: o.redis, ContextTimeoutEnabled: true, Dialer: tracker.dial})
		s.cleanup = append(s.cleanup, func() { client.Close() })
		rb, err := sluiceredis.New(client)
		if err != nil {
			return nil, err
		}
		opts = append(opts, envoyrls.WithBackend(rb))
		s.where = "on Redis " + o.redis
	}
	rls := envoyrls.New(cfg, opts...)
	s.domains = cfg.Domains()
	if o.config != "" && o.reload > 0 {
		wt := envoyrls.NewWatcher(rls, o.config, func(err error) {
			logger.Printf("reload of %s refused, the last good configuration stays: %v", o.config, err)
		})
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(o.reload)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					checkReload(wt, rls, o.config, logger)
				}
			}
		}()
		s.cleanup = append(s.cleanup, func() { close(stop); <-done })
	}

	s.srv = grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(s.srv, rls)
	healthpb.RegisterHealthServer(s.srv, health.NewServer())
	if s.lis, err = net.Listen("tcp", o.addr); err != nil {
		return nil, fmt.Errorf("-addr %s: %w", o.addr, err)
	}
	return s, nil
}

// serve serves until ctx ends.
func (s *service) serve(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		s.srv.GracefulStop()
	}()
	err := s.srv.Serve(s.lis)
	<-done
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

// run serves until ctx ends, saying on w where it listens.
func run(ctx context.Context, w io.Writer, o options, now func() time.Time) error {
	s, err := start(o, now)
	if err != nil {
		return err
	}
	defer s.close()
	fmt.Fprintf(w, "serving envoy.service.ratelimit.v3 on %s, deciding %s, domains %v\n", s.lis.Addr(), s.where, s.domains)
	return s.serve(ctx)
}

// demo serves the built-in configuration on a loopback port and asks it
// what Envoy would ask for the README's bootstrap, four times.
func demo(ctx context.Context, w io.Writer, o options) error {
	o.addr = "127.0.0.1:0"
	s, err := start(o, time.Now)
	if err != nil {
		return err
	}
	defer s.close()
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- s.serve(ctx) }()
	err = ask(ctx, w, s.lis.Addr().String(), s.where)
	cancel()
	if serr := <-served; err == nil {
		err = serr
	}
	return err
}

// ask sends the README's two descriptors four times and prints the answers.
func ask(ctx context.Context, w io.Writer, addr, where string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	entry := func(k, v string) *ratelimitv3.RateLimitDescriptor_Entry {
		return &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v}
	}
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("remote_address", "10.0.0.1")}},
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("path", "/login"), entry("remote_address", "10.0.0.1")}},
	}}
	fmt.Fprintf(w, "built-in ratelimit.yaml served on %s, deciding %s: 10 requests a minute per client, 3 logins every 30 s\n", addr, where)
	fmt.Fprintln(w, "Envoy asks about [remote_address=10.0.0.1] and [path=/login, remote_address=10.0.0.1]:")
	for i := 1; i <= 4; i++ {
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			return fmt.Errorf("ShouldRateLimit on %s: %w", addr, err)
		}
		fmt.Fprintf(w, "  login %d: %s\n", i, answer(resp))
	}
	return nil
}

// answer is one line: the overall code, the headers to add, who denied.
func answer(resp *rlsv3.RateLimitResponse) string {
	s := resp.OverallCode.String()
	for _, h := range resp.ResponseHeadersToAdd {
		s += " | " + h.Key + ": " + h.Value
	}
	if d := resp.DynamicMetadata; d != nil {
		s += " | denied_by " + d.Fields["denied_by"].GetStringValue()
	}
	return s
}

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	gostats "github.com/lyft/gostats"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	goredis "github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/otelmetric"
	sluiceredis "github.com/sluicehq/sluice/redis"
)

// redisProbeEvery is how often Redis is pinged for the health check.
const redisProbeEvery = time.Second

// service is a started server: listening, not serving yet.
type service struct {
	log      *slog.Logger
	s        settings
	rls      *envoyrls.Server
	health   *healthState
	grpc     *grpc.Server
	grpcLis  net.Listener
	https    []*http.Server
	httpLis  []net.Listener
	where    string
	cfgPath  string
	stats    *serverStats  // nil without metrics
	store    gostats.Store // nil without statsd
	cleanup  []func()
	bg       sync.WaitGroup
	stopBg   chan struct{}
	stopOnce sync.Once
}

func (v *service) close() {
	v.stopOnce.Do(func() { close(v.stopBg) })
	v.bg.Wait()
	for i := len(v.cleanup) - 1; i >= 0; i-- {
		v.cleanup[i]()
	}
}

// banner says where the service listens, in one line.
func (v *service) banner() string {
	parts := []string{"grpc " + v.grpcLis.Addr().String()}
	for i, srv := range v.https {
		parts = append(parts, srv.Addr+" "+v.httpLis[i].Addr().String())
	}
	return fmt.Sprintf("sluice-rls serving %s; deciding %s; configuration %s", strings.Join(parts, ", "), v.where, v.cfgPath)
}

func newLogger(s settings, w io.Writer) *slog.Logger {
	o := &slog.HandlerOptions{Level: s.LogLevel}
	if s.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// denialCacheOption maps LOCAL_CACHE_SIZE_IN_BYTES (or -denial-cache) to
// the Redis backend's near-cache of denials, with their meaning of a size
// and of 0 (no cache), and logs once what was chosen.
func denialCacheOption(s settings, f flags, log *slog.Logger) sluiceredis.Option {
	from := "LOCAL_CACHE_SIZE_IN_BYTES"
	if f.set["denial-cache"] {
		from = "-denial-cache"
	}
	switch {
	case s.DenialCache == denialCacheUnset:
		log.Info("denial cache on with 1 MiB, sluice's default (LOCAL_CACHE_SIZE_IN_BYTES is not set; 0 turns it off): " +
			"it is exact, a cached denial only denies, until the instant Redis would admit the bucket")
		return nil // a nil Option is ignored: the backend's default
	case s.DenialCache == 0:
		log.Info("denial cache off: every decision is a call to Redis", "from", from)
		return sluiceredis.WithoutDenialCache()
	default:
		log.Info("denial cache on: a cached denial only denies, until the instant Redis would admit the bucket", "bytes", s.DenialCache, "from", from)
		return sluiceredis.WithDenialCache(s.DenialCache)
	}
}

// start applies the flags over the settings, connects to Redis, loads the
// configuration and listens.
func start(ctx context.Context, s settings, f flags, notes []string, stderr io.Writer) (_ *service, err error) {
	v := &service{log: newLogger(s, stderr), s: s, stopBg: make(chan struct{}), where: "in memory"}
	defer func() {
		if err != nil {
			v.close()
		}
	}()
	for _, n := range notes {
		v.log.Info(n)
	}
	grpcAddr, httpAddr, debugAddr := hostPort(s.GrpcHost, s.GrpcPort), hostPort(s.Host, s.Port), hostPort(s.DebugHost, s.DebugPort)
	if f.set["addr"] {
		grpcAddr, s.GrpcUds = f.addr, ""
	}
	if f.set["http"] {
		httpAddr = f.http
	}
	if f.set["debug"] {
		debugAddr = f.debug
	}
	if f.set["shadow"] {
		s.Shadow = f.shadow
	}
	if f.set["redis"] {
		if f.redis == "" {
			s.Backend = "memory"
		} else {
			s.Backend, s.RedisSocketType, s.RedisType, s.RedisURL = "redis", "tcp", "single", f.redis
		}
	}
	if f.set["denial-cache"] {
		s.DenialCache = f.denialCache
	}
	if s.Backend == "memory" && s.DenialCache != denialCacheUnset {
		v.log.Info("LOCAL_CACHE_SIZE_IN_BYTES is not needed in memory: every decision is made in this process")
	}
	v.cfgPath = s.ConfigPath()
	if f.set["config"] {
		v.cfgPath = f.config
	}

	components := []string{}
	if s.Backend == "redis" {
		components = append(components, healthRedis)
	}
	if s.HealthyWithConfig {
		components = append(components, healthConfig)
	}
	v.health = newHealth(components...)

	// Metrics.
	var sinks ruleSinks
	var mp *sdkmetric.MeterProvider
	var reg *prometheus.Registry
	if s.DisableStats {
		v.log.Info("stats disabled (DISABLE_STATS)")
	}
	if s.UsePrometheus && !s.DisableStats {
		reg = prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo(),
			otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithoutSuffixes))
		if err != nil {
			return nil, fmt.Errorf("USE_PROMETHEUS: %w", err)
		}
		mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
		v.cleanup = append(v.cleanup, func() { mp.Shutdown(context.Background()) })
		pr, err := newPromRules(mp)
		if err != nil {
			return nil, fmt.Errorf("USE_PROMETHEUS: %w", err)
		}
		sinks = append(sinks, pr.record)
	}
	if s.UseStatsd && !s.DisableStats {
		store := gostats.NewStore(gostats.NewTCPStatsdSink(gostats.WithStatsdHost(s.StatsdHost), gostats.WithStatsdPort(s.StatsdPort),
			gostats.WithLogger(slogStatsLogger{v.log})), false)
		sctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); store.StartContext(sctx, time.NewTicker(s.FlushInterval)) }()
		v.cleanup = append(v.cleanup, func() { cancel(); <-done })
		sinks = append(sinks, newStatsdRules(store, s.ExtraTags).record)
		v.store = store
	}
	if mp != nil || v.store != nil {
		var mpi metric.MeterProvider
		if mp != nil {
			mpi = mp
		}
		if v.stats, err = newServerStats(mpi, v.store, s.ExtraTags); err != nil {
			return nil, fmt.Errorf("USE_PROMETHEUS: %w", err)
		}
	}

	failures := &failureLog{now: time.Now, every: 10 * time.Second, log: v.log}
	v.cleanup = append(v.cleanup, failures.flush)
	opts := []envoyrls.Option{envoyrls.WithErrorHandler(failures.report), envoyrls.WithNearLimitRatio(s.NearLimitRatio)}
	if len(sinks) > 0 {
		opts = append(opts, envoyrls.WithRuleStats(sinks.record))
	}
	var metrics *otelmetric.Metrics
	if mp != nil {
		if metrics, err = otelmetric.New(mp); err != nil {
			return nil, fmt.Errorf("USE_PROMETHEUS: %w", err)
		}
		opts = append(opts, envoyrls.WithMetrics(metrics))
	}
	if f.failClosed {
		opts = append(opts, envoyrls.WithFailClosed())
	}
	if s.Shadow {
		opts = append(opts, envoyrls.WithShadowMode())
	}

	// Redis.
	if s.Backend == "redis" {
		client, err := redisClient(s)
		if err != nil {
			return nil, err
		}
		v.cleanup = append(v.cleanup, func() { client.Close() })
		if err := waitRedis(ctx, client, s, v.log); err != nil {
			return nil, err
		}
		v.health.set(healthRedis, true)
		bopts := []sluiceredis.Option{}
		if s.CacheKeyPrefix != "" {
			bopts = append(bopts, sluiceredis.WithKeyPrefix(s.CacheKeyPrefix))
		}
		if s.RedisTimeout > 0 {
			bopts = append(bopts, sluiceredis.WithTimeout(s.RedisTimeout))
		}
		bopts = append(bopts, denialCacheOption(s, f, v.log))
		rb, err := sluiceredis.New(client, bopts...)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL=%q: %w", s.RedisURL, err)
		}
		if metrics != nil {
			metrics.ObserveDenialCache(rb.DenialCacheStats)
		}
		if v.store != nil && s.DenialCache != 0 {
			v.store.AddStatGenerator(newDenialCacheGauges(v.store, s.ExtraTags, rb.DenialCacheStats))
		}
		opts = append(opts, envoyrls.WithBackend(rb))
		v.where = fmt.Sprintf("on Redis %s (%s, %s)", s.RedisURL, s.RedisType, s.RedisSocketType)
		v.goProbe(client)
	}

	// Configuration.
	cfg, err := envoyrls.Load(v.cfgPath)
	switch {
	case err == nil:
		v.stats.load(true)
		v.health.set(healthConfig, true)
		v.log.Info("configuration loaded", "path", v.cfgPath, "domains", cfg.Domains())
	case s.ForceStart:
		v.stats.load(false)
		v.log.Warn("starting without a configuration (FORCE_START_WITHOUT_INITIAL_CONFIG)", "path", v.cfgPath, "error", err)
		cfg = nil
	default:
		return nil, fmt.Errorf("configuration %s: %w", v.cfgPath, err)
	}
	v.rls = envoyrls.New(cfg, opts...)
	v.rls.SetQuotaMode(s.Quota)
	if f.reload > 0 {
		v.goWatch(f.reload)
	}

	// Listeners.
	var gopts []grpc.ServerOption
	gopts = append(gopts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: s.GrpcMaxConnAge, MaxConnectionAgeGrace: s.GrpcMaxConnAgeGrace}))
	if s.GrpcTLS {
		tc, err := serverTLS(s)
		if err != nil {
			return nil, err
		}
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(tc)))
	}
	v.grpc = grpc.NewServer(gopts...)
	ans := &answerer{rls: v.rls, s: s, stats: v.stats}
	rlsv3.RegisterRateLimitServiceServer(v.grpc, ans)
	healthpb.RegisterHealthServer(v.grpc, v.health.grpc)
	if s.GrpcUds != "" {
		os.Remove(s.GrpcUds)
		if v.grpcLis, err = net.Listen("unix", s.GrpcUds); err != nil {
			return nil, fmt.Errorf("GRPC_UDS=%q: %w", s.GrpcUds, err)
		}
	} else if v.grpcLis, err = net.Listen("tcp", grpcAddr); err != nil {
		return nil, fmt.Errorf("gRPC listener %s (GRPC_HOST, GRPC_PORT): %w", grpcAddr, err)
	}

	mux := http.NewServeMux()
	mux.Handle("/healthcheck", v.health)
	mux.Handle("/json", jsonHandler(ans, v.log))
	if err := v.listenHTTP("http", httpAddr, "HOST, PORT", mux); err != nil {
		return nil, err
	}
	if err := v.listenHTTP("debug", debugAddr, "DEBUG_HOST, DEBUG_PORT", v.debugMux()); err != nil {
		return nil, err
	}
	if reg != nil {
		pm := http.NewServeMux()
		pm.Handle(s.PrometheusPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if err := v.listenHTTP("prometheus", s.PrometheusAddr, "PROMETHEUS_ADDR", pm); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (v *service) listenHTTP(name, addr, vars string, h http.Handler) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s listener %s (%s): %w", name, addr, vars, err)
	}
	v.https = append(v.https, &http.Server{Addr: name, Handler: h, ReadHeaderTimeout: 10 * time.Second})
	v.httpLis = append(v.httpLis, lis)
	return nil
}

// debugMux serves /rlconfig, /stats and pprof, and lists them at /.
func (v *service) debugMux() *http.ServeMux {
	m := http.NewServeMux()
	endpoints := map[string]string{
		"/rlconfig":            "print out the currently loaded configuration for debugging",
		"/stats":               "print out stats",
		"/debug/pprof/":        "root of various pprof endpoints. hit for help.",
		"/debug/pprof/profile": "CPU profiling endpoint",
		"/debug/pprof/trace":   "trace endpoint",
	}
	m.HandleFunc("/rlconfig", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, v.rls.Config().String())
	})
	m.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		v.health.mu.Lock()
		comps := make([]string, 0, len(v.health.comp))
		for c, ok := range v.health.comp {
			comps = append(comps, fmt.Sprintf("health.%s: %t", c, ok))
		}
		v.health.mu.Unlock()
		sort.Strings(comps)
		for _, c := range comps {
			fmt.Fprintln(w, c)
		}
	})
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		keys := make([]string, 0, len(endpoints))
		for k := range endpoints {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "%s: %s\n", k, endpoints[k])
		}
	})
	return m
}

// goWatch reads the configuration again every interval; a change applied
// is logged and marks the configuration healthy, a refused one is logged
// and the last good configuration stays.
func (v *service) goWatch(every time.Duration) {
	wt := envoyrls.NewWatcher(v.rls, v.cfgPath, func(err error) {
		v.stats.load(false)
		v.log.Error("configuration refused, the last good one stays", "path", v.cfgPath, "error", err)
	})
	v.bg.Add(1)
	go func() {
		defer v.bg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-v.stopBg:
				return
			case <-t.C:
				if ok, _ := wt.Check(); ok {
					v.stats.load(true)
					v.health.set(healthConfig, true)
					v.log.Info("configuration reloaded", "path", v.cfgPath, "domains", v.rls.Config().Domains())
				}
			}
		}
	}()
}

// goProbe pings Redis every redisProbeEvery and keeps the health's redis
// component up to date.
func (v *service) goProbe(client goredis.UniversalClient) {
	v.bg.Add(1)
	go func() {
		defer v.bg.Done()
		t := time.NewTicker(redisProbeEvery)
		defer t.Stop()
		up := true
		for {
			select {
			case <-v.stopBg:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), redisProbeEvery)
			err := client.Ping(ctx).Err()
			cancel()
			changed := (err == nil) != up
			up = err == nil
			v.health.set(healthRedis, up) // before the log line, which says it is done
			if changed && up {
				v.log.Warn("Redis answers again: healthy", "url", v.s.RedisURL)
			} else if changed {
				v.log.Error("Redis does not answer: unhealthy", "url", v.s.RedisURL, "error", err)
			}
		}
	}()
}

// serve serves until ctx ends, then fails the health checks, lets requests
// in flight finish and returns.
func (v *service) serve(ctx context.Context) error {
	defer v.close()
	errc := make(chan error, 1+len(v.https))
	go func() { errc <- v.grpc.Serve(v.grpcLis) }()
	for i, srv := range v.https {
		go func() { errc <- srv.Serve(v.httpLis[i]) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	v.health.set(healthSigterm, false)
	v.log.Info("stopping: draining requests in flight")
	v.grpc.GracefulStop()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, srv := range v.https {
		srv.Shutdown(sctx)
	}
	if errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// redisClient builds the go-redis client REDIS_TYPE, REDIS_SOCKET_TYPE,
// REDIS_URL, REDIS_AUTH and REDIS_TLS* describe, as their driver reads them:
// a single address, a comma-separated list of cluster nodes, or for a
// sentinel the master's name and the sentinels' addresses, comma-separated.
func redisClient(s settings) (goredis.UniversalClient, error) {
	var user, pass string
	if s.RedisAuth != "" {
		if u, p, ok := strings.Cut(s.RedisAuth, ":"); ok {
			user, pass = u, p
		} else {
			pass = s.RedisAuth
		}
	}
	var tc *tls.Config
	if s.RedisTLS {
		tc = &tls.Config{InsecureSkipVerify: s.RedisTLSSkipHost, MinVersion: tls.VersionTLS12}
		if s.RedisTLSCert != "" || s.RedisTLSKey != "" {
			cert, err := tls.LoadX509KeyPair(s.RedisTLSCert, s.RedisTLSKey)
			if err != nil {
				return nil, fmt.Errorf("REDIS_TLS_CLIENT_CERT=%q, REDIS_TLS_CLIENT_KEY=%q: %w", s.RedisTLSCert, s.RedisTLSKey, err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		if s.RedisTLSCA != "" {
			pool, err := loadCA(s.RedisTLSCA)
			if err != nil {
				return nil, fmt.Errorf("REDIS_TLS_CACERT=%q: %w", s.RedisTLSCA, err)
			}
			tc.RootCAs = pool
		}
	}
	urls := strings.Split(s.RedisURL, ",")
	for i := range urls {
		urls[i] = strings.TrimSpace(urls[i])
	}
	t := s.RedisTimeout
	switch s.RedisType {
	case "cluster":
		return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: urls, Username: user, Password: pass, TLSConfig: tc,
			DialTimeout: t, ReadTimeout: t, WriteTimeout: t, ContextTimeoutEnabled: true}), nil
	case "sentinel":
		if len(urls) < 2 {
			return nil, fmt.Errorf("REDIS_URL=%q: a sentinel URL is the master's name, then the sentinels' host:port, comma-separated", s.RedisURL)
		}
		return goredis.NewFailoverClient(&goredis.FailoverOptions{MasterName: urls[0], SentinelAddrs: urls[1:], SentinelPassword: s.RedisSentinelAuth,
			Username: user, Password: pass, TLSConfig: tc, DialTimeout: t, ReadTimeout: t, WriteTimeout: t, ContextTimeoutEnabled: true}), nil
	}
	return goredis.NewClient(&goredis.Options{Network: s.RedisSocketType, Addr: s.RedisURL, Username: user, Password: pass, TLSConfig: tc,
		DialTimeout: t, ReadTimeout: t, WriteTimeout: t, ContextTimeoutEnabled: true}), nil
}

func loadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no PEM certificate in it")
	}
	return pool, nil
}

// serverTLS is the gRPC listener's TLS: GRPC_SERVER_TLS_CERT and _KEY, and
// with GRPC_CLIENT_TLS_CACERT client certificates verified against it (and
// with GRPC_CLIENT_TLS_SAN, required to name it).
func serverTLS(s settings) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(s.GrpcTLSCert, s.GrpcTLSKey)
	if err != nil {
		return nil, fmt.Errorf("GRPC_SERVER_TLS_CERT=%q, GRPC_SERVER_TLS_KEY=%q: %w", s.GrpcTLSCert, s.GrpcTLSKey, err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if s.GrpcClientCA != "" {
		pool, err := loadCA(s.GrpcClientCA)
		if err != nil {
			return nil, fmt.Errorf("GRPC_CLIENT_TLS_CACERT=%q: %w", s.GrpcClientCA, err)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
		if san := s.GrpcSAN; san != "" {
			tc.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
				for _, ch := range chains {
					if len(ch) > 0 && ch[0].VerifyHostname(san) == nil {
						return nil
					}
				}
				return fmt.Errorf("client certificate does not name %q (GRPC_CLIENT_TLS_SAN)", san)
			}
		}
	}
	return tc, nil
}

// waitRedis pings Redis until it answers, backing off as their driver does
// (REDIS_STARTUP_*: the interval doubles from the initial one up to the
// maximum, with jitter; a maximum elapsed time of 0 retries until ctx ends).
func waitRedis(ctx context.Context, client goredis.UniversalClient, s settings, log *slog.Logger) error {
	begin := time.Now()
	d := s.StartupInitial
	for {
		pctx, cancel := context.WithTimeout(ctx, max(s.RedisTimeout, 100*time.Millisecond))
		err := client.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		elapsed := time.Since(begin)
		if s.StartupMaxElapsed > 0 && elapsed >= s.StartupMaxElapsed {
			return fmt.Errorf("REDIS_URL=%q: Redis does not answer after %v (REDIS_STARTUP_MAX_ELAPSED_TIME=%v): %w", s.RedisURL, elapsed.Round(time.Millisecond), s.StartupMaxElapsed, err)
		}
		wait := d/2 + rand.N(d/2+1) // jitter in [d/2, d]
		if s.StartupMaxElapsed > 0 {
			wait = min(wait, s.StartupMaxElapsed-elapsed)
		}
		log.Warn("Redis does not answer, retrying", "url", s.RedisURL, "in", wait, "elapsed", elapsed.Round(time.Millisecond), "error", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("stopped while waiting for Redis at REDIS_URL=%q: %w", s.RedisURL, err)
		case <-t.C:
		}
		if d < s.StartupMax {
			d = min(d*2, s.StartupMax)
		}
	}
}

// answerer is the service Envoy and /json talk to: envoyrls' Server, with
// the response shaped by RESPONSE_DYNAMIC_METADATA and
// LIMIT_RESPONSE_HEADERS_ENABLED as theirs is.
type answerer struct {
	rlsv3.UnimplementedRateLimitServiceServer
	rls   *envoyrls.Server
	s     settings
	stats *serverStats // nil without metrics
}

func (a *answerer) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	began := time.Now()
	resp, err := a.rls.ShouldRateLimit(ctx, req)
	a.stats.request(time.Since(began))
	if err != nil {
		return nil, err
	}
	if !a.s.DynamicMetadata {
		resp.DynamicMetadata = nil
	}
	if a.s.LimitHeaders {
		// The descriptor closest to its limit: the least remaining, an
		// OVER_LIMIT one first, as theirs picks it.
		var min *rlsv3.RateLimitResponse_DescriptorStatus
		for _, st := range resp.Statuses {
			if st.CurrentLimit == nil {
				continue
			}
			if min == nil || st.LimitRemaining < min.LimitRemaining ||
				(st.Code == rlsv3.RateLimitResponse_OVER_LIMIT && min.Code != rlsv3.RateLimitResponse_OVER_LIMIT) {
				min = st
			}
		}
		if min != nil {
			resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd,
				&corev3.HeaderValue{Key: a.s.HeaderLimit, Value: strconv.FormatUint(uint64(min.CurrentLimit.RequestsPerUnit), 10)},
				&corev3.HeaderValue{Key: a.s.HeaderRemaining, Value: strconv.FormatUint(uint64(min.LimitRemaining), 10)},
				&corev3.HeaderValue{Key: a.s.HeaderReset, Value: strconv.FormatInt(min.DurationUntilReset.GetSeconds(), 10)})
		}
	}
	return resp, nil
}

// failureLog logs backend failures at a bounded rate: a failure after a
// quiet interval at once, then at most one summary line per interval.
type failureLog struct {
	now   func() time.Time
	every time.Duration
	log   *slog.Logger

	mu      sync.Mutex
	last    time.Time
	logged  bool
	n       int
	lastErr error
}

func (f *failureLog) report(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.now()
	quiet := !f.logged || t.Sub(f.last) >= f.every
	switch {
	case f.n == 0 && quiet:
		f.log.Error("rate limit decision failed", "error", err)
	case quiet:
		f.log.Error("rate limit decisions failed", "count", f.n+1, "during", t.Sub(f.last).Round(time.Second), "last_error", err)
		f.n = 0
	default:
		f.n++
		f.lastErr = err
		return
	}
	f.logged, f.last = true, t
}

func (f *failureLog) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n > 0 {
		f.log.Error("rate limit decisions failed", "count", f.n, "last_error", f.lastErr)
		f.n = 0
	}
}

// slogStatsLogger routes gostats' own messages to the log.
type slogStatsLogger struct{ log *slog.Logger }

func (l slogStatsLogger) Errorf(msg string, args ...any) { l.log.Error(fmt.Sprintf(msg, args...)) }
func (l slogStatsLogger) Warnf(msg string, args ...any)  { l.log.Warn(fmt.Sprintf(msg, args...)) }

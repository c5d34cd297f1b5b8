package main

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// settings are envoyproxy/ratelimit's environment variables
// (src/settings/settings.go) that mean something here, with its defaults.
type settings struct {
	Host, DebugHost, GrpcHost string
	Port, DebugPort, GrpcPort int
	GrpcUds                   string
	GrpcMaxConnAge            time.Duration
	GrpcMaxConnAgeGrace       time.Duration
	GrpcTLS                   bool
	GrpcTLSCert, GrpcTLSKey   string
	GrpcClientCA, GrpcSAN     string

	LogLevel  slog.Level
	LogFormat string // text or json

	ForceStart        bool
	RuntimeRoot       string
	RuntimeSub        string
	RuntimeApp        string
	HealthyWithConfig bool

	UseStatsd     bool
	StatsdHost    string
	StatsdPort    int
	ExtraTags     map[string]string
	FlushInterval time.Duration
	DisableStats  bool

	UsePrometheus  bool
	PrometheusAddr string
	PrometheusPath string

	NearLimitRatio float64
	CacheKeyPrefix string
	// DenialCache is LOCAL_CACHE_SIZE_IN_BYTES, the size of the Redis
	// backend's near-cache of denials: denialCacheUnset when the variable
	// is not set (sluice's default, on with 1 MiB), 0 for off (their 0:
	// no local cache), else the size in bytes.
	DenialCache int
	Backend     string // redis, or memory (sluice's addition)

	LimitHeaders                              bool
	HeaderLimit, HeaderRemaining, HeaderReset string

	RedisSocketType   string // tcp or unix
	RedisType         string // single, cluster or sentinel
	RedisURL          string
	RedisAuth         string
	RedisSentinelAuth string
	RedisTLS          bool
	RedisTLSCert      string
	RedisTLSKey       string
	RedisTLSCA        string
	RedisTLSSkipHost  bool
	RedisTimeout      time.Duration
	StartupInitial    time.Duration
	StartupMax        time.Duration
	StartupMaxElapsed time.Duration // 0: retry until stopped, as theirs

	Shadow, Quota   bool
	DynamicMetadata bool
}

// denialCacheUnset is settings.DenialCache when LOCAL_CACHE_SIZE_IN_BYTES
// is not set: the Redis backend's default denial cache (1 MiB).
const denialCacheUnset = -1

// ConfigPath is the directory the rules are read from: RUNTIME_ROOT,
// RUNTIME_SUBDIRECTORY, RUNTIME_APPDIRECTORY, as their runtime loader
// composes it.
func (s *settings) ConfigPath() string {
	return filepath.Join(s.RuntimeRoot, s.RuntimeSub, s.RuntimeApp)
}

// notNeeded are their variables that tune their implementation only: accepted
// and, when set, logged once as not needed, with the reason.
var notNeeded = map[string]string{
	"REDIS_POOL_SIZE":                          "go-redis sizes its pool; a decision is one script call",
	"REDIS_PIPELINE_WINDOW":                    "a decision is one script call; concurrent decisions are batched",
	"REDIS_PIPELINE_LIMIT":                     "a decision is one script call; concurrent decisions are batched",
	"REDIS_CLUSTER_PIPELINE_PARALLELISM":       "a decision is one script call in one hash slot",
	"REDIS_POOL_ON_EMPTY_BEHAVIOR":             "go-redis waits for a connection within REDIS_TIMEOUT",
	"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION":     "/healthcheck always follows a Redis probe",
	"EXPIRATION_JITTER_MAX_SECONDS":            "a bucket expires a second after it would be full again",
	"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT":  "a denied request never consumes",
	"RUNTIME_IGNOREDOTFILES":                   "names starting with . are always skipped",
	"RUNTIME_WATCH_ROOT":                       "the directory is read through RUNTIME_ROOT at every check, so a swapped symlink is always seen",
	"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS": "response times are not exported under their names",
	"USE_DOG_STATSD_MOGRIFIERS":                "USE_DOG_STATSD is not offered",
	"GRPC_CLIENT_TLS_SAN":                      "",
}

// unsupported says why a variable set to a value that needs what sluice
// does not offer is a startup error; nil for a value it does honour.
func unsupported(name, v string) string {
	switch name {
	case "BACKEND_TYPE":
		if strings.EqualFold(v, "memcache") {
			return "memcache is not offered: use redis (or memory, in one process)"
		}
	case "CONFIG_TYPE":
		if strings.EqualFold(v, "GRPC_XDS_SOTW") {
			return "configuration over xDS is not offered: use FILE"
		}
	case "USE_DOG_STATSD", "TRACING_ENABLED", "MERGE_DOMAIN_CONFIG", "REDIS_PERSECOND":
		if b, err := strconv.ParseBool(v); err == nil && b {
			switch name {
			case "USE_DOG_STATSD":
				return "DogStatsD tags are not offered: use USE_STATSD or USE_PROMETHEUS"
			case "TRACING_ENABLED":
				return "tracing is not offered by this command"
			case "MERGE_DOMAIN_CONFIG":
				return "a domain in two files is refused, not merged"
			default:
				return "a second Redis for per-second limits is not offered: one Redis holds every unit"
			}
		}
	case "PROMETHEUS_MAPPER_YAML":
		if v != "" {
			return "a custom statsd-to-Prometheus mapping is not offered: the default mapping's names are served"
		}
	}
	if strings.HasPrefix(name, "REDIS_PERSECOND_") {
		return "a second Redis for per-second limits is not offered: one Redis holds every unit"
	}
	return ""
}

// envError is a bad or unsupported variable: it names the variable and the
// value.
type envError struct {
	name, value, why string
}

func (e *envError) Error() string {
	return fmt.Sprintf("%s=%q: %s", e.name, e.value, e.why)
}

// envReader reads variables through lookup and remembers the first error.
type envReader struct {
	lookup func(string) (string, bool)
	err    error
}

func (r *envReader) fail(name, v, why string) {
	if r.err == nil {
		r.err = &envError{name, v, why}
	}
}

func (r *envReader) str(name, def string) string {
	if v, ok := r.lookup(name); ok {
		return v
	}
	return def
}

func (r *envReader) integer(name string, def, lo, hi int) int {
	v, ok := r.lookup(name)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		r.fail(name, v, "not a number")
		return def
	}
	if n < lo || n > hi {
		r.fail(name, v, fmt.Sprintf("out of range %d to %d", lo, hi))
		return def
	}
	return n
}

func (r *envReader) port(name string, def int) int { return r.integer(name, def, 0, 65535) }

func (r *envReader) boolean(name string, def bool) bool {
	v, ok := r.lookup(name)
	if !ok || v == "" {
		return def
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		r.fail(name, v, "not a boolean (true or false)")
		return def
	}
	return b
}

func (r *envReader) duration(name string, def time.Duration) time.Duration {
	v, ok := r.lookup(name)
	if !ok || v == "" {
		return def
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		r.fail(name, v, "not a duration (such as 500ms, 10s, 1h)")
		return def
	}
	if d < 0 {
		r.fail(name, v, "negative")
		return def
	}
	return d
}

func (r *envReader) oneOf(name, def string, allowed ...string) string {
	v, ok := r.lookup(name)
	if !ok || v == "" {
		return def
	}
	for _, a := range allowed {
		if strings.EqualFold(v, a) {
			return a
		}
	}
	r.fail(name, v, "not one of "+strings.Join(allowed, ", "))
	return def
}

// tags parses EXTRA_TAGS: key:value pairs separated by commas, as
// envconfig reads their map.
func (r *envReader) tags(name string) map[string]string {
	v, ok := r.lookup(name)
	if !ok || v == "" {
		return nil
	}
	m := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		k, val, found := strings.Cut(kv, ":")
		if !found || k == "" {
			r.fail(name, v, "not key:value pairs separated by commas")
			return nil
		}
		m[k] = val
	}
	return m
}

var logLevels = map[string]slog.Level{
	"trace": slog.LevelDebug, "debug": slog.LevelDebug, "info": slog.LevelInfo,
	"warn": slog.LevelWarn, "warning": slog.LevelWarn, "error": slog.LevelError,
	"fatal": slog.LevelError, "panic": slog.LevelError,
}

// loadSettings reads envoyproxy/ratelimit's variables through lookup
// (os.LookupEnv). It returns the settings, the lines to log once (variables
// accepted but not needed), and the first bad or unsupported variable.
func loadSettings(lookup func(string) (string, bool), environ []string) (settings, []string, error) {
	r := &envReader{lookup: lookup}
	// Unsupported first: a variable we cannot honour is named even when
	// another is malformed too.
	names := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	sort.Strings(names)
	var notes []string
	for _, name := range names {
		v, _ := lookup(name)
		if why := unsupported(name, v); why != "" {
			return settings{}, nil, &envError{name, v, why}
		}
		if why, ok := notNeeded[name]; ok && why != "" {
			notes = append(notes, fmt.Sprintf("%s=%s is accepted and not needed: %s", name, v, why))
		}
	}

	var s settings
	s.Host = r.str("HOST", "0.0.0.0")
	s.Port = r.port("PORT", 8080)
	s.DebugHost = r.str("DEBUG_HOST", "0.0.0.0")
	s.DebugPort = r.port("DEBUG_PORT", 6070)
	s.GrpcHost = r.str("GRPC_HOST", "0.0.0.0")
	s.GrpcPort = r.port("GRPC_PORT", 8081)
	s.GrpcUds = r.str("GRPC_UDS", "")
	s.GrpcMaxConnAge = r.duration("GRPC_MAX_CONNECTION_AGE", 24*time.Hour)
	s.GrpcMaxConnAgeGrace = r.duration("GRPC_MAX_CONNECTION_AGE_GRACE", time.Hour)
	s.GrpcTLS = r.boolean("GRPC_SERVER_USE_TLS", false)
	s.GrpcTLSCert = r.str("GRPC_SERVER_TLS_CERT", "")
	s.GrpcTLSKey = r.str("GRPC_SERVER_TLS_KEY", "")
	s.GrpcClientCA = r.str("GRPC_CLIENT_TLS_CACERT", "")
	s.GrpcSAN = r.str("GRPC_CLIENT_TLS_SAN", "")

	lv := r.str("LOG_LEVEL", "WARN")
	if l, ok := logLevels[strings.ToLower(strings.TrimSpace(lv))]; ok {
		s.LogLevel = l
	} else {
		r.fail("LOG_LEVEL", lv, "not one of trace, debug, info, warn, error")
	}
	s.LogFormat = r.oneOf("LOG_FORMAT", "text", "text", "json")

	r.oneOf("CONFIG_TYPE", "FILE", "FILE")
	s.ForceStart = r.boolean("FORCE_START_WITHOUT_INITIAL_CONFIG", false)
	s.RuntimeRoot = r.str("RUNTIME_ROOT", "/srv/runtime_data/current")
	s.RuntimeSub = r.str("RUNTIME_SUBDIRECTORY", "")
	s.RuntimeApp = r.str("RUNTIME_APPDIRECTORY", "config")
	r.boolean("RUNTIME_IGNOREDOTFILES", false)
	r.boolean("RUNTIME_WATCH_ROOT", true)
	r.boolean("MERGE_DOMAIN_CONFIG", false)
	s.HealthyWithConfig = r.boolean("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false)

	r.boolean("USE_DOG_STATSD", false)
	s.UseStatsd = r.boolean("USE_STATSD", true)
	s.StatsdHost = r.str("STATSD_HOST", "localhost")
	s.StatsdPort = r.port("STATSD_PORT", 8125)
	s.ExtraTags = r.tags("EXTRA_TAGS")
	s.FlushInterval = r.duration("STATS_FLUSH_INTERVAL", 10*time.Second)
	if s.FlushInterval == 0 {
		r.fail("STATS_FLUSH_INTERVAL", "0", "must be positive")
	}
	s.DisableStats = r.boolean("DISABLE_STATS", false)
	s.UsePrometheus = r.boolean("USE_PROMETHEUS", false)
	s.PrometheusAddr = r.str("PROMETHEUS_ADDR", ":9090")
	s.PrometheusPath = r.str("PROMETHEUS_PATH", "/metrics")
	if !strings.HasPrefix(s.PrometheusPath, "/") {
		r.fail("PROMETHEUS_PATH", s.PrometheusPath, "must start with /")
	}
	r.boolean("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", false)

	r.integer("EXPIRATION_JITTER_MAX_SECONDS", 300, 0, 1<<31-1)
	// Their default is 0 (no local cache); ours, when the variable is not
	// set, is the denial cache on, because a cached denial only denies.
	// An explicit 0 keeps their meaning. Set but empty counts as not set,
	// as for every variable here.
	s.DenialCache = r.integer("LOCAL_CACHE_SIZE_IN_BYTES", denialCacheUnset, 0, 1<<62)
	nl := r.str("NEAR_LIMIT_RATIO", "0.8")
	if f, err := strconv.ParseFloat(strings.TrimSpace(nl), 32); err != nil || !(f > 0) || f > 1 {
		r.fail("NEAR_LIMIT_RATIO", nl, "not a number above 0 and at most 1")
	} else {
		s.NearLimitRatio = f
	}
	s.CacheKeyPrefix = r.str("CACHE_KEY_PREFIX", "")
	s.Backend = r.oneOf("BACKEND_TYPE", "redis", "redis", "memory")
	r.boolean("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", false)
	s.LimitHeaders = r.boolean("LIMIT_RESPONSE_HEADERS_ENABLED", false)
	s.HeaderLimit = r.str("LIMIT_LIMIT_HEADER", "RateLimit-Limit")
	s.HeaderRemaining = r.str("LIMIT_REMAINING_HEADER", "RateLimit-Remaining")
	s.HeaderReset = r.str("LIMIT_RESET_HEADER", "RateLimit-Reset")

	s.RedisSocketType = r.oneOf("REDIS_SOCKET_TYPE", "unix", "tcp", "unix")
	s.RedisType = r.oneOf("REDIS_TYPE", "single", "single", "cluster", "sentinel")
	s.RedisURL = r.str("REDIS_URL", "/var/run/nutcracker/ratelimit.sock")
	s.RedisAuth = r.str("REDIS_AUTH", "")
	s.RedisSentinelAuth = r.str("REDIS_SENTINEL_AUTH", "")
	s.RedisTLS = r.boolean("REDIS_TLS", false)
	s.RedisTLSCert = r.str("REDIS_TLS_CLIENT_CERT", "")
	s.RedisTLSKey = r.str("REDIS_TLS_CLIENT_KEY", "")
	s.RedisTLSCA = r.str("REDIS_TLS_CACERT", "")
	s.RedisTLSSkipHost = r.boolean("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false)
	r.integer("REDIS_POOL_SIZE", 10, 0, 1<<20)
	r.duration("REDIS_PIPELINE_WINDOW", 0)
	r.integer("REDIS_PIPELINE_LIMIT", 0, 0, 1<<31-1)
	r.integer("REDIS_CLUSTER_PIPELINE_PARALLELISM", 1, 0, 1<<20)
	r.oneOf("REDIS_POOL_ON_EMPTY_BEHAVIOR", "WAIT", "WAIT", "CREATE", "ERROR")
	r.boolean("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", false)
	s.RedisTimeout = r.duration("REDIS_TIMEOUT", 10*time.Second)
	s.StartupInitial = r.duration("REDIS_STARTUP_INITIAL_INTERVAL", time.Second)
	s.StartupMax = r.duration("REDIS_STARTUP_MAX_INTERVAL", 30*time.Second)
	s.StartupMaxElapsed = r.duration("REDIS_STARTUP_MAX_ELAPSED_TIME", 0)
	if s.StartupInitial == 0 {
		r.fail("REDIS_STARTUP_INITIAL_INTERVAL", "0s", "must be positive")
	}

	s.Shadow = r.boolean("SHADOW_MODE", false)
	s.Quota = r.boolean("QUOTA_MODE", false)
	s.DynamicMetadata = r.boolean("RESPONSE_DYNAMIC_METADATA", false)

	switch {
	case r.err != nil:
	case s.GrpcTLS && (s.GrpcTLSCert == "" || s.GrpcTLSKey == ""):
		r.fail("GRPC_SERVER_USE_TLS", "true", "needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY")
	case s.Backend == "redis" && s.RedisURL == "":
		r.fail("REDIS_URL", "", "empty")
	}
	if r.err != nil {
		return settings{}, nil, r.err
	}
	return s, notes, nil
}

// hostPort joins a host and a port as their listeners do.
func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

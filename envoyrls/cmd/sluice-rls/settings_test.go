package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// env is a fake environment for loadSettings and run.
type env map[string]string

func (e env) lookup(k string) (string, bool) { v, ok := e[k]; return v, ok }

func (e env) environ() []string {
	out := make([]string, 0, len(e))
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

// Their defaults hold when nothing is set.
func TestSettingsDefaults(t *testing.T) {
	s, notes, err := loadSettings(env{}.lookup, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 0 {
		t.Errorf("notes %q with nothing set", notes)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"PORT", s.Port, 8080}, {"GRPC_PORT", s.GrpcPort, 8081}, {"DEBUG_PORT", s.DebugPort, 6070},
		{"HOST", s.Host, "0.0.0.0"}, {"USE_STATSD", s.UseStatsd, true}, {"USE_PROMETHEUS", s.UsePrometheus, false},
		{"PROMETHEUS_ADDR", s.PrometheusAddr, ":9090"}, {"PROMETHEUS_PATH", s.PrometheusPath, "/metrics"},
		{"REDIS_SOCKET_TYPE", s.RedisSocketType, "unix"}, {"REDIS_TYPE", s.RedisType, "single"},
		{"REDIS_URL", s.RedisURL, "/var/run/nutcracker/ratelimit.sock"}, {"REDIS_TIMEOUT", s.RedisTimeout, 10 * time.Second},
		{"NEAR_LIMIT_RATIO", s.NearLimitRatio, float64(float32(0.8))}, {"config path", s.ConfigPath(), "/srv/runtime_data/current/config"},
		{"REDIS_STARTUP_INITIAL_INTERVAL", s.StartupInitial, time.Second}, {"REDIS_STARTUP_MAX_INTERVAL", s.StartupMax, 30 * time.Second},
		{"LIMIT_RESET_HEADER", s.HeaderReset, "RateLimit-Reset"}, {"STATSD_PORT", s.StatsdPort, 8125},
		{"LOCAL_CACHE_SIZE_IN_BYTES", s.DenialCache, denialCacheUnset},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	s, _, err = loadSettings(env{"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit", "REDIS_TYPE": "Cluster", "LOG_LEVEL": "debug"}.lookup, nil)
	if err != nil || s.ConfigPath() != "/data/ratelimit/config" || s.RedisType != "cluster" {
		t.Errorf("%q %q %v", s.ConfigPath(), s.RedisType, err)
	}
}

// A malformed value is an error naming the variable and the value; one we
// cannot honour names the variable and why.
func TestSettingsRefused(t *testing.T) {
	for _, c := range []struct {
		name, value string
		want        string
	}{
		{"PORT", "http", `PORT="http": not a number`},
		{"GRPC_PORT", "70000", `GRPC_PORT="70000": out of range`},
		{"DEBUG_PORT", "-1", `DEBUG_PORT="-1": out of range`},
		{"LOG_LEVEL", "loud", `LOG_LEVEL="loud": not one of`},
		{"LOG_FORMAT", "xml", `LOG_FORMAT="xml": not one of text, json`},
		{"REDIS_TYPE", "bogus", `REDIS_TYPE="bogus": not one of single, cluster, sentinel`},
		{"REDIS_SOCKET_TYPE", "udp", `REDIS_SOCKET_TYPE="udp"`},
		{"USE_STATSD", "yes please", `USE_STATSD="yes please": not a boolean`},
		{"REDIS_TIMEOUT", "10", `REDIS_TIMEOUT="10": not a duration`},
		{"REDIS_STARTUP_MAX_INTERVAL", "-1s", `REDIS_STARTUP_MAX_INTERVAL="-1s": negative`},
		{"NEAR_LIMIT_RATIO", "1.5", `NEAR_LIMIT_RATIO="1.5"`},
		{"NEAR_LIMIT_RATIO", "NaN", `NEAR_LIMIT_RATIO="NaN"`},
		{"EXTRA_TAGS", "a=b", `EXTRA_TAGS="a=b": not key:value`},
		{"PROMETHEUS_PATH", "metrics", `PROMETHEUS_PATH="metrics": must start with /`},
		{"REDIS_POOL_SIZE", "ten", `REDIS_POOL_SIZE="ten": not a number`},
		{"LOCAL_CACHE_SIZE_IN_BYTES", "1MiB", `LOCAL_CACHE_SIZE_IN_BYTES="1MiB": not a number`},
		{"LOCAL_CACHE_SIZE_IN_BYTES", "-1", `LOCAL_CACHE_SIZE_IN_BYTES="-1": out of range`},
		{"CONFIG_TYPE", "CONSUL", `CONFIG_TYPE="CONSUL": not one of FILE`},
		{"BACKEND_TYPE", "dynamo", `BACKEND_TYPE="dynamo": not one of redis, memory`},
		// not offered
		{"BACKEND_TYPE", "memcache", `BACKEND_TYPE="memcache": memcache is not offered`},
		{"CONFIG_TYPE", "GRPC_XDS_SOTW", `CONFIG_TYPE="GRPC_XDS_SOTW": configuration over xDS is not offered`},
		{"REDIS_PERSECOND", "true", `REDIS_PERSECOND="true": a second Redis`},
		{"REDIS_PERSECOND_URL", "x:6379", `REDIS_PERSECOND_URL="x:6379": a second Redis`},
		{"MERGE_DOMAIN_CONFIG", "true", `MERGE_DOMAIN_CONFIG="true"`},
		{"TRACING_ENABLED", "1", `TRACING_ENABLED="1": tracing is not offered`},
		{"USE_DOG_STATSD", "true", `USE_DOG_STATSD="true"`},
		{"PROMETHEUS_MAPPER_YAML", "/etc/m.yaml", `PROMETHEUS_MAPPER_YAML="/etc/m.yaml"`},
	} {
		e := env{c.name: c.value}
		_, _, err := loadSettings(e.lookup, e.environ())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%s: error %v, want it to contain %q", c.name, c.value, err, c.want)
		}
	}
	// Given false, the switches of what is not offered are fine.
	e := env{"REDIS_PERSECOND": "false", "MERGE_DOMAIN_CONFIG": "false", "TRACING_ENABLED": "false", "BACKEND_TYPE": "redis", "CONFIG_TYPE": "file"}
	if _, _, err := loadSettings(e.lookup, e.environ()); err != nil {
		t.Error(err)
	}
}

// LOCAL_CACHE_SIZE_IN_BYTES: unset (or empty) is sluice's default, an
// explicit 0 is theirs (no cache), a size is that size; none is a note.
func TestSettingsLocalCache(t *testing.T) {
	for _, c := range []struct {
		env  env
		want int
	}{
		{env{}, denialCacheUnset},
		{env{"LOCAL_CACHE_SIZE_IN_BYTES": ""}, denialCacheUnset},
		{env{"LOCAL_CACHE_SIZE_IN_BYTES": "0"}, 0},
		{env{"LOCAL_CACHE_SIZE_IN_BYTES": " 16777216 "}, 16 << 20},
	} {
		s, notes, err := loadSettings(c.env.lookup, c.env.environ())
		if err != nil || s.DenialCache != c.want || len(notes) != 0 {
			t.Errorf("%v: DenialCache %d, notes %q, error %v; want %d", c.env, s.DenialCache, notes, err, c.want)
		}
	}
}

// Tuning variables are accepted and named once, with the reason.
func TestSettingsNotNeeded(t *testing.T) {
	e := env{"REDIS_POOL_SIZE": "50", "REDIS_PIPELINE_WINDOW": "150us", "REDIS_PIPELINE_LIMIT": "8", "PORT": "9000"}
	_, notes, err := loadSettings(e.lookup, e.environ())
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 3 {
		t.Fatalf("notes %q, want three", notes)
	}
	for i, name := range []string{"REDIS_PIPELINE_LIMIT=8", "REDIS_PIPELINE_WINDOW=150us", "REDIS_POOL_SIZE=50"} {
		if !strings.HasPrefix(notes[i], name+" is accepted and not needed: ") {
			t.Errorf("note %d: %q", i, notes[i])
		}
	}
}

// run: a bad variable stops the start before anything listens, a flag
// wins over the environment, and an unknown argument is refused.
func TestRunRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  env
		want string
	}{
		{nil, env{"PORT": "http"}, `PORT="http": not a number`},
		{[]string{"extra"}, env{}, `unexpected argument "extra"`},
		{[]string{"-reload", "5ms"}, env{}, "-reload 5ms"},
		{[]string{"-denial-cache", "-1"}, env{}, "-denial-cache -1"},
		{[]string{"-denial-cache", "1MiB"}, env{}, `invalid value "1MiB" for flag -denial-cache`},
		{nil, env{"LOCAL_CACHE_SIZE_IN_BYTES": "lots"}, `LOCAL_CACHE_SIZE_IN_BYTES="lots": not a number`},
		// -config wins over RUNTIME_*: the error names the flag's path
		{[]string{"-config", "/nonexistent/sluice", "-redis", ""}, env{"RUNTIME_ROOT": "/data", "USE_STATSD": "false"}, "configuration /nonexistent/sluice"},
	} {
		var out, errw bytes.Buffer
		err := run(context.Background(), c.args, c.env.lookup, c.env.environ(), &out, &errw)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: %v, want %q", c.args, c.env, err, c.want)
		}
	}
}

package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/redis/redistest"
)

// scriptCalls is what INFO commandstats counts of EVALSHA and EVAL calls,
// less their failed calls: the decisions that reached Redis. (The first
// EVALSHA on a fresh server fails with NOSCRIPT and go-redis sends the
// script with EVAL: one decision, one failed call and two calls.)
func scriptCalls(t *testing.T, c *goredis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range regexp.MustCompile(`(?m)^cmdstat_(?:evalsha|eval):calls=(\d+),.*failed_calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		calls, _ := strconv.Atoi(m[1])
		failed, _ := strconv.Atoi(m[2])
		n += calls - failed
	}
	return n
}

// A flood on one descriptor over its limit (1 a minute): with the denial
// cache on (LOCAL_CACHE_SIZE_IN_BYTES unset, or a size) Redis sees the
// admitted request and the first denial, and the command answers every
// later denial itself, the same OVER_LIMIT; with LOCAL_CACHE_SIZE_IN_BYTES=0
// (their "no cache") every request is a script call. -denial-cache wins
// over the variable. Prometheus counts the cache's hits.
func TestDenialCacheSparesRedis(t *testing.T) {
	const flood = 50
	for _, c := range []struct {
		name      string
		env, args []string
		calls     int // script calls Redis counts for the flood
		hits      int // sluice_backend_denial_cache_hits
		log       string
	}{
		{"unset", nil, nil, 2, flood - 2, "denial cache on with 1 MiB, sluice's default"},
		{"sized", []string{"LOCAL_CACHE_SIZE_IN_BYTES=65536"}, nil, 2, flood - 2, "bytes=65536 from=LOCAL_CACHE_SIZE_IN_BYTES"},
		{"zero", []string{"LOCAL_CACHE_SIZE_IN_BYTES=0"}, nil, flood, 0, `denial cache off: every decision is a call to Redis" from=LOCAL_CACHE_SIZE_IN_BYTES`},
		{"flag wins", []string{"LOCAL_CACHE_SIZE_IN_BYTES=0"}, []string{"-denial-cache", "65536"}, 2, flood - 2, "bytes=65536 from=-denial-cache"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rc := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
			defer rc.Close()
			p := startProc(t, append([]string{"USE_STATSD=false", "LOG_LEVEL=info", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + srv.Addr,
				"RUNTIME_ROOT=testdata/runtime", "RUNTIME_SUBDIRECTORY=ratelimit",
				"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
				"USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:0"}, c.env...), c.args...)
			conn, err := grpc.NewClient(p.addrs["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			client := rlsv3.NewRateLimitServiceClient(conn)
			if err := rc.ConfigResetStat(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			before := scriptCalls(t, rc)
			req := &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("source_cluster", "proxy", "destination_cluster", "mock")}}
			for i := range flood {
				resp, err := client.ShouldRateLimit(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				want := rlsv3.RateLimitResponse_OVER_LIMIT
				if i == 0 {
					want = rlsv3.RateLimitResponse_OK
				}
				if resp.OverallCode != want {
					t.Fatalf("request %d: %v, want %v", i+1, resp.OverallCode, want)
				}
				if d := resp.Statuses[0].DurationUntilReset.AsDuration(); want == rlsv3.RateLimitResponse_OVER_LIMIT && (d <= 0 || d.Seconds() > 60) {
					t.Fatalf("request %d: duration_until_reset %v", i+1, d)
				}
			}
			if got := scriptCalls(t, rc) - before; got != c.calls {
				t.Errorf("Redis counted %d script calls for %d requests, want %d", got, flood, c.calls)
			}
			_, text := get(t, "http://"+p.addrs["prometheus"]+"/metrics")
			if want := "sluice_backend_denial_cache_hits " + strconv.Itoa(c.hits) + "\n"; (c.hits > 0 || strings.Contains(text, "sluice_backend_denial_cache_hits")) && !strings.Contains(text, want) {
				t.Errorf("/metrics lacks %q:\n%s", want, grepLines(text, "denial_cache"))
			}
			p.waitLog(t, c.log, 1)
			if n, _ := p.stderr.count("denial cache"); n != 1 {
				t.Errorf("the log names the denial cache %d times, want once", n)
			}
		})
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// In memory there is no Redis to spare: a set LOCAL_CACHE_SIZE_IN_BYTES is
// said to be not needed, once, and nothing else about a denial cache.
func TestDenialCacheInMemory(t *testing.T) {
	p := startProc(t, []string{"USE_STATSD=false", "LOG_LEVEL=info", "BACKEND_TYPE=memory", "LOCAL_CACHE_SIZE_IN_BYTES=1048576",
		"RUNTIME_ROOT=testdata/runtime", "RUNTIME_SUBDIRECTORY=ratelimit",
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0"})
	p.waitLog(t, "configuration loaded", 1)
	log := p.stderr.String()
	if strings.Count(log, "LOCAL_CACHE_SIZE_IN_BYTES is not needed in memory") != 1 || strings.Contains(log, "denial cache") {
		t.Errorf("log:\n%s", log)
	}
}

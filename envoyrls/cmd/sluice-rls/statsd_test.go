package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/redis/redistest"
)

// With USE_STATSD (their default), the per-rule counters reach statsd
// under envoyproxy/ratelimit's names, with EXTRA_TAGS, flushed every
// STATS_FLUSH_INTERVAL; in memory (BACKEND_TYPE=memory) no Redis is needed.
func TestStatsdNames(t *testing.T) {
	sd := listenStatsd(t)
	root := t.TempDir()
	copyTree(t, root)
	port := sd.port
	p := startProc(t, []string{"BACKEND_TYPE=memory", "RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit",
		"STATSD_HOST=127.0.0.1", "STATSD_PORT=" + strconv.Itoa(port), "STATS_FLUSH_INTERVAL=100ms",
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0"})
	conn, err := grpc.NewClient(p.addrs["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	req := &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("source_cluster", "proxy", "destination_cluster", "mock")}}
	for range 3 {
		if _, err := client.ShouldRateLimit(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	// Counters are flushed as deltas: summed by name, since a flush may
	// fall between two requests.
	want := map[string]uint64{
		"ratelimit.service.rate_limit.rl.source_cluster_proxy.destination_cluster_mock.total_hits":   3,
		"ratelimit.service.rate_limit.rl.source_cluster_proxy.destination_cluster_mock.over_limit":   2,
		"ratelimit.service.rate_limit.rl.source_cluster_proxy.destination_cluster_mock.within_limit": 1,
		"ratelimit_server.ShouldRateLimit.total_requests":                                            3,
	}
	sd.wait(t, fmt.Sprint(want), func(lines []string) bool {
		got := map[string]uint64{}
		for _, l := range lines {
			name, rest, _ := strings.Cut(l, ":")
			if v, ok := strings.CutSuffix(rest, "|c"); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				got[name] += n
			}
		}
		for name, n := range want {
			if got[name] != n {
				return false
			}
		}
		return true
	})
}

// On Redis with the near-cache of denials on (their LOCAL_CACHE_SIZE_IN_BYTES),
// statsd gets the cache's hits and evictions under the names of their local
// cache's gauges; a flood of 20 over a limit of 1 a minute makes 18 hits
// (the admitted request and the first denial reach Redis).
func TestStatsdDenialCache(t *testing.T) {
	srv := redistest.Start(t)
	sd := listenStatsd(t)
	p := startProc(t, []string{"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + srv.Addr, "LOCAL_CACHE_SIZE_IN_BYTES=65536",
		"RUNTIME_ROOT=testdata/runtime", "RUNTIME_SUBDIRECTORY=ratelimit",
		"STATSD_HOST=127.0.0.1", "STATSD_PORT=" + strconv.Itoa(sd.port), "STATS_FLUSH_INTERVAL=100ms",
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0"})
	conn, err := grpc.NewClient(p.addrs["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	req := &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("source_cluster", "proxy", "destination_cluster", "mock")}}
	for range 20 {
		if _, err := client.ShouldRateLimit(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	// Gauges are flushed as their value at each flush: the last one counts.
	want := map[string]string{"ratelimit.localcache.hitCount": "18", "ratelimit.localcache.evacuateCount": "0"}
	sd.wait(t, fmt.Sprint(want), func(lines []string) bool {
		got := map[string]string{}
		for _, l := range lines {
			name, rest, _ := strings.Cut(l, ":")
			if v, ok := strings.CutSuffix(rest, "|g"); ok {
				got[name] = v
			}
		}
		for name, v := range want {
			if got[name] != v {
				return false
			}
		}
		return true
	})
}

// statsd is a statsd server over TCP (gostats' sink) on a port of its own,
// keeping every line it receives.
type statsd struct {
	port    int
	mu      sync.Mutex
	lines   []string
	arrived chan struct{} // a line arrived since the test last looked
}

func listenStatsd(t *testing.T) *statsd {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	s := &statsd{port: lis.Addr().(*net.TCPAddr).Port, arrived: make(chan struct{}, 1)}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					s.mu.Lock()
					s.lines = append(s.lines, sc.Text())
					s.mu.Unlock()
					select {
					case s.arrived <- struct{}{}:
					default:
					}
				}
			}()
		}
	}()
	return s
}

// wait waits until done holds of the lines received (checked again at each
// line that arrives, no sleep), failing after 15 s.
func (s *statsd) wait(t *testing.T, what string, done func(lines []string) bool) {
	t.Helper()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		lines := slices.Clone(s.lines)
		s.mu.Unlock()
		if done(lines) {
			return
		}
		select {
		case <-s.arrived:
		case <-deadline.C:
			t.Fatalf("statsd lines %s not all seen in:\n%s", what, strings.Join(lines, "\n"))
		}
	}
}

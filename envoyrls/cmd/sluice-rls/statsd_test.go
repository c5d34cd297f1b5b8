package main

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// With USE_STATSD (their default), the per-rule counters reach statsd
// under envoyproxy/ratelimit's names, with EXTRA_TAGS, flushed every
// STATS_FLUSH_INTERVAL; in memory (BACKEND_TYPE=memory) no Redis is needed.
func TestStatsdNames(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	var mu sync.Mutex
	var lines []string
	arrived := make(chan struct{}, 1) // a line arrived since the test last looked
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					mu.Lock()
					lines = append(lines, sc.Text())
					mu.Unlock()
					select {
					case arrived <- struct{}{}:
					default:
					}
				}
			}()
		}
	}()
	root := t.TempDir()
	copyTree(t, root)
	port := lis.Addr().(*net.TCPAddr).Port
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
	// Each pass waits for the next line (no sleep), up to 15 s in all.
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	for {
		got := map[string]uint64{}
		mu.Lock()
		for _, l := range lines {
			name, rest, _ := strings.Cut(l, ":")
			if v, ok := strings.CutSuffix(rest, "|c"); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				got[name] += n
			}
		}
		seen := strings.Join(lines, "\n")
		mu.Unlock()
		missing := 0
		for name, n := range want {
			if got[name] != n {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		select {
		case <-arrived:
		case <-deadline.C:
			t.Fatalf("statsd lines %v not all seen in:\n%s", want, seen)
		}
	}
}

package envoyrls_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/internal/redisstat"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/redis/redistest"
)

// loadConfig is the configuration of BenchmarkEnvoyLoad's server: three
// keys whose limits no request reaches, and "tight", one request an hour
// per value, which denies every request after a value's first.
const loadConfig = `domain: load
descriptors:
  - key: k0
    rate_limit: {unit: second, requests_per_unit: 4000000000}
  - key: k1
    rate_limit: {unit: second, requests_per_unit: 4000000000}
  - key: k2
    rate_limit: {unit: second, requests_per_unit: 4000000000}
  - key: tight
    rate_limit: {unit: hour, requests_per_unit: 1}
`

// loadServerEnv names the Redis address the server process of
// BenchmarkEnvoyLoad decides on; TestEnvoyLoadServer runs only with it.
const loadServerEnv = "SLUICE_ENVOYLOAD_REDIS"

// TestEnvoyLoadServer is the server process of BenchmarkEnvoyLoad, run by
// it (the test binary started again with this variable set): an
// envoyrls.Server on a Redis backend, on a gRPC server on a free loopback
// port, which it prints; it stops when its standard input closes. Run
// alone, it is skipped.
func TestEnvoyLoadServer(t *testing.T) {
	addr := os.Getenv(loadServerEnv)
	if addr == "" {
		t.Skip("the server process of BenchmarkEnvoyLoad; run by it")
	}
	cfg, err := envoyrls.Parse(map[string][]byte{"load.yaml": []byte(loadConfig)})
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer client.Close()
	be, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix("load"), sluiceredis.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var failures atomic.Int64
	rls := envoyrls.New(cfg, envoyrls.WithBackend(be), envoyrls.WithFailClosed(),
		envoyrls.WithErrorHandler(func(error) { failures.Add(1) }))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, rls)
	go func() { _ = gs.Serve(lis) }()
	fmt.Printf("addr %s\n", lis.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	gs.Stop()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d backend errors", n)
	}
}

// startLoadServer starts TestEnvoyLoadServer in a process of its own, so
// that its CPU time is the server's alone, and returns its gRPC address and
// process id; it stops when the benchmark ends.
func startLoadServer(b *testing.B, redisAddr string) (string, int) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestEnvoyLoadServer$", "-test.v")
	cmd.Env = append(os.Environ(), loadServerEnv+"="+redisAddr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var out strings.Builder
	b.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("server process: %v\n%s", err, out.String())
		}
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if addr, ok := strings.CutPrefix(line, "addr "); ok {
			go func() { // the rest, for the report of a failure
				for sc.Scan() {
					out.WriteString(sc.Text() + "\n")
				}
			}()
			return addr, cmd.Process.Pid
		}
		out.WriteString(line + "\n")
	}
	b.Fatalf("server process printed no address:\n%s", out.String())
	return "", 0
}

// BenchmarkEnvoyLoad is sluice's side of item 4 of issue #35 (and the flood
// of issue #39), in the scenarios of the comparison with
// envoyproxy/ratelimit: 16 or 64 concurrent calls × 1 or 3 descriptors ×
// every request allowed or half of them denied, and a flood: 16 or 64
// concurrent calls whose every request names the one over-limit
// descriptor. A load generator of its own makes b.N ShouldRateLimit calls
// per scenario from that many goroutines over one loopback gRPC connection
// to an envoyrls.Server in a process of its own (the test binary again,
// TestEnvoyLoadServer), deciding on the Redis backend (default options:
// batching, the server's clock, the near-cache of denials) on a
// redis-server the benchmark starts. Values cycle over 1,000 per
// descriptor; a denied request has "tight" (one request an hour per value,
// every value used up before the measurement) as its last descriptor; the
// flood's requests are all "tight" with one value, used up before the
// measurement. Reported per scenario: req/s, p50 and p99 latency (µs), the
// server process's CPU per request and the redis-server's (µs,
// /proc/<pid>/stat utime + stime, in steps of 10 ms), their sum, the
// commands the server sent to Redis per request and the commands its
// scripts ran (INFO commandstats), and the share denied.
//
//	cd envoyrls && go test -run '^$' -bench EnvoyLoad -benchtime 20000x
//
// With SLUICE_ENVOYLOAD_TARGET=host:port,pid and
// SLUICE_ENVOYLOAD_TARGET_REDIS=host:port the same load goes to a service
// already running (any implementation of envoy.service.ratelimit.v3, given
// loadConfig as its configuration, e.g. cmd/sluice-rls or
// envoyproxy/ratelimit) deciding on that local redis-server; its CPU is
// read from /proc for pid and for the redis-server's process_id. Values
// then carry a nonce, so that rounds run one after another on the same
// Redis start afresh. Nothing here builds another implementation.
func BenchmarkEnvoyLoad(b *testing.B) {
	addr, pid, redisAddr, readRedisCPU := loadTarget(b)
	if _, ok := redisstat.ProcessCPUTime(pid); !ok {
		b.Skip("the server process's CPU time cannot be read")
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	client := rlsv3.NewRateLimitServiceClient(conn)
	rc := redis.NewClient(&redis.Options{Addr: redisAddr})
	b.Cleanup(func() { rc.Close() })
	nonce := ""
	if os.Getenv(loadTargetEnv) != "" {
		nonce = strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	}

	for _, conc := range []int{16, 64} {
		for _, n := range []int{1, 3} {
			for _, denied := range []bool{false, true} {
				outcome := "allowed"
				if denied {
					outcome = "half-denied"
				}
				name := fmt.Sprintf("calls=%d/descriptors=%d/%s", conc, n, outcome)
				b.Run(name, func(b *testing.B) {
					loadScenario(b, client, readRedisCPU, rc, pid, nonce+strings.ReplaceAll(name, "/", "."), conc, n, loadMix(denied))
				})
			}
		}
	}
	for _, conc := range []int{16, 64} {
		name := fmt.Sprintf("calls=%d/flood", conc)
		b.Run(name, func(b *testing.B) {
			loadScenario(b, client, readRedisCPU, rc, pid, nonce+strings.ReplaceAll(name, "/", "."), conc, 1, loadFlood)
		})
	}
}

// loadTargetEnv and loadTargetRedisEnv name a service already running for
// BenchmarkEnvoyLoad to load instead of its own: "host:port,pid" and the
// redis-server's "host:port".
const (
	loadTargetEnv      = "SLUICE_ENVOYLOAD_TARGET"
	loadTargetRedisEnv = "SLUICE_ENVOYLOAD_TARGET_REDIS"
)

// loadTarget returns the gRPC address and process id of the service
// BenchmarkEnvoyLoad loads, its Redis address and a reader of the
// redis-server's CPU time: the service and Redis the environment names, or
// else a redis-server and a TestEnvoyLoadServer process it starts.
func loadTarget(b *testing.B) (string, int, string, func() time.Duration) {
	target := os.Getenv(loadTargetEnv)
	if target == "" {
		srv := redistest.Start(b)
		readRedisCPU, ok := redisServerCPU(b, srv)
		if !ok {
			b.Skip("the redis-server's CPU time cannot be read (an external server, or no /proc)")
		}
		addr, pid := startLoadServer(b, srv.Addr)
		return addr, pid, srv.Addr, readRedisCPU
	}
	addr, pidText, ok := strings.Cut(target, ",")
	pid, err := strconv.Atoi(pidText)
	redisAddr := os.Getenv(loadTargetRedisEnv)
	if !ok || err != nil || redisAddr == "" {
		b.Fatalf("%s=%q: want host:port,pid, and %s=host:port", loadTargetEnv, target, loadTargetRedisEnv)
	}
	readRedisCPU, ok := redisServerCPU(b, &redistest.Server{Addr: redisAddr})
	if !ok {
		b.Skip("the redis-server's CPU time cannot be read")
	}
	return addr, pid, redisAddr, readRedisCPU
}

// loadMode is what a scenario's requests ask: within their limits, every
// other one denied by its last descriptor, or all of them the one
// over-limit descriptor.
type loadMode int

const (
	loadAllowed loadMode = iota
	loadHalfDenied
	loadFlood
)

func loadMix(halfDenied bool) loadMode {
	if halfDenied {
		return loadHalfDenied
	}
	return loadAllowed
}

func loadScenario(b *testing.B, client rlsv3.RateLimitServiceClient, readRedisCPU func() time.Duration, rc *redis.Client, pid int,
	scenario string, conc, n int, mode loadMode) {
	// 1,000 requests, each of n descriptors; with loadHalfDenied the odd
	// ones end with "tight" instead of k(n-1); with loadFlood every one is
	// "tight" with the same value.
	halfDenied := mode == loadHalfDenied
	reqs := make([]*rlsv3.RateLimitRequest, benchValues)
	for i := range reqs {
		req := &rlsv3.RateLimitRequest{Domain: "load"}
		for k := range n {
			key := "k" + strconv.Itoa(k)
			value := scenario + "-" + strconv.Itoa((i+k*7)%benchValues)
			if halfDenied && i%2 == 1 && k == n-1 {
				key = "tight"
			}
			if mode == loadFlood {
				key, value = "tight", scenario
			}
			req.Descriptors = append(req.Descriptors, &ratelimitv3.RateLimitDescriptor{
				Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}})
		}
		reqs[i] = req
	}
	ctx := context.Background()
	// warm up: connections, the script cache, and every "tight" value used
	for i := range reqs {
		if _, err := client.ShouldRateLimit(ctx, reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
	if err := rc.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	lat := make([][]time.Duration, conc)
	var next, over atomic.Int64
	var wg sync.WaitGroup
	server0, _ := redisstat.ProcessCPUTime(pid)
	redis0 := readRedisCPU()
	b.ResetTimer()
	start := time.Now()
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := make([]time.Duration, 0, b.N/conc+1)
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					break
				}
				t0 := time.Now()
				resp, err := client.ShouldRateLimit(ctx, reqs[i%benchValues])
				l = append(l, time.Since(t0))
				if err != nil {
					b.Error(err)
					break
				}
				want := rlsv3.RateLimitResponse_OK
				if halfDenied && i%2 == 1 || mode == loadFlood {
					want = rlsv3.RateLimitResponse_OVER_LIMIT
				}
				if resp.OverallCode != want {
					b.Errorf("request %d: %v, want %v", i, resp.OverallCode, want)
					break
				}
				if want != rlsv3.RateLimitResponse_OK {
					over.Add(1)
				}
			}
			lat[g] = l
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	b.StopTimer()
	server1, _ := redisstat.ProcessCPUTime(pid)
	redis1 := readRedisCPU()
	info, err := rc.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	stats := redisstat.CommandStats(info)
	var sent, inScripts int64
	for name, st := range stats {
		switch name {
		case "config|resetstat", "config", "info":
		case "evalsha", "eval", "incrby", "expire", "get", "set", "time", "mget", "ping", "script|load", "script":
			if name == "get" || name == "set" || name == "time" {
				inScripts += st.Calls // redis.call in the script
			} else {
				sent += st.Calls
			}
		default:
			sent += st.Calls
		}
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	q := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds())
	}
	N := float64(b.N)
	serverCPU := float64((server1 - server0).Microseconds()) / N
	redisCPU := float64((redis1 - redis0).Microseconds()) / N
	b.ReportMetric(N/wall.Seconds(), "req/s")
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(serverCPU, "server-cpu-µs/req")
	b.ReportMetric(redisCPU, "redis-cpu-µs/req")
	b.ReportMetric(serverCPU+redisCPU, "total-cpu-µs/req")
	b.ReportMetric(float64(sent)/N, "redis-cmds/req")
	b.ReportMetric(float64(inScripts)/N, "script-cmds/req")
	b.ReportMetric(float64(over.Load())/N, "denied/req")
	b.ReportMetric(0, "ns/op") // wall time per request across 16 or 64 calls: see req/s
}

// redisServerCPU returns a function reading the CPU time the redis-server srv
// has used so far (its process, named by INFO server, read from /proc), and
// false when it cannot be read: an external server (SLUICE_REDIS_ADDR), or a
// system without /proc.
func redisServerCPU(tb testing.TB, srv *redistest.Server) (func() time.Duration, bool) {
	tb.Helper()
	if srv.External {
		return nil, false
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		tb.Fatal(err)
	}
	pid, ok := redisstat.PID(info)
	if _, read := redisstat.ProcessCPUTime(pid); !ok || !read {
		return nil, false
	}
	return func() time.Duration { d, _ := redisstat.ProcessCPUTime(pid); return d }, true
}

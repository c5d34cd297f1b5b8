package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/procs"
	"github.com/sluicehq/sluice/redis/redistest"
)

// binary is the command, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-rls-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sluice-rls")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if err := procs.VerifyExited(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// proc is the command running as a process.
type proc struct {
	cmd    *exec.Cmd
	stderr *logBuf
	addrs  map[string]string // grpc, http, debug, prometheus → 127.0.0.1:port
	exited chan error
}

var bannerAddr = regexp.MustCompile(`(grpc|http|debug|prometheus) \S*:(\d+)`)

// startProc runs the command with exactly the environment given (and
// PATH) and waits for the line saying where it listens.
func startProc(t *testing.T, environ []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, environ...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stderr: newLogBuf(), addrs: map[string]string{}, exited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("sluice-rls stderr:\n%s", p.stderr)
		}
	})
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("sluice-rls exited before serving: %s", p.stderr)
		}
		for _, m := range bannerAddr.FindAllStringSubmatch(line, -1) {
			p.addrs[m[1]] = "127.0.0.1:" + m[2]
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("sluice-rls did not start: %s", p.stderr)
	}
	return p
}

// logBuf holds what the process writes on its standard error, and tells
// waiters when more arrives.
type logBuf struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{} // closed and replaced at each write
}

func newLogBuf() *logBuf { return &logBuf{changed: make(chan struct{})} }

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.b.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	return n, err
}

// String is everything written so far.
func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// count is the number of times sub occurs so far, and a channel closed at the
// next write.
func (l *logBuf) count(sub string) (int, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), sub), l.changed
}

// waitLog waits until the process has written sub on its standard error at
// least n times: the process logs each change of state (a configuration
// applied or refused, Redis lost or back, draining) after making it, so a
// test waits on the line rather than polling for the effect. It fails the
// test if the line has not come within 15 s or the process has exited.
func (p *proc) waitLog(t *testing.T, sub string, n int) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		got, changed := p.stderr.count(sub)
		if got >= n {
			return
		}
		select {
		case <-changed:
		case err := <-p.exited:
			p.exited <- err // for the cleanup
			t.Fatalf("sluice-rls exited (%v) before logging %q %d times", err, sub, n)
		case <-deadline:
			t.Fatalf("sluice-rls did not log %q %d times within 15 s (%d)", sub, n, got)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// copyTree copies testdata/runtime into dir.
func copyTree(t *testing.T, dir string) {
	t.Helper()
	src := filepath.Join("testdata", "runtime")
	err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		dst := filepath.Join(dir, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// swapSymlink points link at target atomically, as their deployments do
// (a new link renamed over the old one).
func swapSymlink(t *testing.T, target, link string) {
	t.Helper()
	tmp := link + ".new"
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

// The command run as envoyproxy/ratelimit's docker-compose.yml runs
// theirs, on its example configuration tree and a redis-server of its own:
// healthy, a descriptor over its limit is OVER_LIMIT over gRPC and /json,
// the metrics count it, a configuration swapped by symlink is applied, and
// SIGTERM ends it with status 0.
func TestComposeEnvironment(t *testing.T) {
	srv := redistest.Start(t)
	root := t.TempDir()
	copyTree(t, filepath.Join(root, "v1"))
	swapSymlink(t, filepath.Join(root, "v1"), filepath.Join(root, "current"))

	p := startProc(t, []string{
		// docker-compose.yml's environment
		"USE_STATSD=false", "LOG_LEVEL=debug", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + srv.Addr,
		"RUNTIME_ROOT=" + filepath.Join(root, "current"), "RUNTIME_SUBDIRECTORY=ratelimit",
		"MEMCACHE_HOST_PORT=memcached:11211", // set there, unused with BACKEND_TYPE=redis
		// free ports instead of 8080, 8081, 6070, 9090; Prometheus on
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
		"USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:0",
		"RESPONSE_DYNAMIC_METADATA=true", "CACHE_KEY_PREFIX=compose:",
	})
	httpURL, debugURL, promURL := "http://"+p.addrs["http"], "http://"+p.addrs["debug"], "http://"+p.addrs["prometheus"]

	if code, body := get(t, httpURL+"/healthcheck"); code != 200 || body != "OK" {
		t.Fatalf("/healthcheck: %d %q", code, body)
	}
	conn, err := grpc.NewClient(p.addrs["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health: %v %v", hc, err)
	}

	// source_cluster=proxy, destination_cluster=mock: 1 a minute.
	client := rlsv3.NewRateLimitServiceClient(conn)
	req := &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("source_cluster", "proxy", "destination_cluster", "mock")}}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode != want {
			t.Fatalf("request %d: %v, want %v", i+1, resp.OverallCode, want)
		}
		if want == rlsv3.RateLimitResponse_OVER_LIMIT {
			if d := resp.Statuses[0].DurationUntilReset.AsDuration(); d <= 0 || d > time.Minute {
				t.Errorf("duration_until_reset %v", d)
			}
			if resp.DynamicMetadata.GetFields()["denied_by"].GetStringValue() != "rl.source_cluster_proxy.destination_cluster_mock" {
				t.Errorf("dynamic metadata %v", resp.DynamicMetadata)
			}
		}
	}
	code, body := post(t, httpURL+"/json", `{"domain":"rl","descriptors":[{"entries":[{"key":"source_cluster","value":"proxy"},{"key":"destination_cluster","value":"mock"}]}]}`)
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"overallCode":"OVER_LIMIT"`) || !strings.Contains(body, `"requestsPerUnit":1`) {
		t.Fatalf("/json: %d %s", code, body)
	}
	code, body = post(t, httpURL+"/json", `{"domain":"mongo_cps","descriptors":[{"entries":[{"key":"database","value":"users"}]}]}`)
	if code != 200 || !strings.Contains(body, `"overallCode":"OK"`) {
		t.Fatalf("/json within the limit: %d %s", code, body)
	}
	if code, _ := post(t, httpURL+"/json", `{"domain":`); code != http.StatusBadRequest {
		t.Errorf("/json with a broken body: %d", code)
	}

	// Three hits on the rule, two over: their names and labels.
	_, metrics := get(t, promURL+"/metrics")
	for _, want := range []string{
		`ratelimit_service_rate_limit_total_hits{domain="rl",key1="source_cluster_proxy",key2="destination_cluster_mock"} 3`,
		`ratelimit_service_rate_limit_over_limit{domain="rl",key1="source_cluster_proxy",key2="destination_cluster_mock"} 2`,
		`ratelimit_service_rate_limit_within_limit{domain="rl",key1="source_cluster_proxy",key2="destination_cluster_mock"} 1`,
		`ratelimit_service_rate_limit_within_limit{domain="mongo_cps",key1="database_users",key2=""} 1`,
		`sluice_decisions{`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", metrics)
	}

	_, rlconfig := get(t, debugURL+"/rlconfig")
	if !strings.Contains(rlconfig, "rl.source_cluster_proxy.destination_cluster_mock: unit=MINUTE requests_per_unit=1, shadow_mode: false") {
		t.Errorf("/rlconfig:\n%s", rlconfig)
	}
	if code, _ := get(t, debugURL+"/debug/pprof/"); code != 200 {
		t.Errorf("pprof: %d", code)
	}

	// A new version of the tree, swapped in by symlink: mock gets 5 a minute.
	copyTree(t, filepath.Join(root, "v2"))
	ex := filepath.Join(root, "v2", "ratelimit", "config", "example.yaml")
	data, _ := os.ReadFile(ex)
	data = []byte(strings.Replace(string(data), "value: mock\n        rate_limit:\n          unit: minute\n          requests_per_unit: 1", "value: mock\n        rate_limit:\n          unit: minute\n          requests_per_unit: 5", 1))
	if err := os.WriteFile(ex, data, 0o644); err != nil {
		t.Fatal(err)
	}
	reloads, _ := p.stderr.count("configuration reloaded")
	swapSymlink(t, filepath.Join(root, "v2"), filepath.Join(root, "current"))
	p.waitLog(t, "configuration reloaded", reloads+1)
	if _, rlconfig := get(t, debugURL+"/rlconfig"); !strings.Contains(rlconfig, "destination_cluster_mock: unit=MINUTE requests_per_unit=5") {
		t.Fatalf("/rlconfig after the reload:\n%s", rlconfig)
	}
	// The rule kept its place, so its bucket keeps what was consumed
	// (capped at the new burst); the new limit is the one answered.
	resp, err := client.ShouldRateLimit(ctx, req)
	if err != nil || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 5 {
		t.Fatalf("after the swap: %v %v", resp, err)
	}

	// SIGTERM: exit status 0.
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit within 15 s of SIGTERM")
	}
}

// /healthcheck fails while Redis does not answer and recovers when it does.
func TestHealthFollowsRedis(t *testing.T) {
	srv := redistest.Start(t)
	proxy := faultproxy.NewProxy(t, srv.Addr)
	root := t.TempDir()
	copyTree(t, root)
	p := startProc(t, []string{"USE_STATSD=false", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + proxy.Addr,
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "REDIS_TIMEOUT=200ms",
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0"})
	url := "http://" + p.addrs["http"] + "/healthcheck"
	if code, _ := get(t, url); code != 200 {
		t.Fatalf("healthcheck %d", code)
	}
	proxy.SetMode(faultproxy.Refuse)
	p.waitLog(t, "Redis does not answer: unhealthy", 1)
	if code, _ := get(t, url); code != 500 {
		t.Errorf("healthcheck %d while Redis refuses, want 500", code)
	}
	proxy.SetMode(faultproxy.Pass)
	p.waitLog(t, "Redis answers again: healthy", 1)
	if code, _ := get(t, url); code != 200 {
		t.Errorf("healthcheck %d once Redis answers again, want 200", code)
	}
}

// Redis down at startup: retried as REDIS_STARTUP_* say, then one line
// naming it and the cause, exit status 1.
func TestRedisDownAtStartup(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close()
	cmd := exec.Command(binary)
	cmd.Env = []string{"USE_STATSD=false", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + closed, "RUNTIME_ROOT=" + t.TempDir(),
		"REDIS_STARTUP_INITIAL_INTERVAL=20ms", "REDIS_STARTUP_MAX_INTERVAL=50ms", "REDIS_STARTUP_MAX_ELAPSED_TIME=300ms", "LOG_LEVEL=error"}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v\n%s", err, out)
	}
	last := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	for _, want := range []string{"sluice-rls: REDIS_URL=\"" + closed + "\": Redis does not answer", "REDIS_STARTUP_MAX_ELAPSED_TIME=300ms", "connection refused"} {
		if !strings.Contains(last, want) {
			t.Errorf("last line %q lacks %q", last, want)
		}
	}
}

// A bad variable: one line naming it and its value, exit status 1.
func TestBadVariableExits(t *testing.T) {
	cmd := exec.Command(binary)
	cmd.Env = []string{"REDIS_TYPE=bogus"}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v", err)
	}
	if got := string(out); got != "sluice-rls: REDIS_TYPE=\"bogus\": not one of single, cluster, sentinel\n" {
		t.Errorf("output %q", got)
	}
}

// SIGTERM fails the health check at once, lets a request in flight (here
// held at Redis) finish with its answer, and then exits with status 0.
func TestSigtermDrains(t *testing.T) {
	srv := redistest.Start(t)
	proxy := faultproxy.NewProxy(t, srv.Addr)
	root := t.TempDir()
	copyTree(t, root)
	p := startProc(t, []string{"USE_STATSD=false", "LOG_LEVEL=info", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + proxy.Addr, "REDIS_TIMEOUT=30s",
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit",
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0"})
	conn, err := grpc.NewClient(p.addrs["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	req := &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("database", "users")}}
	if _, err := client.ShouldRateLimit(context.Background(), req); err != nil { // connected
		t.Fatal(err)
	}
	proxy.SetMode(faultproxy.Stall)
	held := proxy.Held()
	answered := make(chan error, 1)
	go func() {
		resp, err := client.ShouldRateLimit(context.Background(), req)
		if err == nil && resp.OverallCode != rlsv3.RateLimitResponse_OK {
			err = fmt.Errorf("answer %v", resp.OverallCode)
		}
		answered <- err
	}()
	proxy.WaitHeld(held + 1) // the request is at Redis
	p.cmd.Process.Signal(syscall.SIGTERM)
	url := "http://" + p.addrs["http"] + "/healthcheck"
	p.waitLog(t, "stopping: draining requests in flight", 1)
	if code, _ := get(t, url); code != 500 {
		t.Errorf("healthcheck %d while draining, want 500", code)
	}
	select {
	case err := <-p.exited:
		t.Fatalf("exited with a request in flight: %v", err)
	case err := <-answered:
		t.Fatalf("answered before Redis did: %v", err)
	default:
	}
	proxy.Release()
	if err := <-answered; err != nil {
		t.Fatalf("the request in flight: %v", err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit after the drain")
	}
}

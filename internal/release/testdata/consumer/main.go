// Command consumer is what a user of sluice would write, built by
// scripts/consumer.sh in a fresh module outside the repository against the
// modules it fetched with go get at a release-candidate version. It uses every
// released module once, over real loopback connections, and exits non-zero
// when any check fails:
//
//   - the root module: a stack loaded from the gateway's JSON, behind
//     httplimit on an HTTP server;
//   - grpclimit: the unary server interceptor on a gRPC server;
//   - mcplimit: the middleware on an MCP server over streamable HTTP;
//   - envoyrls: Envoy's rate limit service on a gRPC server;
//   - redis: two stacks sharing one limit in a redis-server this
//     program starts on a free port (and stops).
//
// It lives under testdata so that no module of the repository builds it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/mcplimit"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
)

// The modules a release tags, which this program must have been built with
// at the version it is told.
var released = []string{
	"github.com/sluicehq/sluice",
	"github.com/sluicehq/sluice/envoyrls",
	"github.com/sluicehq/sluice/grpclimit",
	"github.com/sluicehq/sluice/mcplimit",
	"github.com/sluicehq/sluice/redis",
}

func main() {
	version := flag.String("version", "", "the version every sluice module must have in the build")
	flag.Parse()
	checks := []struct {
		name string
		run  func() (string, error)
	}{
		{"build: every sluice module at " + *version, func() (string, error) { return checkBuild(*version) }},
		{"httplimit: a per-caller limit on an HTTP server", checkHTTP},
		{"grpclimit: the unary interceptor on a gRPC server", checkGRPC},
		{"mcplimit: a tool limit on an MCP server (streamable HTTP)", checkMCP},
		{"envoyrls: Envoy's rate limit service on a gRPC server", checkEnvoy},
		{"redis: two stacks sharing one limit in redis-server", checkRedis},
	}
	failed := 0
	for _, c := range checks {
		got, err := c.run()
		if err != nil {
			failed++
			fmt.Printf("FAIL %s\n     %v\n", c.name, err)
			continue
		}
		fmt.Printf("ok   %s\n     %s\n", c.name, got)
	}
	if failed > 0 {
		fmt.Printf("consumer: %d of %d checks FAILED\n", failed, len(checks))
		os.Exit(1)
	}
	fmt.Printf("consumer: all %d checks passed\n", len(checks))
}

// checkBuild reads the build's module list: each released module at the
// version, none replaced (a replace would mean the test proves nothing).
func checkBuild(version string) (string, error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("no build information")
	}
	got := map[string]*debug.Module{}
	for _, d := range bi.Deps {
		got[d.Path] = d
	}
	var seen []string
	for _, p := range released {
		d := got[p]
		switch {
		case d == nil:
			return "", fmt.Errorf("%s is not in the build", p)
		case d.Replace != nil:
			return "", fmt.Errorf("%s is replaced by %s %s", p, d.Replace.Path, d.Replace.Version)
		case version != "" && d.Version != version:
			return "", fmt.Errorf("%s is at %s, want %s", p, d.Version, version)
		}
		seen = append(seen, strings.TrimPrefix(p, "github.com/sluicehq/")+"@"+d.Version)
	}
	return strings.Join(seen, " "), nil
}

// perCaller is the gateway's JSON for one limit of n requests a minute per
// value of dim.
func perCaller(dim string, n int) []byte {
	return fmt.Appendf(nil, `{"rateLimits": [{"rateLimitId": "per-%s", "dimensionKeys": [%q], "entries": [
	  {"dimensions": {%q: "*"}, "requests": [{"rate": %d, "period": "minute"}]}]}]}`, dim, dim, dim, n)
}

func checkHTTP() (string, error) {
	limits, err := stack.Load(perCaller("caller", 2))
	if err != nil {
		return "", err
	}
	keys := func(r *http.Request) (sluice.Keys, error) {
		return sluice.NewKeys("caller", r.Header.Get("X-API-Key")), nil
	}
	srv := httptest.NewServer(httplimit.New(limits, keys)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	})))
	defer srv.Close()
	var codes []string
	var retryAfter string
	for range 3 {
		req, err := http.NewRequest("GET", srv.URL, nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("X-API-Key", "alice")
		res, err := srv.Client().Do(req)
		if err != nil {
			return "", err
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		codes = append(codes, strconv.Itoa(res.StatusCode))
		retryAfter = res.Header.Get("Retry-After")
	}
	if got := strings.Join(codes, " "); got != "200 200 429" || retryAfter == "" {
		return "", fmt.Errorf("statuses %s, Retry-After %q; want 200 200 429 and a Retry-After", got, retryAfter)
	}
	return "statuses 200 200 429, Retry-After: " + retryAfter, nil
}

// serveGRPC serves srv on a loopback port and returns a connection to it
// and a function that stops both.
func serveGRPC(srv *grpc.Server) (*grpc.ClientConn, func(), error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	go srv.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		srv.Stop()
		return nil, nil, err
	}
	return conn, func() { conn.Close(); srv.Stop() }, nil
}

func checkGRPC() (string, error) {
	limits, err := stack.Load(perCaller("method", 2))
	if err != nil {
		return "", err
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(grpclimit.UnaryServerInterceptor(limits, grpclimit.MethodKey("method"))))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	conn, stop, err := serveGRPC(srv)
	if err != nil {
		return "", err
	}
	defer stop()
	client := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	var lastErr error
	for range 3 {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		got = append(got, status.Code(err).String())
		lastErr = err
	}
	delay, ok := grpclimit.RetryDelay(lastErr)
	if strings.Join(got, " ") != "OK OK ResourceExhausted" || status.Code(lastErr) != codes.ResourceExhausted || !ok || delay <= 0 {
		return "", fmt.Errorf("codes %v, retry delay %v (%v); want OK OK ResourceExhausted with a RetryInfo delay", got, delay, ok)
	}
	return fmt.Sprintf("codes %s, RetryInfo delay %v", strings.Join(got, " "), delay.Round(time.Second)), nil
}

func checkMCP() (string, error) {
	limits, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "per-tool", "dimensionKeys": ["targetName", "toolName"], "entries": [
	  {"dimensions": {"targetName": "my-target", "toolName": "*"}, "requests": [{"rate": 2, "period": "minute"}]}]}]}`))
	if err != nil {
		return "", err
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "my-target", Version: "v1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "returns the text"}, func(_ context.Context, _ *mcp.CallToolRequest, x in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: x.Text}}}, nil, nil
	})
	// The Go SDK's client reads the gateway's -32003 as "client is closing".
	server.AddReceivingMiddleware(mcplimit.Middleware(limits, mcplimit.ToolKeys("my-target"), mcplimit.WithJSONRPCCode(429)))
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "consumer", Version: "v1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: srv.Client()}, nil)
	if err != nil {
		return "", err
	}
	defer cs.Close()
	var got []string
	for range 2 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil {
			return "", fmt.Errorf("call %d: %v", len(got)+1, err)
		}
		got = append(got, res.Content[0].(*mcp.TextContent).Text)
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	data, ok := mcplimit.ParseError(err, 429)
	if !ok || data.RetryAfter <= 0 {
		return "", fmt.Errorf("third call: %v; want the throttled JSON-RPC error with retryAfter", err)
	}
	return fmt.Sprintf("results %q, then throttled by %s, retryAfter %ds", got, data.LimitKey, data.RetryAfter), nil
}

func checkEnvoy() (string, error) {
	cfg, err := envoyrls.Parse(map[string][]byte{"ratelimit.yaml": []byte(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 2
`)})
	if err != nil {
		return "", err
	}
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, envoyrls.New(cfg))
	conn, stop, err := serveGRPC(srv)
	if err != nil {
		return "", err
	}
	defer stop()
	client := rlsv3.NewRateLimitServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}}}}
	var got []string
	for range 3 {
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			return "", err
		}
		got = append(got, resp.OverallCode.String())
	}
	if s := strings.Join(got, " "); s != "OK OK OVER_LIMIT" {
		return "", fmt.Errorf("codes %s; want OK OK OVER_LIMIT", s)
	}
	return "codes " + strings.Join(got, " "), nil
}

func checkRedis() (string, error) {
	addr, stop, err := startRedis()
	if err != nil {
		return "", err
	}
	defer stop()
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := stack.Parse(perCaller("caller", 3))
	if err != nil {
		return "", err
	}
	// Two pods: each its own Backend and Stack, one limit between them. A
	// timeout for a loaded machine (the default is 50 ms) and fail-closed,
	// so that a failed call is an error here rather than an admission.
	var pods []*stack.Stack
	for range 2 {
		b, err := sluiceredis.New(client, sluiceredis.WithTimeout(5*time.Second))
		if err != nil {
			return "", err
		}
		s, err := stack.New(cfg, stack.WithBackend(b), stack.WithFailClosed())
		if err != nil {
			return "", err
		}
		pods = append(pods, s)
	}
	keys := sluice.NewKeys("caller", "alice")
	var got []string
	for _, pod := range []int{0, 1, 0, 1} {
		d, err := pods[pod].Allow(ctx, keys)
		if err != nil {
			return "", err
		}
		got = append(got, fmt.Sprintf("pod%d:%v", pod, d.Allowed))
	}
	n, err := client.DBSize(ctx).Result()
	if err != nil {
		return "", err
	}
	if s := strings.Join(got, " "); s != "pod0:true pod1:true pod0:true pod1:false" || n == 0 {
		return "", fmt.Errorf("decisions %s, %d keys in Redis; want pod0:true pod1:true pod0:true pod1:false and the bucket in Redis", s, n)
	}
	return fmt.Sprintf("decisions %s, %d key(s) in redis-server at %s", strings.Join(got, " "), n, addr), nil
}

// startRedis starts a redis-server without persistence on a free loopback
// port and waits until it answers.
func startRedis() (addr string, stop func(), err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, fmt.Errorf("redis-server is not on PATH (Debian: apt-get install redis-server): %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	dir, err := os.MkdirTemp("", "consumer-redis-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop = func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
	}
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := client.Ping(ctx).Err()
		cancel()
		if err == nil {
			return addr, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("redis-server on %s did not answer: %v\n%s", addr, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

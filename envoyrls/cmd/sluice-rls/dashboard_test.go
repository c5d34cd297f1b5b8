package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/redis/redistest"
)

// series parses Prometheus text exposition: metric name → the label sets of
// its series.
func series(text string) map[string][]map[string]string {
	out := map[string][]map[string]string{}
	label := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		ls := map[string]string{}
		if strings.HasPrefix(rest, "{") {
			for _, m := range label.FindAllStringSubmatch(rest[:strings.LastIndexByte(rest, '}')+1], -1) {
				ls[m[1]] = m[2]
			}
		}
		out[name] = append(out[name], ls)
	}
	return out
}

var (
	metricRef = regexp.MustCompile(`\b((?:sluice|ratelimit)_[a-zA-Z0-9_]+)(\{[^}]*\})?`)
	byLabels  = regexp.MustCompile(`by \(([^)]*)\)`)
	matcher   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"`)
)

// Every query of dashboard.json names metrics, labels and label values
// that the exporter serves after a short load: allowed and denied
// decisions, a flood of denials on one descriptor (answered by the
// near-cache of denials), a shadow-mode would-denial, a Redis outage, a
// refused reload.
func TestDashboardQueriesMatchTheExporter(t *testing.T) {
	srv := redistest.Start(t)
	proxy := faultproxy.NewProxy(t, srv.Addr)
	root := t.TempDir()
	copyTree(t, root)
	p := startProc(t, []string{"USE_STATSD=false", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + proxy.Addr, "REDIS_TIMEOUT=300ms",
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit",
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
		"USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:0"})
	conn, err := grpc.NewClient(p.addrs["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	ask := func(domain string, ds ...*ratelimitv3.RateLimitDescriptor) {
		t.Helper()
		if _, err := client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		ask("rl", desc("source_cluster", "proxy", "destination_cluster", "mock")) // 1 a minute: denials
		ask("rl", desc("foo", "x", "baz", "shady"))                               // shadow, 3 a minute
		ask("mongo_cps", desc("database", "users"))
	}
	for range 20 { // a flood over the limit: the near-cache of denials answers it
		ask("rl", desc("source_cluster", "proxy", "destination_cluster", "mock"))
	}
	proxy.SetMode(faultproxy.Refuse)
	ask("mongo_cps", desc("database", "users")) // fail-open: OK, a backend error
	proxy.SetMode(faultproxy.Pass)
	bad := filepath.Join(root, "ratelimit", "config", "bad.yaml")
	if err := os.WriteFile(bad, []byte("domain: bad\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, "configuration refused", 1)
	_, text := get(t, "http://"+p.addrs["prometheus"]+"/metrics")
	got := series(text)
	if len(got["ratelimit_service_config_load_error"]) == 0 {
		t.Errorf("the refused reload is not counted:\n%s", grepLines(text, "config_load"))
	}
	// The flood's denials after the first were answered from the cache
	// (the mock bucket refills in a minute); the panels on the cache show
	// something, not an empty series.
	if _, text := get(t, "http://"+p.addrs["prometheus"]+"/metrics"); !regexp.MustCompile(`(?m)^sluice_backend_denial_cache_hits [1-9]`).MatchString(text) {
		t.Errorf("no denial cache hits after the flood:\n%s", grepLines(text, "denial_cache"))
	}

	data, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	queries := 0
	for _, panel := range dash.Panels {
		for _, target := range panel.Targets {
			queries++
			expr := target.Expr
			refs := metricRef.FindAllStringSubmatch(byLabels.ReplaceAllString(expr, ""), -1)
			if len(refs) == 0 {
				t.Errorf("%s: %q names no metric", panel.Title, expr)
			}
			var sets []map[string]string
			for _, ref := range refs {
				name := ref[1]
				if len(got[name]) == 0 {
					t.Errorf("%s: %q: no series %s", panel.Title, expr, name)
					continue
				}
				sets = append(sets, got[name]...)
				for _, m := range matcher.FindAllStringSubmatch(ref[2], -1) {
					found := false
					for _, ls := range got[name] {
						found = found || ls[m[1]] == m[2]
					}
					if !found {
						t.Errorf("%s: %q: no series %s with %s=%q", panel.Title, expr, name, m[1], m[2])
					}
				}
			}
			for _, by := range byLabels.FindAllStringSubmatch(expr, -1) {
				for _, l := range strings.Split(by[1], ",") {
					l = strings.TrimSpace(l)
					found := false
					for _, ls := range sets {
						_, ok := ls[l]
						found = found || ok
					}
					if !found {
						t.Errorf("%s: %q: no series carries the label %s", panel.Title, expr, l)
					}
				}
			}
		}
	}
	if queries < 10 {
		t.Errorf("%d queries, want the dashboard's", queries)
	}
	if t.Failed() {
		_, text := get(t, "http://"+p.addrs["prometheus"]+"/metrics")
		t.Logf("/metrics:\n%s", text)
	}
}

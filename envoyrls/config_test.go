package envoyrls_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/stack"
)

// The matching cases of envoyproxy/ratelimit's configuration tests, asked
// over gRPC: which limit (requests per unit and unit, or none) each
// descriptor gets.
func TestTreeWalkMatchesTheReference(t *testing.T) {
	cfg, err := envoyrls.Load("testdata/edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, c, _ := newServer(t, cfg)
	const (
		sec  = rlsv3.RateLimitResponse_RateLimit_SECOND
		min  = rlsv3.RateLimitResponse_RateLimit_MINUTE
		hour = rlsv3.RateLimitResponse_RateLimit_HOUR
		day  = rlsv3.RateLimitResponse_RateLimit_DAY
	)
	for _, tc := range []struct {
		name   string
		domain string
		d      *ratelimitv3.RateLimitDescriptor
		rpu    uint32 // 0: no limit
		unit   rlsv3.RateLimitResponse_RateLimit_Unit
		id     string
	}{
		{"unknown domain", "elsewhere", desc("client", "x"), 0, 0, ""},
		{"key and value with no limit, other value", "edge", desc("tenant", "other"), 0, 0, ""},
		{"key and value with no limit of its own", "edge", desc("tenant", "acme"), 0, 0, ""},
		{"deeper than the tree", "edge", desc("client", "partner", "sub", "x"), 0, 0, ""},
		{"second level exists but not this value", "edge", desc("region", "eu", "zone", "eu-north"), 0, 0, ""},
		{"second level default", "edge", desc("tenant", "acme", "route", "/home"), 5, sec, "edge.tenant_acme.route"},
		{"second level exact beats default", "edge", desc("tenant", "acme", "route", "/login"), 10, sec, "edge.tenant_acme.route_/login"},
		{"first level default", "edge", desc("client", "someone"), 20, min, "edge.client"},
		{"first level exact beats default", "edge", desc("client", "partner"), 30, min, "edge.client_partner"},
		{"exact value without rate_limit sets no limit", "edge", desc("client", "internal"), 0, 0, ""},
		{"hour", "edge", desc("report", "r1"), 1, hour, "edge.report"},
		{"day", "edge", desc("export", "e1"), 1, day, "edge.export"},
		{"first level of two with limits", "edge", desc("region", "eu"), 15, day, "edge.region_eu"},
		{"second level of two with limits", "edge", desc("region", "eu", "zone", "eu-west"), 25, day, "edge.region_eu.zone_eu-west"},
		{"value prefix", "edge", desc("path", "/api/users"), 7, min, "edge.path_/api/*"},
		{"value prefix, not matching", "edge", desc("path", "/static/x"), 0, 0, ""},
		{"named rule", "edge", desc("user", "u1"), 3, min, "per-user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := ask(t, c, tc.domain, tc.d).Statuses[0]
			if st.Code != rlsv3.RateLimitResponse_OK {
				t.Errorf("code %v on a first request", st.Code)
			}
			cl := st.CurrentLimit
			switch {
			case tc.rpu == 0 && cl != nil:
				t.Errorf("limit %v, want none", cl)
			case tc.rpu != 0 && cl == nil:
				t.Errorf("no limit, want %d per %v", tc.rpu, tc.unit)
			case tc.rpu != 0 && (cl.RequestsPerUnit != tc.rpu || cl.Unit != tc.unit || cl.Name != tc.id):
				t.Errorf("limit %v, want %d per %v named %q", cl, tc.rpu, tc.unit, tc.id)
			}
			if tc.rpu != 0 && st.LimitRemaining != tc.rpu-1 {
				t.Errorf("remaining %d, want %d", st.LimitRemaining, tc.rpu-1)
			}
		})
	}
}

// Each distinct value under a key-only node has its own bucket; an exact
// node is shared by nobody else.
func TestDefaultsCountEachValueSeparately(t *testing.T) {
	cfg, err := envoyrls.Load("testdata/edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, c, _ := newServer(t, cfg)
	if got := countOK(t, c, 25, "edge", desc("client", "a")); got != 20 {
		t.Errorf("client a: %d OK, want 20", got)
	}
	if got := countOK(t, c, 25, "edge", desc("client", "b")); got != 20 {
		t.Errorf("client b after a is spent: %d OK, want 20", got)
	}
	if got := countOK(t, c, 12, "edge", desc("path", "/api/x")); got != 7 {
		t.Errorf("/api/x: %d OK, want 7", got)
	}
	if got := countOK(t, c, 12, "edge", desc("path", "/api/y")); got != 7 {
		t.Errorf("/api/y has its own bucket under the prefix: %d OK, want 7", got)
	}
}

func TestUnlimitedNeverLimits(t *testing.T) {
	cfg, _ := envoyrls.Load("testdata/edge.yaml")
	_, c, _ := newServer(t, cfg)
	for range 50 {
		resp := ask(t, c, "edge", desc("health", "probe"))
		if resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != 1<<32-1 || resp.Statuses[0].CurrentLimit != nil {
			t.Fatalf("unlimited: %v", resp)
		}
	}
}

// replaces drops the replaced rule when both match one request: the vip
// rule replaces per-user, so per-user's 3 a minute does not apply and its
// bucket is not touched.
func TestReplacesDropsTheReplacedRule(t *testing.T) {
	cfg, _ := envoyrls.Load("testdata/edge.yaml")
	_, c, _ := newServer(t, cfg)
	for i := range 10 {
		resp := ask(t, c, "edge", desc("user", "u1"), desc("vip", "v1"))
		if resp.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Fatalf("request %d with the vip rule: %v", i, resp)
		}
		if resp.Statuses[0].CurrentLimit != nil {
			t.Fatalf("the replaced rule still applies: %v", resp.Statuses[0])
		}
		if got := resp.Statuses[1].CurrentLimit.GetName(); got != "vip-user" {
			t.Fatalf("second status names %q", got)
		}
	}
	// Without the replacing descriptor, per-user applies, untouched so far.
	if got := countOK(t, c, 5, "edge", desc("user", "u1")); got != 3 {
		t.Errorf("per-user alone: %d OK, want 3", got)
	}
}

// A shadow_mode rule is counted and reported but never denies; the global
// switch turns any denial into OK while still naming the rule.
func TestShadowMode(t *testing.T) {
	cfg, _ := envoyrls.Load("testdata/edge.yaml")
	srv, c, _ := newServer(t, cfg)
	first := ask(t, c, "edge", desc("beta", "b"))
	if first.OverallCode != rlsv3.RateLimitResponse_OK || first.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("first: %v", first)
	}
	second := ask(t, c, "edge", desc("beta", "b"))
	if second.OverallCode != rlsv3.RateLimitResponse_OK || second.Statuses[0].Code != rlsv3.RateLimitResponse_OK {
		t.Fatalf("shadow rule denied: %v", second)
	}
	if got, _ := meta(second, envoyrls.MetaShadowDenied).([]any); len(got) != 1 || got[0] != "edge.beta" {
		t.Errorf("shadow_denied = %v, want [edge.beta]", meta(second, envoyrls.MetaShadowDenied))
	}

	srv.SetShadowMode(true)
	ok := countOK(t, c, 30, "edge", desc("client", "g"))
	resp := ask(t, c, "edge", desc("client", "g"))
	if ok != 30 || resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].Code != rlsv3.RateLimitResponse_OVER_LIMIT ||
		meta(resp, envoyrls.MetaShadow) != true || meta(resp, envoyrls.MetaDeniedBy) != "edge.client" {
		t.Fatalf("global shadow: %d OK; last %v", ok, resp)
	}
	srv.SetShadowMode(false)
	if ask(t, c, "edge", desc("client", "g")).OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Error("shadow off: the spent limit does not deny")
	}
}

// The files envoyproxy/ratelimit refuses, refused here too, each with the
// file, the line and the path inside it.
func TestBadFiles(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"empty domain", "domain: \"\"\ndescriptors: []\n", `bad.yaml:1: domain: empty domain`},
		{"no domain", "descriptors: []\n", `bad.yaml:1: domain: a domain is required`},
		{"empty key", "domain: d\ndescriptors:\n  - value: v\n", `bad.yaml:3: descriptors[0].key: descriptor has an empty key`},
		{"duplicate key", "domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n",
			`bad.yaml:5: descriptors[1]: duplicate descriptor "d.k_v" (key "k", value "v")`},
		{"duplicate default", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: k\n      - key: k\n",
			`bad.yaml:6: descriptors[0].descriptors[1]: duplicate descriptor "d.a.k"`},
		{"bad unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n",
			`bad.yaml:5: descriptors[0].rate_limit.unit: invalid unit "fortnight"`},
		{"no unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 1\n",
			`bad.yaml:5: descriptors[0].rate_limit.unit: a unit is required`},
		{"unlimited with a unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n      unit: second\n",
			`bad.yaml:6: descriptors[0].rate_limit.unit: should not specify a unit when unlimited`},
		{"replaces empty", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      name: a\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: \"\"\n",
			`bad.yaml:9: descriptors[0].rate_limit.replaces[0].name: an empty replaces entry`},
		{"replaces self", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      name: a\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: a\n",
			`bad.yaml:9: descriptors[0].rate_limit.replaces[0].name: a rule cannot replace itself ("a")`},
		{"misspelled key", "domain: d\ndescriptors:\n  - key: k\n    ratelimit:\n      unit: second\n",
			`bad.yaml:4: descriptors[0].ratelimit: unknown key`},
		{"misspelled rate key", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requestsperunit: 5\n",
			`bad.yaml:6: descriptors[0].rate_limit.requestsperunit: unknown key`},
		{"non-string key", "domain: d\ndescriptors:\n  - key: k\n    0.25: x\n", `bad.yaml:4: descriptors[0].0.25: unknown key`},
		{"list of non-maps", "domain: d\ndescriptors:\n  - a\n  - b\n", `bad.yaml:3: descriptors[0]: must be a descriptor`},
		{"bad YAML", "domain: d\ndescriptors: [\n", `bad.yaml: invalid YAML: line 2: did not find expected node content`},
		{"negative requests", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: -1\n",
			`bad.yaml:6: descriptors[0].rate_limit.requests_per_unit: must be a whole number from 0 to 4294967295, got "-1"`},
		{"zero unit_multiplier", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      unit_multiplier: 0\n",
			`bad.yaml:7: descriptors[0].rate_limit.unit_multiplier: must be a whole number from 1`},
		{"two documents", "domain: d\n---\ndomain: e\n", `bad.yaml:2: a second YAML document`},
		{"empty file", "", `bad.yaml: empty file`},
		{"not a mapping", "- 1\n", `bad.yaml:1: must be a mapping with domain and descriptors`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := envoyrls.Parse(map[string][]byte{"bad.yaml": []byte(tc.yaml)})
			var ce *stack.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *stack.ConfigError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
		})
	}
}

func TestDuplicateDomainAcrossFiles(t *testing.T) {
	_, err := envoyrls.Parse(map[string][]byte{
		"a.yaml": []byte("domain: d\ndescriptors: []\n"),
		"b.yaml": []byte("\ndomain: d\ndescriptors: []\n"),
	})
	if err == nil || !strings.Contains(err.Error(), `b.yaml:2: domain: duplicate domain "d" (also in a.yaml)`) {
		t.Fatalf("err = %v", err)
	}
}

// A directory loads its *.yaml, *.yml and *.json files and skips the rest
// and dot files (Kubernetes' ..data).
func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	write("b.yml", "domain: b\ndescriptors: []\n")
	write("c.json", `{"rateLimits": [{"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [{"dimensions": {"caller": "*"}, "requests": [{"rate": 2, "period": "minute"}]}]}]}`)
	write("README.md", "not a config")
	write(".hidden.yaml", "not: [valid")
	cfg, err := envoyrls.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Domains(), ","); got != "a,b" {
		t.Errorf("domains %q", got)
	}
	if len(cfg.Files()) != 3 {
		t.Errorf("files %v", cfg.Files())
	}
	write("d.yaml", "domain: a\n")
	if _, err := envoyrls.Load(dir); err == nil || !strings.Contains(err.Error(), "d.yaml:1: domain: duplicate domain") {
		t.Errorf("duplicate across files: %v", err)
	}
}

// The gateway JSON applies to every domain, to descriptors whose keys are a
// limit's dimension keys in order, with sluice's entry matching (exact,
// then trailing "*") and several rates ANDed.
func TestGatewayJSON(t *testing.T) {
	cfg := load(t, "limits.json", `{"rateLimits": [
	  {"rateLimitId": "per-tool", "dimensionKeys": ["targetName", "toolName"], "entries": [
	    {"dimensions": {"targetName": "t1", "toolName": "readData"}, "requests": [{"rate": 5, "period": "minute"}]},
	    {"dimensions": {"targetName": "t1", "toolName": "*"}, "requests": [{"rate": 2, "period": "minute"}]}]},
	  {"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
	    {"dimensions": {"caller": "*"}, "requests": [{"rate": 10, "period": "second"}, {"rate": 3, "period": "hour"}]}]}]}`)
	_, c, _ := newServer(t, cfg)
	if got := countOK(t, c, 8, "any", desc("targetName", "t1", "toolName", "readData")); got != 5 {
		t.Errorf("exact entry: %d OK, want 5", got)
	}
	if got := countOK(t, c, 8, "other", desc("targetName", "t1", "toolName", "write")); got != 2 {
		t.Errorf("wildcard entry: %d OK, want 2", got)
	}
	resp := ask(t, c, "any", desc("toolName", "readData", "targetName", "t1"))
	if resp.Statuses[0].CurrentLimit != nil {
		t.Errorf("keys in another order matched: %v", resp.Statuses[0])
	}
	if got := countOK(t, c, 8, "any", desc("caller", "c")); got != 3 {
		t.Errorf("10/s AND 3/hour: %d OK, want 3", got)
	}
	_, err := envoyrls.Parse(map[string][]byte{"bad.json": []byte(`{"rateLimits": [{"rateLimitId": "x", "dimensionKeys": ["k"], "entries": [{"dimensions": {"k": "*"}, "requests": [{"rate": 1, "period": "week"}]}]}]}`)})
	if err == nil || !strings.Contains(err.Error(), "bad.json: rateLimits[0].rateLimitId") || !strings.Contains(err.Error(), "bad.json: rateLimits[0].entries[0].requests[0].period") {
		t.Errorf("bad gateway JSON: %v", err)
	}
}

package envoyrls_test

import (
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/envoyrls"
)

// envoyproxy/ratelimit's own configuration files (testdata/envoyproxy-
// ratelimit, see its NOTICE) load unchanged, every key they use included.
func TestReferenceFilesLoadUnchanged(t *testing.T) {
	for dir, domains := range map[string]string{
		"testdata/envoyproxy-ratelimit/integration": "[another basic share-threshold-test]",
		"testdata/envoyproxy-ratelimit/examples":    "[mongo_cps rl]",
	} {
		cfg, err := envoyrls.Load(dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if got := "[" + strings.Join(cfg.Domains(), " ") + "]"; got != domains {
			t.Errorf("%s: domains %s, want %s", dir, got, domains)
		}
	}
}

// share_threshold: every value its wildcard matches shares one bucket;
// without it each value has its own (the reference's README: 10 requests
// for files/a.pdf exhaust files/*, files_no_share/b.csv still has 10).
func TestShareThreshold(t *testing.T) {
	cfg, err := envoyrls.Load("testdata/envoyproxy-ratelimit/integration")
	if err != nil {
		t.Fatal(err)
	}
	_, c, _ := newServer(t, cfg)
	const d = "share-threshold-test"
	if got := countOK(t, c, 12, d, desc("files", "files/a.pdf")); got != 10 {
		t.Fatalf("files/a.pdf: %d OK, want 10", got)
	}
	if r := ask(t, c, d, desc("files", "files/b.csv")); r.OverallCode != over {
		t.Errorf("files/b.csv after files/a.pdf exhausted files/*: %v, want over (shared)", r)
	}
	if got := countOK(t, c, 12, d, desc("files_no_share", "files_no_share/a.pdf")); got != 10 {
		t.Fatalf("files_no_share/a.pdf: %d OK, want 10", got)
	}
	if got := countOK(t, c, 12, d, desc("files_no_share", "files_no_share/b.csv")); got != 10 {
		t.Errorf("files_no_share/b.csv: %d OK, want its own 10", got)
	}
	// the integration files' other domains answer as its tests expect
	if got := countOK(t, c, 3, "basic", desc("one_per_minute", "x")); got != 1 {
		t.Errorf("basic one_per_minute: %d OK, want 1", got)
	}
	if got := countOK(t, c, 25, "another", desc("key2", "v")); got != 20 {
		t.Errorf("another key2: %d OK, want 20", got)
	}
}

// Wildcards anywhere in a value, as the reference's loader matches them.
func TestMiddleWildcard(t *testing.T) {
	_, c, _ := newServer(t, load(t, "w.yaml", `domain: w
descriptors:
  - key: path
    value: /api/*/items/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
`))
	if got := countOK(t, c, 1, "w", desc("path", "/api/v1/items/7")) + countOK(t, c, 2, "w", desc("path", "/api/v2/items/9")); got != 2 {
		t.Errorf("two values of one shared pattern: %d OK, want 2", got)
	}
	if r := ask(t, c, "w", desc("path", "/api/v1/other")); r.Statuses[0].CurrentLimit != nil {
		t.Errorf("a value the pattern does not match got a limit: %v", r)
	}
}

// quota_mode (the reference's example.yaml, services 1 and 2, 1 and 2 a
// minute): a quota over its limit says OVER_LIMIT in its status, and the
// request is denied only when every quota descriptor is over; the metadata
// of the rules not over is in the dynamic metadata.
func TestQuotaModeAndMetadata(t *testing.T) {
	cfg, err := envoyrls.Load("testdata/envoyproxy-ratelimit/examples/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv, c, _ := newServer(t, cfg)
	both := func() *rlsv3.RateLimitResponse {
		return ask(t, c, "rl", desc("service", "service_1"), desc("service", "service_2"))
	}
	r := both()
	if r.OverallCode != ok || r.Statuses[0].Code != ok || r.Statuses[1].Code != ok {
		t.Fatalf("first: %v", r)
	}
	md, _ := meta(r, envoyrls.MetaMetadata).(map[string]any)
	if name := md["service_with_quota"].(map[string]any)["name"]; name != "service_1" {
		t.Errorf("metadata %v, want service_1's (the first rule wins)", md)
	}
	r = both() // service_1 over, service_2 has one left: OK
	if r.OverallCode != ok || r.Statuses[0].Code != over || r.Statuses[1].Code != ok {
		t.Fatalf("one quota over: %v, want OK with service_1 over", r)
	}
	md, _ = meta(r, envoyrls.MetaMetadata).(map[string]any)
	if name := md["service_with_quota"].(map[string]any)["name"]; name != "service_2" {
		t.Errorf("metadata %v, want service_2's only (service_1 is over)", md)
	}
	r = both() // both over: denied
	if r.OverallCode != over || r.Statuses[0].Code != over || r.Statuses[1].Code != over {
		t.Fatalf("every quota over: %v, want OVER_LIMIT", r)
	}
	// A quota over with a non-quota rule that passes: the non-quota rule's
	// units are given back when every quota is over.
	r = ask(t, c, "rl", desc("service", "service_1"), desc("foo", "f"))
	if r.OverallCode != over || r.Statuses[1].Code != ok {
		t.Fatalf("quota over and foo: %v", r)
	}
	if got := countOK(t, c, 3, "rl", desc("foo", "f")); got != 2 {
		t.Errorf("foo after a request every quota denied: %d OK, want its 2 (nothing consumed)", got)
	}
	// A descriptor with a hits_addend of its own (the tokens used, debited
	// after the call) stays charged when every quota is over, as after any
	// denial; only the others are given back.
	r = ask(t, c, "rl", desc("service", "service_1"), hits(desc("foo", "h"), 1))
	if r.OverallCode != over {
		t.Fatalf("quota over and a debit of foo=h: %v, want OVER_LIMIT", r)
	}
	if got := countOK(t, c, 3, "rl", desc("foo", "h")); got != 1 {
		t.Errorf("foo=h after a quota-denied debit of 1: %d OK, want 1 of its 2 (the debit stays charged)", got)
	}
	// The global quota mode makes every rule a quota.
	srv.SetQuotaMode(true)
	r = ask(t, c, "rl", desc("foo", "f"), desc("foo", "g"))
	if r.OverallCode != ok || r.Statuses[0].Code != over || r.Statuses[1].Code != ok {
		t.Errorf("global quota mode, foo=f spent and foo=g not: %v, want OK", r)
	}
}

// A quota_mode or share_threshold of the wrong type is refused with its
// file and line, as an unknown key is.
func TestNewKeysBadTypes(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"domain: d\ndescriptors:\n  - key: k\n    value: a*\n    share_threshold: yes\n", `bad.yaml:5: descriptors[0].share_threshold: must be true or false, got "yes"`},
		{"domain: d\ndescriptors:\n  - key: k\n    quota_mode: 1\n", `bad.yaml:4: descriptors[0].quota_mode: must be true or false, got "1"`},
		{"domain: d\ndescriptors:\n  - key: k\n    value: exact\n    share_threshold: true\n", `bad.yaml:3: descriptors[0].share_threshold: share_threshold needs a wildcard value`},
		{"domain: d\ndescriptors:\n  - key: k\n    metadata: [a]\n", `bad.yaml:4: descriptors[0].metadata: must be a mapping`},
		{"domain: d\ndescriptors:\n  - key: k\n    value_to_metric: []\n", `bad.yaml:4: descriptors[0].value_to_metric: must be true or false`},
		{"domain: d\ndescriptors:\n  - key: k\n    quota: true\n", `bad.yaml:4: descriptors[0].quota: unknown key`},
	} {
		_, err := envoyrls.Parse(map[string][]byte{"bad.yaml": []byte(tc.yaml)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func limitsDoc(perMinute int) []byte {
	return []byte(`{"rateLimits": [{"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
  {"dimensions": {"caller": "*"}, "requests": [{"rate": ` + strconv.Itoa(perMinute) + `, "period": "minute"}]}]}]}`)
}

// TestMetricsExample scrapes /metrics while the limits are enforced,
// reloaded from the file, and kept when the file goes bad.
func TestMetricsExample(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.json")
	if err := os.WriteFile(path, limitsDoc(2), 0o644); err != nil {
		t.Fatal(err)
	}
	c := limitertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ticks := make(chan time.Time)
	a, err := newApp(path, c.Now, func(err error) { t.Log(err) }, stack.WithTicks(ticks))
	if err != nil {
		t.Fatal(err)
	}
	// Run refreshes at once, then on each tick. Ticks are unbuffered, so
	// the first one is taken only once the initial refresh is done: an
	// event, not a poll. Then Run stops (with the refresh of that tick
	// done or skipped), and the test refreshes by hand, deterministically.
	runCtx, stopRun := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.source.Run(runCtx) }()
	select {
	case ticks <- time.Time{}:
	case err := <-done:
		t.Fatalf("Run returned before its first tick: %v", err)
	}
	if g := a.source.Status().Generation; g != 1 {
		t.Fatalf("generation %d after Run's first refresh, want 1", g)
	}
	stopRun()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
	ctx := context.Background()
	refresh := func() { _ = a.source.Refresh(ctx) }

	srv := httptest.NewServer(a.handler)
	defer srv.Close()
	get := func(path, caller string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("X-API-Key", caller)
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	// metric returns the value of the sample whose line matches re.
	metric := func(re string) float64 {
		t.Helper()
		code, body := get("/metrics", "")
		if code != 200 {
			t.Fatalf("/metrics: %d", code)
		}
		m := regexp.MustCompile(`(?m)^` + re + ` ([0-9.e+-]+)$`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no sample matching %s in:\n%s", re, body)
		}
		v, err := strconv.ParseFloat(m[len(m)-1], 64)
		if err != nil {
			t.Fatalf("%s: %v", re, err)
		}
		return v
	}
	allowed := `sluice_decisions_total\{[^}]*sluice_ratelimit_decision="allowed"[^}]*sluice_ratelimit_limit_key="per-caller"[^}]*\}`
	throttled := `sluice_decisions_total\{[^}]*sluice_ratelimit_decision="throttled"[^}]*sluice_ratelimit_limit_key="per-caller"[^}]*\}`

	// 2 per minute.
	for i, want := range []int{200, 200, 429} {
		if code, body := get("/hello", "alice"); code != want {
			t.Fatalf("request %d: %d %s, want %d", i, code, body, want)
		}
	}
	if v := metric(allowed); v != 2 {
		t.Errorf("allowed decisions %v, want 2", v)
	}
	if v := metric(throttled); v != 1 {
		t.Errorf("throttled decisions %v, want 1", v)
	}
	if v := metric(`sluice_config_generation(\{[^}]*\})?`); v != 1 {
		t.Errorf("generation %v, want 1", v)
	}

	// A new file by rename: 4 per minute. Alice's bucket keeps its state
	// (empty); bob's, new, holds 4.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, limitsDoc(4), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	refresh()
	if code, _ := get("/hello", "alice"); code != 429 {
		t.Fatalf("after the reload, alice: %d, want 429 (her bucket is still empty)", code)
	}
	for i, want := range []int{200, 200, 200, 200, 429} {
		if code, body := get("/hello", "bob"); code != want {
			t.Fatalf("after the reload, bob's request %d: %d %s, want %d", i, code, body, want)
		}
	}
	if v := metric(`sluice_config_generation(\{[^}]*\})?`); v != 2 {
		t.Errorf("generation %v, want 2", v)
	}

	// A broken file: counted, the 4 per minute stay.
	c.Advance(15 * time.Second) // one unit refills at 4 per minute
	if err := os.WriteFile(path, []byte(`{"rateLimits": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	refresh()
	for i, want := range []int{200, 429} {
		if code, body := get("/hello", "alice"); code != want {
			t.Fatalf("with a broken file, request %d: %d %s, want %d", i, code, body, want)
		}
	}
	if v := metric(`sluice_config_refresh_errors_total(\{[^}]*\})?`); v != 1 {
		t.Errorf("refresh errors %v, want 1", v)
	}
	if v := metric(`sluice_config_refresh_age_seconds(\{[^}]*\})?`); v != 15 {
		t.Errorf("refresh age %v s, want 15", v)
	}
	if v := metric(allowed); v != 7 {
		t.Errorf("allowed decisions %v, want 7", v)
	}
}

// Without flags the example runs from any directory (its limits are built
// in), is throttled, reloads, refuses a broken file and prints the metrics
// that say so.
func TestDefaultRun(t *testing.T) {
	t.Chdir(t.TempDir())
	var out strings.Builder
	if err := runArgs(context.Background(), nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []string{
		"refreshed: generation 1\nGET /hello as alice, 6 times: 200 200 200 200 200 429\n  Retry-After: 1 | rate limit exceeded (per-caller/caller=alice)\n",
		"refreshed: generation 2\nGET /hello as bob, 11 times: 200 200 200 200 200 200 200 200 200 200 429\n",
		"  logged: stack: configuration refresh (load) failed",
		"GET /hello as carol, 11 times: ",
		"  sluice_config_generation 2\n  sluice_config_refresh_age_seconds 15\n  sluice_config_refresh_errors_total 1\n",
		`  sluice_decisions_total{sluice_ratelimit_decision="throttled",sluice_ratelimit_limit_key="per-caller",sluice_ratelimit_metric="requests"} 3`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// Serving the built-in limits: a Source that always fetches the same
// document stays at generation 1.
func TestBuiltinLimitsServe(t *testing.T) {
	a, err := newApp("", time.Now, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := a.source.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if g := a.source.Status().Generation; g != 1 {
		t.Errorf("generation %d, want 1", g)
	}
	rec := httptest.NewRecorder()
	a.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/hello", nil))
	if rec.Code != 200 {
		t.Errorf("/hello: %d", rec.Code)
	}
}

func TestFlagsOutOfRange(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-addr", "127.0.0.1:0", "-config", "limits.json", "-interval", "0s"}, "-interval 0s:"},
		{[]string{"-addr", "127.0.0.1:0", "-config", "limits.json", "-interval", "48h"}, "-interval 48h0m0s:"},
		{[]string{"-config", "limits.json"}, "-config is for serving: add -addr"},
		{[]string{"-addr", "127.0.0.1:0", "-interval", "1s"}, "-interval is for polling a file: add -config"},
		{[]string{"-addr", "127.0.0.1:0", "-config", "no-such-file.json"}, "-config: open no-such-file.json:"},
		{[]string{"-addr", busy.Addr().String()}, "-addr " + busy.Addr().String() + ":"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var out strings.Builder
		err := runArgs(context.Background(), tc.args, &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") || out.Len() != 0 {
			t.Errorf("%q: error %v (printed %q), want one line naming %q", tc.args, err, out.String(), tc.want)
		}
	}
}

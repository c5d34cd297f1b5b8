package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without flags the example calls nothing outside the machine: through a
// fake upstream, alice's third 40000-token request does not fit in her
// 100k tokens a minute and is answered 429 by the proxy, bob's is served.
func TestDefaultRun(t *testing.T) {
	var out strings.Builder
	if err := runArgs(context.Background(), nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []string{
		"alice, \"hello there\", no max_tokens: 200 OK\n  usage 7 prompt + 8 completion = 15 tokens charged\n",
		"alice, \"and another one\", max_tokens 40000: 200 OK\n",
		"alice, \"and a third\", max_tokens 40000: 429 Too Many Requests\n  Retry-After: 13 | retry-after-ms: 12024 | RateLimit-Policy: \"per-caller\";q=100000;w=60 | RateLimit: \"per-caller\";r=0;t=13\n" +
			`  {"error":{"message":"Rate limit exceeded","type":"rate_limit_error","code":"429","limitKey":"per-caller/caller=key-32a642c5fd761670","metric":"tokens","retryAfter":13}}` +
			"\n  (answered by the proxy: the upstream was not called)\n",
		"bob, \"write me a long story\", max_tokens 40000: 200 OK\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// -config applies to the demonstration too.
func TestDefaultRunWithConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.json")
	if err := os.WriteFile(path, []byte(tpmConfig(50000)), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := runArgs(context.Background(), []string{"-config", path}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if want := "limits from -config " + path; !strings.Contains(out.String(), want) || !strings.Contains(out.String(), `"limitKey":"rl-abc123/qualifiedModelId=gpt-4o-mini","metric":"tokens"`) {
		t.Errorf("output lacks %q or rl-abc123's 429:\n%s", want, out.String())
	}
}

// An upstream that is not there is one line naming -upstream and the cause,
// before serving.
func TestUnreachableUpstream(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := "http://" + l.Addr().String() + "/v1"
	l.Close()
	var out strings.Builder
	err = runArgs(context.Background(), []string{"-addr", "127.0.0.1:0", "-upstream", up}, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-upstream "+up) || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %v, want one line naming -upstream %s and the cause", err, up)
	}
	if out.Len() != 0 {
		t.Errorf("announced anyway: %q", out.String())
	}
}

// With -addr it serves until its context ends, forwarding to -upstream.
func TestServe(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(demoUpstream))
	defer up.Close()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- runArgs(ctx, []string{"-addr", "127.0.0.1:0", "-upstream", up.URL + "/v1"}, pw, io.Discard)
		pw.Close()
	}()
	line, _ := bufio.NewReader(pr).ReadString('\n') // the announcement: the server listens
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	// OpenAI-compatible proxy for URL on http://ADDR/v1/chat/completions
	fields := strings.Fields(line)
	if len(fields) != 6 || !strings.HasPrefix(fields[5], "http://127.0.0.1:") {
		cancel()
		t.Fatalf("announcement %q (runArgs: %v)", line, <-served)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(fields[5], "http://"), "/v1/chat/completions")
	res, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(b), fakeCompletion) {
		t.Errorf("through the proxy: %d %s", res.StatusCode, b)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("runArgs after its context ended: %v", err)
	}
}

func TestFlagsOutOfRange(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"rateLimits": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-upstream", "http://127.0.0.1:1/v1"}, "-upstream is for serving: add -addr"},
		{[]string{"-addr", "127.0.0.1:0", "-upstream", "ftp://example.com"}, `-upstream "ftp://example.com": not an http`},
		{[]string{"-addr", "127.0.0.1:0", "-upstream", "http://"}, `-upstream "http://": not an http`},
		{[]string{"-config", "no-such-file.json"}, "-config: open no-such-file.json:"},
		{[]string{"-config", bad}, "-config " + bad + ": "},
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

package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func TestHTTPExample(t *testing.T) {
	c := limitertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h, err := newHandler(c.Now, slerrors.HTTPJSON)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path, key string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}

	// Per caller: 5 per second.
	for i := range 5 {
		if res, body := get("/hello", "alice"); res.StatusCode != 200 || res.Header.Get("RateLimit") == "" {
			t.Fatalf("alice request %d: %d %q RateLimit %q", i, res.StatusCode, body, res.Header.Get("RateLimit"))
		}
	}
	res, body := get("/hello", "alice")
	want := `{"error":"Rate limit exceeded","success":false,"limitKey":"per-caller/caller=alice","metric":"requests","retryAfter":1}`
	if res.StatusCode != 429 || body != want || res.Header.Get("Retry-After") != "1" {
		t.Errorf("alice's 6th request: %d %s Retry-After %q\nwant 429 %s", res.StatusCode, body, res.Header.Get("Retry-After"), want)
	}
	if res, _ := get("/hello", "bob"); res.StatusCode != 200 {
		t.Errorf("bob throttled by alice's limit: %d", res.StatusCode)
	}
	// Callers without a key are limited by address (all 127.0.0.1 here).
	for range 5 {
		get("/hello", "")
	}
	if res, body := get("/hello", ""); res.StatusCode != 429 || body != `{"error":"Rate limit exceeded","success":false,"limitKey":"per-caller/caller=127.0.0.1","metric":"requests","retryAfter":1}` {
		t.Errorf("anonymous 6th request: %d %s", res.StatusCode, body)
	}

	// Per route: /report 2 per minute for everyone.
	c.Advance(time.Second)
	get("/report", "carol")
	get("/report", "dave")
	res, body = get("/report", "erin")
	if res.StatusCode != 429 || body != `{"error":"Rate limit exceeded","success":false,"limitKey":"per-route/route=GET %2Freport","metric":"requests","retryAfter":30}` {
		t.Errorf("third /report: %d %s", res.StatusCode, body)
	}
	if got := res.Header.Get("RateLimit-Policy"); got != `"per-route";q=2;w=60` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	// Waiting the advertised 30 s is enough.
	c.Advance(30 * time.Second)
	if res, _ := get("/report", "erin"); res.StatusCode != 200 {
		t.Errorf("/report after retryAfter: %d", res.StatusCode)
	}
}

// Every -format answers the third /report of the minute in its own shape,
// with the same 30 s wait.
func TestFormats(t *testing.T) {
	const key = `"limitKey":"per-route/route=GET %2Freport","metric":"requests","retryAfter":30`
	for _, tt := range []struct {
		format      string
		status      int
		contentType string
		body        string
	}{
		{"http", 429, "application/json", `{"error":"Rate limit exceeded","success":false,` + key + `}`},
		{"anthropic", 429, "application/json", `{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit exceeded",` + key + `}}`},
		{"openai", 429, "application/json", `{"error":{"message":"Rate limit exceeded","type":"rate_limit_error","code":"429",` + key + `}}`},
		{"aws", 400, "application/x-amz-json-1.1", `{"__type":"ThrottlingException","message":"Rate exceeded",` + key + `}`},
		{"jsonrpc", 200, "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32003,"message":"Rate limit exceeded","data":{` + key + `}}}`},
	} {
		f, err := slerrors.ParseFormat(tt.format)
		if err != nil {
			t.Fatal(err)
		}
		c := limitertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		h, err := newHandler(c.Now, f)
		if err != nil {
			t.Fatal(err)
		}
		var rec *httptest.ResponseRecorder
		for range 3 {
			rec = httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/report", nil)
			req.Header.Set("X-API-Key", "alice")
			h.ServeHTTP(rec, req)
		}
		if rec.Code != tt.status || rec.Header().Get("Content-Type") != tt.contentType || rec.Body.String() != tt.body || rec.Header().Get("Retry-After") != "30" {
			t.Errorf("-format %s: %d %q Retry-After %q\n%s\nwant %d %q\n%s", tt.format, rec.Code, rec.Header().Get("Content-Type"),
				rec.Header().Get("Retry-After"), rec.Body, tt.status, tt.contentType, tt.body)
		}
	}
}

// Mounted after routing, the middleware never sees a request that matches no
// route: a 404 uses up nothing.
func TestNotFoundUsesUpNothing(t *testing.T) {
	c := limitertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h, err := newHandler(c.Now, slerrors.HTTPJSON)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(path string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("X-API-Key", "alice")
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for range 20 {
		if code := serve("/no-such-route"); code != 404 {
			t.Fatalf("unknown path: %d, want 404", code)
		}
	}
	for i := range 5 {
		if code := serve("/hello"); code != 200 {
			t.Fatalf("alice's /hello %d after 20 404s: %d, want her 5 per second intact", i+1, code)
		}
	}
	if code := serve("/hello"); code != 429 {
		t.Errorf("alice's 6th /hello: %d, want 429", code)
	}
}

// Without flags the example serves on a port of its own and is its own
// client: the sixth /hello and the third /report are throttled, with their
// headers and bodies printed, and /report is served again 30 s later.
func TestDefaultRun(t *testing.T) {
	var out strings.Builder
	if err := runArgs(context.Background(), nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []string{
		"GET /hello         as alice  429 Too Many Requests\n  Retry-After: 1 | retry-after-ms: 200 | RateLimit-Policy: \"per-caller\";q=5;w=1 | RateLimit: \"per-caller\";r=0;t=1\n" +
			`  {"error":"Rate limit exceeded","success":false,"limitKey":"per-caller/caller=alice","metric":"requests","retryAfter":1}` + "\n",
		"GET /hello         as bob    200 OK\n",
		"GET /report        as erin   429 Too Many Requests\n  Retry-After: 30 |",
		"(the clock moves 30s on, as Retry-After asked)\nGET /report        as erin   200 OK\n",
		"GET /no-such-route as frank  404 Not Found\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// -format changes the body's shape.
	out.Reset()
	if err := runArgs(context.Background(), []string{"-format", "anthropic"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit exceeded","limitKey":"per-route/route=GET %2Freport","metric":"requests","retryAfter":30}}`; !strings.Contains(out.String(), want) {
		t.Errorf("-format anthropic: output lacks %s:\n%s", want, out.String())
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
		{[]string{"-format", "xml"}, `-format "xml": want http, anthropic`},
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

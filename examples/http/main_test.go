package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestHTTPExample(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h, err := newHandler(c.now)
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
	c.add(time.Second)
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
	c.add(30 * time.Second)
	if res, _ := get("/report", "erin"); res.StatusCode != 200 {
		t.Errorf("/report after retryAfter: %d", res.StatusCode)
	}
}

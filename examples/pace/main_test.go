package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/redisbackend/redistest"
)

// newHelloServer is examples/http's /hello: 5 requests per second per API
// key, throttled responses in OpenAI's format.
func newHelloServer(t *testing.T) *httptest.Server {
	t.Helper()
	limits, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "per-caller", "dimensionKeys": ["caller"],
	  "entries": [{"dimensions": {"caller": "*"}, "requests": [{"rate": 5, "period": "second"}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	keys := func(r *http.Request) (sluice.Keys, error) {
		return sluice.NewKeys("caller", r.Header.Get("X-API-Key")), nil
	}
	srv := httptest.NewServer(httplimit.New(limits, keys, httplimit.WithFormat(slerrors.OpenAI))(http.HandlerFunc(
		func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"hello":"world"}`) })))
	t.Cleanup(srv.Close)
	return srv
}

// Real time, 2 s a side: unpaced workers collect 429s by the hundred;
// paced ones get (nearly) all the server allows and almost no 429.
func TestCompare(t *testing.T) {
	srv := newHelloServer(t)
	var out strings.Builder
	runs, err := compare(&out, srv.URL, 8, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	unpaced, paced := runs[0], runs[1]
	if unpaced.Status429 < 50 {
		t.Errorf("unpaced: %d 429s, want the server to throttle a flood", unpaced.Status429)
	}
	if paced.Errors != 0 || paced.Status429*100 > paced.Requests && paced.Status429 > 1 {
		t.Errorf("paced: %d 429s and %d errors in %d requests", paced.Status429, paced.Errors, paced.Requests)
	}
	// The server admits 5 at once and 5 per second after: 15 in 2 s.
	if paced.OK < 12 || paced.OK > 16 {
		t.Errorf("paced: %d served, want about 15", paced.OK)
	}
	if !strings.Contains(out.String(), "throughput/s") {
		t.Errorf("no table printed:\n%s", out.String())
	}
}

// Seed 003 from the client side: one limit shared by six processes
// (in memory, and through Redis) refuses nothing and the server throttles
// nothing; Redis decides exactly as memory does. The six independent
// 25/s limits are printed with the shard model's prediction.
func TestFleet(t *testing.T) {
	srv := redistest.Start(t)
	var out strings.Builder
	runs, err := runFleet(&out, srv.Addr, 30, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if len(runs) != 3 {
		t.Fatalf("%d runs, want 3", len(runs))
	}
	local, mem, red := runs[0], runs[1], runs[2]
	for _, r := range runs {
		if r.Requests < 3800 || r.Requests > 4400 {
			t.Errorf("%s: %d requests in 30 s, want about 4088 (136.28/s)", r.Name, r.Requests)
		}
		if r.Server429 != 0 {
			t.Errorf("%s: the server throttled %d", r.Name, r.Server429)
		}
	}
	if mem.Rejected != 0 || red.Rejected != 0 {
		t.Errorf("shared limits refused %d (memory) and %d (Redis), want 0", mem.Rejected, red.Rejected)
	}
	if mem != (FleetRun{Name: mem.Name, Requests: red.Requests, Rejected: red.Rejected, Server429: red.Server429, OK: red.OK, Seconds: red.Seconds}) {
		t.Errorf("Redis decided differently from memory: %+v vs %+v", red, mem)
	}
	if local.RejectedPerSecond() > 1 {
		t.Errorf("independent 25/s buckets refused %.2f/s", local.RejectedPerSecond())
	}
	for _, want := range []string{"shard model, six 1-s windows of 26, no retry", "4.34", "8.67"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// Without Redis, the in-memory runs still run and print.
func TestFleetWithoutRedis(t *testing.T) {
	var out strings.Builder
	runs, err := runFleet(&out, "", 10, 2)
	if err != nil || len(runs) != 2 {
		t.Fatalf("%d runs, %v", len(runs), err)
	}
	if runs[1].Rejected != 0 || runs[1].Server429 != 0 {
		t.Errorf("shared: %+v", runs[1])
	}
}

package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redis/redistest"
)

// newHelloServer is the upstream the example starts without -url.
func newHelloServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv, err := startUpstream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Without flags the example starts its own upstream and compares.
func TestDefaultRun(t *testing.T) {
	var out, errOut strings.Builder
	if err := run(nil, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	t.Log("\n" + out.String())
	for _, want := range []string{"upstream of its own on http://127.0.0.1:", "throughput/s", "unpaced", "paced"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// An unreachable -url or -redis is one error naming it, before any run.
func TestUnreachable(t *testing.T) {
	addr := closedAddr(t)
	for _, args := range [][]string{
		{"-url", "http://" + addr + "/hello"},
		{"-fleet", "-redis", addr},
	} {
		var out strings.Builder
		err := run(args, &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line naming %s and the cause", args, err, addr)
		}
		if out.Len() != 0 {
			t.Errorf("%q printed a table anyway:\n%s", args, out.String())
		}
	}
}

// Flags out of range are refused, naming the flag.
func TestFlagsOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-seconds", "0"}, "-seconds 0:"},
		{[]string{"-fleet", "-seconds", "-5"}, "-seconds -5:"},
		{[]string{"-workers", "0"}, "-workers 0:"},
		{[]string{"-workers", "100000"}, "-workers 100000:"},
		{[]string{"-duration", "0s"}, "-duration 0s:"},
		{[]string{"-duration", "-1s"}, "-duration -1s:"},
		{[]string{"-redis", "127.0.0.1:6379"}, "-redis is for the fleet"},
		{[]string{"-url", "ftp://x/"}, `-url "ftp://x/"`},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var out strings.Builder
		err := run(tc.args, &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %q", tc.args, err, tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("%q printed:\n%s", tc.args, out.String())
		}
	}
}

// A limiter that fails mid-run makes the run fail: requests refused
// are not reported as a normal row.
func TestLimiterFailuresAreReported(t *testing.T) {
	f := &limiterFailures{}
	l := f.wrap(sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) {
		return sluice.Decision{}, errors.New("backend down")
	}))
	if f.err() != nil {
		t.Fatal("failures before any call")
	}
	for range 3 {
		_, _ = l.Allow(context.Background(), sluice.Keys{})
	}
	if err := f.err(); err == nil || !strings.Contains(err.Error(), "3 times") || !strings.Contains(err.Error(), "backend down") {
		t.Errorf("err() = %v", err)
	}
}

// Real time, 2 s a side: unpaced workers collect 429s by the hundred;
// paced ones get (nearly) all the server allows and almost no 429.
func TestCompare(t *testing.T) {
	srv := newHelloServer(t)
	var out strings.Builder
	runs, err := compare(&out, srv.URL+"/hello", 8, 2*time.Second)
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
	// The retry row is examples/shardmodel's default scenario, and prints
	// its figure; the text says what each row models.
	for _, want := range []string{"shard model, six 1-s windows of 26, 136.28/s, no retry", "4.34",
		"132.645/s + one immediate retry (examples/shardmodel)", "6.8531", "count the retries twice:\n8.67/s", "token bucket"} {
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

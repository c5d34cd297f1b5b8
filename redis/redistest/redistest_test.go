package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// fatalRecorder is a testing.TB whose Fatalf records its message instead of
// ending the test, so that a test can check what Start fails with.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

// A server that exits at once is tried on other ports, and Start then fails
// with what the server said, not with a bare timeout.
func TestStartFailsWithServerOutput(t *testing.T) {
	RequireServer(t)
	rec := &fatalRecorder{TB: t}
	if s := Start(rec, "--no-such-option", "1"); s != nil {
		t.Fatalf("Start with a bad option returned a server on %s", s.Addr)
	}
	for _, want := range []string{"exited", "before answering PING", "no-such-option"} {
		if !strings.Contains(rec.msg, want) {
			t.Errorf("Start failed with %q, want it to say %q", rec.msg, want)
		}
	}
}

// A port for a cluster node leaves its cluster bus port (10000 higher) in
// range and free at the time of the choice.
func TestFreePortClusterBus(t *testing.T) {
	chosen := 0
	for range 20 {
		port, err := freePort(true)
		if err != nil {
			continue // a taken bus port or one out of range: Start tries another
		}
		chosen++
		if port+10000 > 65535 {
			t.Fatalf("port %d: bus port %d out of range", port, port+10000)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			t.Fatalf("port %d: bus port not free just after the choice: %v", port, err)
		}
		l.Close()
	}
	if chosen == 0 {
		t.Fatal("freePort(true) found no port in 20 tries")
	}
}

// utime and stime are read after the command name, whatever it holds.
func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want time.Duration
		ok   bool
	}{
		{"4242 (redis-server) S 1 2 3 0 -1 4194560 1 0 0 0 150 25 0 0 20 0 5 0 1 2 3", 1750 * time.Millisecond, true},
		{"4242 (a) b) (c) R 1 2 3 0 -1 4194560 1 0 0 0 7 3 0 0 20 0 5 0 1 2 3", 100 * time.Millisecond, true},
		{"4242 (redis-server) S 1 2", 0, false},
		{"no parenthesis", 0, false},
		{"4242 (x) S 1 2 3 0 -1 4194560 1 0 0 0 -1 3 0", 0, false},
	} {
		got, ok := parseStatCPU(tc.stat)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseStatCPU(%q) = %v, %v; want %v, %v", tc.stat, got, ok, tc.want, tc.ok)
		}
	}
}

// A server this package started reports its CPU time and its commands.
func TestCPUTimeAndCommandStats(t *testing.T) {
	s := Start(t)
	if s.External {
		t.Skip("an external server's CPU time is not read")
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	ctx := context.Background()
	for range 5 {
		if err := c.Incr(ctx, "k").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := s.CPUTime(); !ok {
		t.Error("CPUTime: not read")
	}
	st, err := CommandStats(ctx, c)
	if err != nil || st["incr"].Calls != 5 {
		t.Errorf("CommandStats: %v, %v; want 5 calls of incr", st, err)
	}
	s.Stop()
	if _, ok := s.CPUTime(); ok {
		t.Error("CPUTime of a stopped server: read")
	}
}

package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/procs"
	"github.com/sluicehq/sluice/internal/redisstat"
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

// A server this package started is the process INFO names, whose CPU time
// and commands the benchmarks read.
func TestServerMeasurable(t *testing.T) {
	s := Start(t)
	if s.External {
		t.Skip("an external server's process is not read")
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	ctx := context.Background()
	for range 5 {
		if err := c.Incr(ctx, "k").Err(); err != nil {
			t.Fatal(err)
		}
	}
	info, err := c.Info(ctx, "server", "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if pid, ok := redisstat.PID(info); !ok || pid != s.cmd.Process.Pid {
		t.Errorf("INFO process_id %d, %v; want %d", pid, ok, s.cmd.Process.Pid)
	} else if _, ok := redisstat.ProcessCPUTime(pid); !ok {
		t.Error("the server's CPU time: not read")
	}
	if st := redisstat.CommandStats(info); st["incr"].Calls != 5 {
		t.Errorf("CommandStats: %v; want 5 calls of incr", st)
	}
}

// VerifyExited names a server still running, with the test that started
// it, and nothing once it is stopped.
func TestVerifyExited(t *testing.T) {
	srv := Start(t)
	err := procs.VerifyExited()
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(srv.cmd.Process.Pid)) || !strings.Contains(err.Error(), t.Name()) {
		t.Fatalf("VerifyExited with a server running: %v", err)
	}
	srv.Stop()
	if err := procs.VerifyExited(); err != nil {
		t.Fatalf("after Stop: %v", err)
	}
}

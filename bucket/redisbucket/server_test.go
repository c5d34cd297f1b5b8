package redisbucket_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is a redis-server started by a test, or the one named by
// SLUICE_REDIS_ADDR (which cannot be killed or restarted).
type server struct {
	addr     string
	port     int
	args     []string
	cmd      *exec.Cmd
	external bool
}

// requireRedisServer returns the path of redis-server, skipping the test
// when there is none (failing it when SLUICE_REQUIRE_REDIS=1, as in CI).
func requireRedisServer(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_REDIS") == "1" {
			t.Fatalf("redis-server not found and SLUICE_REQUIRE_REDIS=1: %v", err)
		}
		t.Skip("redis-server not on PATH (set SLUICE_REDIS_ADDR or install redis-server)")
	}
	return path
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRedis starts a throwaway redis-server on a free 127.0.0.1 port and
// stops it when the test ends. Extra arguments go to redis-server.
func startRedis(t testing.TB, extra ...string) *server {
	t.Helper()
	if addr := os.Getenv("SLUICE_REDIS_ADDR"); addr != "" && len(extra) == 0 {
		return &server{addr: addr, external: true}
	}
	requireRedisServer(t)
	s := &server{port: freePort(t)}
	s.addr = "127.0.0.1:" + strconv.Itoa(s.port)
	s.args = append([]string{"--save", "", "--appendonly", "no", "--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1", "--dir", t.TempDir()}, extra...)
	s.start(t)
	t.Cleanup(s.stop)
	return s
}

func (s *server) start(t testing.TB) {
	t.Helper()
	s.cmd = exec.Command("redis-server", s.args...)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.stop()
			t.Fatalf("redis-server on %s did not answer PING: %v", s.addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop kills the server and waits for it to exit.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// newClient returns a client of addr closed when the test ends, with
// context deadlines honoured (the backend's timeout relies on it), and a
// counter of round trips.
func newClient(t testing.TB, addr string) (*redis.Client, *roundTrips) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	rt := &roundTrips{}
	c.AddHook(rt)
	t.Cleanup(func() { c.Close() })
	return c, rt
}

// roundTrips counts commands and pipelines sent: each is one round trip.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

var prefixes atomic.Int64

// uniquePrefix keeps tests sharing an external server apart.
func uniquePrefix(name string) string {
	return fmt.Sprintf("t%d-%d-%s", os.Getpid(), prefixes.Add(1), name)
}

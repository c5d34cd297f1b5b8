// Package redistest starts throwaway redis-server processes for tests: on a
// free 127.0.0.1 port, without persistence, stopped when the test ends.
//
// When SLUICE_REDIS_ADDR is set, Start returns that server instead (it
// cannot be stopped or restarted). When redis-server is not on PATH, Start
// skips the test, or fails it when SLUICE_REQUIRE_REDIS=1 (as CI sets).
package redistest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server for one test.
type Server struct {
	// Addr is host:port.
	Addr string
	// External is set when Addr came from SLUICE_REDIS_ADDR.
	External bool

	args []string
	cmd  *exec.Cmd
}

// RequireServer returns the path of redis-server, skipping the test when
// there is none (failing it when SLUICE_REQUIRE_REDIS=1).
func RequireServer(t testing.TB) string {
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

// Start starts a redis-server with --save "" --appendonly no on a free
// port of 127.0.0.1 and waits until it answers PING; the test's cleanup
// kills it. Extra arguments go to redis-server (with extra arguments,
// SLUICE_REDIS_ADDR is not used).
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	if addr := os.Getenv("SLUICE_REDIS_ADDR"); addr != "" && len(extra) == 0 {
		return &Server{Addr: addr, External: true}
	}
	RequireServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port)}
	s.args = append([]string{"--save", "", "--appendonly", "no", "--port", strconv.Itoa(port),
		"--bind", "127.0.0.1", "--dir", t.TempDir()}, extra...)
	s.Restart(t)
	t.Cleanup(s.Stop)
	return s
}

// Restart starts the server again on the same port after Stop, and waits
// until it answers PING.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.External {
		t.Fatal("redistest: cannot restart the server of SLUICE_REDIS_ADDR")
	}
	s.cmd = exec.Command("redis-server", s.args...)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
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
			s.Stop()
			t.Fatalf("redis-server on %s did not answer PING: %v", s.Addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL, as a crash) and waits for it to exit.
// It does nothing for an external server or one already stopped.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused server dies too
	}
	s.cmd = nil
}

// Pause stops the server process (SIGSTOP): connections stay open but
// nothing is answered, as with a hung server. Resume continues it.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	if s.cmd == nil || s.cmd.Process == nil {
		t.Fatal("redistest: Pause of a server that is not running")
	}
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	if s.cmd == nil || s.cmd.Process == nil {
		t.Fatal("redistest: Resume of a server that is not running")
	}
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// Package redistest starts throwaway redis-server processes for tests: on a
// free 127.0.0.1 port, without persistence, stopped when the test ends.
// A Server can be stopped, restarted, paused and resumed, so that a test
// sees how the code under test rides out an outage.
//
// When SLUICE_REDIS_ADDR is set, Start returns that server instead (it
// cannot be stopped or restarted). When redis-server is not on PATH, Start
// skips the test, or fails it when SLUICE_REQUIRE_REDIS=1 (as CI sets).
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/procs"
)

// Server is a redis-server for one test.
type Server struct {
	// Addr is host:port.
	Addr string
	// External is set when Addr came from SLUICE_REDIS_ADDR.
	External bool

	args []string
	cmd  *exec.Cmd
	log  string // the server's output, appended to at each start
	test string // the name of the test that started it
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
// SLUICE_REDIS_ADDR is not used). A server that exits at once (its port
// taken between the choice and its bind, or, with --cluster-enabled, its
// cluster bus port, 10000 higher) is started again on another port, up to
// startTries times; the test fails with the server's own output after that.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	if addr := os.Getenv("SLUICE_REDIS_ADDR"); addr != "" && len(extra) == 0 {
		return &Server{Addr: addr, External: true}
	}
	RequireServer(t)
	cluster := slices.Contains(extra, "--cluster-enabled")
	var err error
	for range startTries {
		var port int
		if port, err = freePort(cluster); err != nil {
			continue
		}
		dir := t.TempDir() // each try its own: a cluster node's nodes.conf names its port
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), log: filepath.Join(dir, "redis-server.log"), test: t.Name()}
		s.args = append([]string{"--save", "", "--appendonly", "no", "--port", strconv.Itoa(port),
			"--bind", "127.0.0.1", "--dir", dir}, extra...)
		if err = s.start(); err == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("redistest: %v", err)
	return nil
}

// startTries is how many ports Start tries.
const startTries = 5

// freePort returns a port of 127.0.0.1 that nothing listens on now; with
// cluster, one whose cluster bus port (10000 higher) is free too.
func freePort(cluster bool) (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if cluster {
		if port > 65535-10000 {
			return 0, fmt.Errorf("port %d: its cluster bus port would be over 65535", port)
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			return 0, fmt.Errorf("port %d: its cluster bus port is taken: %w", port, err)
		}
		bus.Close()
	}
	return port, nil
}

// Restart starts the server again on the same port after Stop, and waits
// until it answers PING.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.External {
		t.Fatal("redistest: cannot restart the server of SLUICE_REDIS_ADDR")
	}
	if err := s.start(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

// start runs redis-server with s.args and waits until it answers PING. It
// fails with the server's output when the server exits first, or does not
// answer within 5 seconds.
func (s *Server) start() error {
	// The output goes to a file, not a pipe: Wait would also wait for a
	// child the server forks (a replica's sync) that holds the pipe open.
	log, err := os.OpenFile(s.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	out := func() string {
		b, _ := os.ReadFile(s.log)
		return tail(string(b))
	}
	cmd := exec.Command("redis-server", s.args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	s.cmd = cmd
	procs.Track(cmd.Process.Pid, s.test)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		// Exited already? (No goroutine waits for it: tests check that
		// none is left behind while their servers run.)
		var ws syscall.WaitStatus
		if pid, _ := syscall.Wait4(cmd.Process.Pid, &ws, syscall.WNOHANG, nil); pid == cmd.Process.Pid {
			s.cmd = nil
			procs.Untrack(cmd.Process.Pid)
			_ = cmd.Process.Release() // reaped here, not by Wait
			return fmt.Errorf("redis-server on %s exited (status %d) before answering PING; it said:\n%s", s.Addr, ws.ExitStatus(), out())
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("redis-server on %s did not answer PING: %v; it said:\n%s", s.Addr, err, out())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tail is the end of a server's output, enough to show why it stopped.
func tail(s string) string {
	const most = 2000
	if len(s) > most {
		s = "…" + s[len(s)-most:]
	}
	return s
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
	} else {
		procs.Untrack(s.cmd.Process.Pid) // reaped by Wait
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

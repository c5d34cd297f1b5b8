package redis_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/redis/redistest"
)

// rawConn is a connection speaking RESP by hand, so that a test knows
// exactly what was sent and read, and when.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

func (r *rawConn) send(args ...string) {
	r.t.Helper()
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	if _, err := r.c.Write([]byte(b.String())); err != nil {
		r.t.Fatal(err)
	}
}

// line reads one reply line (a simple reply: +OK, +PONG, :1, $-1).
func (r *rawConn) line() (string, error) {
	s, err := r.r.ReadString('\n')
	return strings.TrimRight(s, "\r\n"), err
}

func (r *rawConn) expect(want string) {
	r.t.Helper()
	if got, err := r.line(); got != want || err != nil {
		r.t.Fatalf("reply %q, %v; want %q", got, err, want)
	}
}

// direct reads key on the server itself, past the proxy.
func direct(t *testing.T, srv *redistest.Server, key string) string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	v, err := c.Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestProxyPassStallDelay(t *testing.T) {
	srv := redistest.Start(t)
	p := faultproxy.NewProxy(t, srv.Addr)
	c := dialRaw(t, p.Addr)
	c.send("PING")
	c.expect("+PONG")

	// faultproxy.Stall: the request does not reach the server until released.
	p.SetMode(faultproxy.Stall)
	c.send("SET", "k", "stalled")
	p.WaitHeld(1)
	if v := direct(t, srv, "k"); v != "<none>" {
		t.Fatalf("a stalled SET reached the server: k = %q", v)
	}
	p.Release()
	c.expect("+OK")
	if v := direct(t, srv, "k"); v != "stalled" {
		t.Fatalf("the released SET: k = %q", v)
	}

	// faultproxy.Delay: the server acts, the reply waits.
	p.SetMode(faultproxy.Delay)
	c.send("SET", "k", "delayed")
	p.WaitHeld(1)
	if v := direct(t, srv, "k"); v != "delayed" {
		t.Fatalf("a delayed SET did not reach the server: k = %q", v)
	}
	if p.Held() != 1 {
		t.Fatalf("held %d, want the one reply", p.Held())
	}
	p.SetMode(faultproxy.Pass)
	c.expect("+OK")
	if p.Held() != 0 {
		t.Fatalf("held %d after the release", p.Held())
	}
}

// A request stalled when its client gives up never reaches the server; a
// reply delayed when its client gives up is lost, its request done.
func TestProxyGivenUpWhileHeld(t *testing.T) {
	srv := redistest.Start(t)
	p := faultproxy.NewProxy(t, srv.Addr)
	p.SetMode(faultproxy.Stall)
	c := dialRaw(t, p.Addr)
	c.send("SET", "s", "x")
	p.WaitHeld(1)
	c.c.Close()
	p.Conn(0).WaitClosed()
	p.Release()
	// A later request on a new connection is answered after it: had the
	// first been forwarded, it would have been first.
	c2 := dialRaw(t, p.Addr)
	c2.send("GET", "s")
	c2.expect("$-1")

	p.SetMode(faultproxy.Delay)
	c3 := dialRaw(t, p.Addr)
	c3.send("SET", "d", "y")
	p.WaitHeld(1)
	c3.c.Close()
	p.Conn(2).WaitClosed()
	p.Release()
	if v := direct(t, srv, "d"); v != "y" {
		t.Fatalf("the delayed SET: d = %q", v)
	}
}

func TestProxyDropAndRefuse(t *testing.T) {
	srv := redistest.Start(t)
	p := faultproxy.NewProxy(t, srv.Addr)
	c := dialRaw(t, p.Addr)
	c.send("PING")
	c.expect("+PONG")
	p.SetMode(faultproxy.Drop)
	if _, err := c.line(); err == nil {
		t.Fatal("a dropped connection still reads")
	}
	// New connections are accepted and closed at once.
	c2 := dialRaw(t, p.Addr)
	if _, err := c2.line(); err == nil {
		t.Fatal("a connection accepted under faultproxy.Drop reads")
	}
	if n := p.Accepted(); n != 2 {
		t.Errorf("accepted %d, want 2", n)
	}

	p.SetMode(faultproxy.Refuse)
	if c, err := net.Dial("tcp", p.Addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dialling a refusing proxy: %v, want connection refused", err)
	}
	p.SetMode(faultproxy.Pass) // listens again on the same address
	c3 := dialRaw(t, p.Addr)
	c3.send("PING")
	c3.expect("+PONG")
}

// One connection's mode apart from the others; a connection that does not
// exist fails the test with a message, at once.
func TestProxyPerConnection(t *testing.T) {
	srv := redistest.Start(t)
	rec := &fatalRecorder{TB: t}
	p := faultproxy.NewProxy(rec, srv.Addr)
	a, b := dialRaw(t, p.Addr), dialRaw(t, p.Addr)
	p.WaitAccepted(2)
	a.send("PING") // the order of acceptance is the order of dialling
	a.expect("+PONG")
	p.Conn(1).SetMode(faultproxy.Stall)
	b.send("SET", "b", "1")
	p.WaitHeld(1)
	a.send("GET", "b")
	a.expect("$-1")
	p.Conn(1).SetMode(faultproxy.Pass)
	b.expect("+OK")
	p.Conn(0).SetMode(faultproxy.Drop)
	if _, err := a.line(); err == nil {
		t.Fatal("connection 0 dropped still reads")
	}
	b.send("PING")
	b.expect("+PONG")
	if rec.msg != "" {
		t.Fatalf("unexpected failure: %s", rec.msg)
	}
	if c := p.Conn(7); c != nil || !strings.Contains(rec.msg, "no connection 7") {
		t.Errorf("Conn(7) of 2: %v, failed with %q", c, rec.msg)
	}
	rec.msg = ""
	p.Conn(0).SetMode(faultproxy.Stall)
	if !strings.Contains(rec.msg, "closed") {
		t.Errorf("SetMode on a closed connection failed with %q", rec.msg)
	}
}

// A target that refuses closes the client's connection; Close is
// idempotent and leaves no goroutine.
func TestProxyDeadTargetAndClose(t *testing.T) {
	base := goleak.IgnoreCurrent()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	p := faultproxy.NewProxy(t, dead)
	c := dialRaw(t, p.Addr)
	if _, err := c.line(); err == nil {
		t.Fatal("a connection to a dead target reads")
	}
	c.c.Close()
	srv := redistest.Start(t)
	q := faultproxy.NewProxy(t, srv.Addr)
	held := dialRaw(t, q.Addr)
	q.SetMode(faultproxy.Stall)
	held.send("PING")
	q.WaitHeld(1)
	for _, x := range []*faultproxy.Proxy{p, q} {
		if err := x.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := x.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}
	held.c.Close()
	goleak.VerifyNone(t, base)
}

// fatalRecorder is a testing.TB whose Fatalf records its message instead of
// ending the test, so that a test can check what a helper fails with.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

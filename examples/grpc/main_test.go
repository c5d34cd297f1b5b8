package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestGRPCExample runs the server as `-addr 127.0.0.1:0` would, reads the
// address it announces, and runs the client mode against it over TCP, as a
// separate process would. The server's clock stands still so that the
// delays are exact.
func TestGRPCExample(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, pw, "127.0.0.1:0", func() time.Time { return at })
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("the server announced nothing: %v (serve: %v)", err, <-served)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	fields := strings.Fields(line) // serving gRPC on 127.0.0.1:PORT (…)
	if len(fields) < 4 || !strings.HasPrefix(fields[3], "127.0.0.1:") {
		t.Fatalf("announcement %q names no address", line)
	}
	addr := fields[3]

	var b strings.Builder
	if err := runClient(context.Background(), &b, addr, "alice", 3); err != nil {
		t.Fatal(err)
	}
	want := `call 1: OK
call 2: OK
call 3: ResourceExhausted "sluice: rate limit exceeded for per-caller/caller=alice (requests), retry after 500ms"
  RetryInfo delay: 500ms
  grpc-retry-pushback-ms: [500]
`
	if got := b.String(); got != want {
		t.Errorf("client output:\n%s\nwant:\n%s", got, want)
	}
	// Another caller has its own bucket.
	b.Reset()
	if err := runClient(context.Background(), &b, addr, "bob", 1); err != nil || b.String() != "call 1: OK\n" {
		t.Errorf("bob: %q, %v", b.String(), err)
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve after its context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
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

// Without flags the example serves on a port of its own, calls itself until
// throttled, waits out the delay on its still clock and is served again.
func TestDefaultRun(t *testing.T) {
	var out strings.Builder
	if err := runArgs(context.Background(), nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []string{
		"call 2: OK\ncall 3: ResourceExhausted \"sluice: rate limit exceeded for per-caller/caller=alice (requests), retry after 500ms\"\n",
		"  RetryInfo delay: 500ms\n  grpc-retry-pushback-ms: [500]\n(the server's clock moves 500ms on)\ncall 4: OK\n",
		"bob has a bucket of his own:\ncall 1: OK\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// A server that is not there is one line naming -addr and the cause,
// before any call.
func TestClientReportsAnUnreachableServer(t *testing.T) {
	addr := closedAddr(t)
	var out strings.Builder
	err := runArgs(context.Background(), []string{"-client", "-addr", addr}, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-addr "+addr) || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %v, want one line naming -addr %s and the cause", err, addr)
	}
	if out.Len() != 0 {
		t.Errorf("printed anyway: %q", out.String())
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
		{[]string{"-client", "-n", "0"}, "-n 0:"},
		{[]string{"-client", "-n", "1001"}, "-n 1001:"},
		{[]string{"-client", "-caller", ""}, "-caller: empty"},
		{[]string{"-n", "2"}, "-n is for the client: add -client"},
		{[]string{"-caller", "bob"}, "-caller is for the client: add -client"},
		{[]string{"-addr", busy.Addr().String()}, "-addr " + busy.Addr().String() + ":"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var out strings.Builder
		err := runArgs(context.Background(), tc.args, &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || out.Len() != 0 {
			t.Errorf("%q: error %v (printed %q), want one naming %q", tc.args, err, out.String(), tc.want)
		}
	}
}

package main

import (
	"bufio"
	"context"
	"io"
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

func TestClientReportsAnUnreachableServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var b strings.Builder
	// Port 1 on loopback: nothing listens there.
	if err := runClient(ctx, &b, "127.0.0.1:1", "alice", 1); err == nil {
		t.Errorf("no error from a client whose server is unreachable; printed %q", b.String())
	}
}

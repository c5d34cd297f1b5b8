package main

import (
	"strings"
	"testing"
	"time"
)

// TestGRPCExample runs the real server on 127.0.0.1 and the client against
// it, on a frozen clock so that the delays are exact.
func TestGRPCExample(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	if err := run(&b, func() time.Time { return at }); err != nil {
		t.Fatal(err)
	}
	want := `call 1: OK
call 2: OK
call 3: ResourceExhausted "sluice: rate limit exceeded for per-caller/caller=alice (requests), retry after 500ms"
  RetryInfo delay: 500ms
  grpc-retry-pushback-ms: [500]
`
	if got := b.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

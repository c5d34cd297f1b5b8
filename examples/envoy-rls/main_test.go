package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestEnvoyRLSExample serves ratelimit.yaml as `-addr 127.0.0.1:0` would,
// reads the address it announces, and asks it what Envoy would ask for the
// README's bootstrap (remote_address; path and remote_address), over TCP
// with go-control-plane's client. The clock stands still.
func TestEnvoyRLSExample(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- run(ctx, pw, options{config: "ratelimit.yaml", addr: "127.0.0.1:0"}, func() time.Time { return at })
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("the server announced nothing: %v (run: %v)", err, <-served)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if !strings.HasPrefix(line, "serving envoy.service.ratelimit.v3 on 127.0.0.1:") || !strings.HasSuffix(line, "deciding in memory, domains [edge]\n") {
		t.Fatalf("announcement %q", line)
	}
	addr := strings.Fields(line)[3]
	addr = strings.TrimSuffix(addr, ",")

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	entry := func(k, v string) *ratelimitv3.RateLimitDescriptor_Entry {
		return &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v}
	}
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("remote_address", "10.0.0.1")}},
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("path", "/login"), entry("remote_address", "10.0.0.1")}},
	}}
	var got []string
	for range 4 {
		resp, err := client.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		s := resp.OverallCode.String()
		for _, h := range resp.ResponseHeadersToAdd {
			s += " | " + h.Key + ": " + h.Value
		}
		if d := resp.DynamicMetadata; d != nil {
			s += " | denied_by " + d.Fields["denied_by"].GetStringValue()
		}
		got = append(got, s)
	}
	want := []string{
		`OK | RateLimit-Policy: "per-client";q=10;w=60, "login-per-client";q=3;w=30 | RateLimit: "per-client";r=9;t=6, "login-per-client";r=2;t=10`,
		`OK | RateLimit-Policy: "per-client";q=10;w=60, "login-per-client";q=3;w=30 | RateLimit: "per-client";r=8;t=12, "login-per-client";r=1;t=20`,
		`OK | RateLimit-Policy: "per-client";q=10;w=60, "login-per-client";q=3;w=30 | RateLimit: "per-client";r=7;t=18, "login-per-client";r=0;t=30`,
		`OVER_LIMIT | RateLimit-Policy: "per-client";q=10;w=60, "login-per-client";q=3;w=30 | RateLimit: "per-client";r=7;t=18, "login-per-client";r=0;t=10 | denied_by login-per-client`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("answers:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("run after its context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}

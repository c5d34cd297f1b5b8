package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/envoyrls"
)

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

// Without flags the example serves its built-in configuration, asks it
// four times and exits: the fourth login is over the limit.
func TestDefaultRun(t *testing.T) {
	var out, errOut strings.Builder
	if err := runArgs(context.Background(), nil, &out, &errOut); err != nil {
		t.Fatalf("runArgs: %v\n%s", err, errOut.String())
	}
	t.Log("\n" + out.String())
	for _, want := range []string{"deciding in memory", "login 1: OK", "login 3: OK", "login 4: OVER_LIMIT", "denied_by login-per-client"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// An unreachable Redis is one line naming it and the cause, before serving.
func TestUnreachableRedis(t *testing.T) {
	addr := closedAddr(t)
	var out strings.Builder
	err := runArgs(context.Background(), []string{"-config", "ratelimit.yaml", "-redis", addr, "-addr", "127.0.0.1:0"}, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-redis "+addr) || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %v, want one line naming %s and the cause", err, addr)
	}
	if out.Len() != 0 {
		t.Errorf("announced anyway: %q", out.String())
	}
}

func TestFlagsOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-config", "ratelimit.yaml", "-reload", "-1s"}, "-reload -1s:"},
		{[]string{"-config", "ratelimit.yaml", "-reload", "1ns"}, "-reload 1ns:"},
		{[]string{"-config", "ratelimit.yaml", "-addr", ""}, "-addr: empty"},
		{[]string{"-config", "ratelimit.yaml", "-addr", "256.0.0.1:99999"}, "-addr 256.0.0.1:99999:"},
		{[]string{"-addr", "127.0.0.1:0"}, "-addr is for serving: add -config"},
		{[]string{"-config", "no-such-file.yaml"}, "no-such-file.yaml"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		err := runArgs(context.Background(), tc.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %q", tc.args, err, tc.want)
		}
	}
}

// The first failure is logged at once, the next ones summarized at most
// once per interval, and the count is flushed at the end.
func TestFailureLogIsBounded(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var lines []string
	f := &failureLog{now: func() time.Time { return at }, every: 10 * time.Second,
		logf: func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }}
	down := errors.New("connection refused")
	for range 100 { // 100 failures in the same instant: one line
		f.report(down)
	}
	at = at.Add(9 * time.Second)
	f.report(down)
	if len(lines) != 1 || lines[0] != "rate limit decision failed: connection refused" {
		t.Fatalf("after 101 failures within 9 s: %q", lines)
	}
	at = at.Add(time.Second)
	f.report(down)
	if len(lines) != 2 || lines[1] != "101 more rate limit decisions failed in 10s, the last: connection refused" {
		t.Fatalf("after 10 s: %q", lines)
	}
	f.report(down)
	f.flush()
	f.flush()
	if len(lines) != 3 || lines[2] != "1 more rate limit decisions failed, the last: connection refused" {
		t.Fatalf("flushed: %q", lines)
	}
	at = at.Add(time.Minute) // after a quiet interval, a failure is logged at once
	f.report(errors.New("again"))
	if len(lines) != 4 || lines[3] != "rate limit decision failed: again" {
		t.Fatalf("after a quiet minute: %q", lines)
	}
}

// A deadline reached while redialling reports the dial's error.
func TestDeadlineCarriesTheDialCause(t *testing.T) {
	var d dialTracker
	deadline := fmt.Errorf("sluice/redis: %w", context.DeadlineExceeded)
	if got := d.cause(deadline); got != deadline {
		t.Errorf("no dial failed yet: %v", got)
	}
	if _, err := d.dial(context.Background(), "tcp", closedAddr(t)); err == nil {
		t.Fatal("dialled a closed port")
	}
	got := d.cause(deadline)
	if !errors.Is(got, context.DeadlineExceeded) || !strings.Contains(got.Error(), "connection refused") {
		t.Errorf("cause = %v, want the deadline and connection refused", got)
	}
	other := errors.New("NOSCRIPT")
	if d.cause(other) != other {
		t.Error("a non-deadline error changed")
	}
}

// An applied reload is logged; an unchanged file is not.
func TestReloadIsLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ratelimit.yaml")
	if err := os.WriteFile(path, builtinConfig, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := envoyrls.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rls := envoyrls.New(cfg)
	wt := envoyrls.NewWatcher(rls, path, nil)
	var b strings.Builder
	logger := log.New(&b, "", 0)
	checkReload(wt, rls, path, logger)
	if b.Len() != 0 {
		t.Fatalf("unchanged file logged %q", b.String())
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(builtinConfig), "domain: edge", "domain: inner", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	checkReload(wt, rls, path, logger)
	if want := "reloaded " + path + ": domains [inner]\n"; b.String() != want {
		t.Errorf("logged %q, want %q", b.String(), want)
	}
}

//go:build unix

package stack_test

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/stack"
)

// A named pipe put where the configuration file was is refused at once:
// opening it would block until some process writes to it, and with it the
// refresh, Run (whatever its context) and every later refresh.
func TestSourceFileReplacedByFIFO(t *testing.T) {
	f := newSourceFixture(t)
	if err := f.src.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(f.path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.src.Run(ctx) }()
	// Run's first refresh fails and is reported; then Run stops with its
	// context.
	select {
	case err := <-f.errs:
		var se *stack.SourceError
		if !errors.As(err, &se) || se.Op != stack.SourceFetch {
			t.Errorf("error handler got %v, want a fetch *SourceError", err)
		}
	case <-time.After(10 * time.Second):
		// Unblock the open so that the goroutine ends.
		if w, err := os.OpenFile(f.path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("the refresh of a FIFO did not return: it blocks in open")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
	if got := rateInForce(t, f.st); got != 5 {
		t.Errorf("rate in force %d, want the last good 5", got)
	}
}

package stack_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
)

// sourceConfig is a configuration with one limit, "per-caller", at rate
// requests per minute for every caller.
func sourceConfig(rate int) []byte {
	return fmt.Appendf(nil, `{"rateLimits": [{"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
  {"dimensions": {"caller": "*"}, "requests": [{"rate": %d, "period": "minute"}]}
]}]}
`, rate)
}

// rateInForce returns the rate of the only entry of the configuration in force.
func rateInForce(t testing.TB, s *stack.Stack) int64 {
	t.Helper()
	cfg := s.Config()
	if len(cfg.RateLimits) != 1 || len(cfg.RateLimits[0].Entries) != 1 {
		t.Fatalf("configuration in force has changed shape: %+v", cfg)
	}
	return cfg.RateLimits[0].Entries[0].Requests[0].Rate
}

type sourceFixture struct {
	path string
	st   *stack.Stack
	src  *stack.Source
	now  *atomic.Pointer[time.Time]
	errs chan error
}

func newSourceFixture(t *testing.T, opts ...stack.SourceOption) *sourceFixture {
	t.Helper()
	f := &sourceFixture{path: filepath.Join(t.TempDir(), "limits.json"), now: new(atomic.Pointer[time.Time]), errs: make(chan error, 100)}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.now.Store(&t0)
	if err := os.WriteFile(f.path, sourceConfig(5), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	f.st, err = stack.Load(data,
		stack.WithClock(sluice.ClockFunc(func() time.Time { return *f.now.Load() })),
		stack.WithErrorHandler(func(err error) {
			select {
			case f.errs <- err:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	f.src = stack.NewFileSource(f.st, f.path, opts...)
	return f
}

func (f *sourceFixture) advance(d time.Duration) {
	t := f.now.Load().Add(d)
	f.now.Store(&t)
}

// refreshFails refreshes, expects a *SourceError with op, checks that it
// reached the error handler and that the configuration did not change.
func (f *sourceFixture) refreshFails(t *testing.T, op string) *stack.SourceError {
	t.Helper()
	before := rateInForce(t, f.st)
	err := f.src.Refresh(context.Background())
	var se *stack.SourceError
	if !errors.As(err, &se) || se.Op != op {
		t.Fatalf("Refresh = %v, want a *SourceError with Op %q", err, op)
	}
	select {
	case got := <-f.errs:
		if got != err {
			t.Errorf("error handler got %v, want the error Refresh returned", got)
		}
	default:
		t.Errorf("error handler was not called")
	}
	if got := rateInForce(t, f.st); got != before {
		t.Fatalf("failed refresh changed the rate in force from %d to %d", before, got)
	}
	return se
}

func TestSourceKeepsLastGoodConfiguration(t *testing.T) {
	f := newSourceFixture(t)
	ctx := context.Background()
	if err := f.src.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if st := f.src.Status(); st.Generation != 1 || st.Errors != 0 || st.LastError != nil || st.Age != 0 {
		t.Fatalf("after the first refresh: %+v", st)
	}

	// Unchanged document: a success, but nothing applied.
	f.advance(10 * time.Second)
	if err := f.src.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if st := f.src.Status(); st.Generation != 1 || st.Age != 0 {
		t.Fatalf("unchanged document: %+v", st)
	}

	// Rewritten in place (os.WriteFile truncates, then writes).
	if err := os.WriteFile(f.path, sourceConfig(7), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.src.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rateInForce(t, f.st); got != 7 {
		t.Fatalf("after an in-place rewrite, rate %d, want 7", got)
	}

	// Replaced by rename.
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, sourceConfig(9), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		t.Fatal(err)
	}
	if err := f.src.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rateInForce(t, f.st); got != 9 {
		t.Fatalf("after a rename, rate %d, want 9", got)
	}
	if st := f.src.Status(); st.Generation != 3 {
		t.Fatalf("generation %d after three applied documents", st.Generation)
	}

	// Truncated to nothing.
	if err := os.Truncate(f.path, 0); err != nil {
		t.Fatal(err)
	}
	f.advance(time.Minute)
	se := f.refreshFails(t, stack.SourceLoad)
	var ce *stack.ConfigError
	if !errors.As(se, &ce) {
		t.Errorf("an empty file: %v, want a *stack.ConfigError", se)
	}

	// Half written: every proper prefix of a valid document.
	full := sourceConfig(11)
	for _, n := range []int{1, len(full) / 3, len(full) / 2, len(full) - 3} {
		if err := os.WriteFile(f.path, full[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		f.refreshFails(t, stack.SourceLoad)
	}

	// Valid JSON, invalid configuration.
	if err := os.WriteFile(f.path, []byte(`{"rateLimits": [{"rateLimitId": "x", "dimensionKeys": []}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f.refreshFails(t, stack.SourceLoad)

	// Unreadable: the file replaced by a directory (chmod does not stop root).
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.path, 0o755); err != nil {
		t.Fatal(err)
	}
	f.refreshFails(t, stack.SourceFetch)

	// Gone.
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	se = f.refreshFails(t, stack.SourceFetch)
	if !errors.Is(se, os.ErrNotExist) {
		t.Errorf("a missing file: %v, want os.ErrNotExist", se)
	}

	st := f.src.Status()
	if st.Errors != 8 || st.Generation != 3 || st.LastError == nil {
		t.Errorf("after 8 failures: %+v", st)
	}
	if st.Age != time.Minute {
		t.Errorf("age %v, want the minute since the last success", st.Age)
	}

	// Enforcement went on at the last good rate (9 per minute) throughout.
	ctx, keys := context.Background(), sluice.NewKeys("caller", "alice")
	for i := range 10 {
		d, err := f.st.Allow(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != (i < 9) || d.Allowed && d.LimitID != "per-caller" {
			t.Fatalf("request %d: %+v, want 9 allowed by per-caller then a denial", i, d)
		}
	}

	// Back: the next good document applies, and clears the error.
	if err := os.WriteFile(f.path, sourceConfig(13), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.src.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if st := f.src.Status(); st.Generation != 4 || st.LastError != nil || st.Age != 0 || st.Errors != 8 {
		t.Errorf("after recovery: %+v", st)
	}
}

func TestSourceOversizedFile(t *testing.T) {
	f := newSourceFixture(t)
	big := make([]byte, stack.MaxConfigBytes+100)
	for i := range big {
		big[i] = ' '
	}
	copy(big, sourceConfig(3))
	if err := os.WriteFile(f.path, big, 0o644); err != nil {
		t.Fatal(err)
	}
	f.refreshFails(t, stack.SourceLoad)
}

func TestSourceFuncErrors(t *testing.T) {
	st, err := stack.Load(sourceConfig(5))
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("config service unavailable")
	var fail atomic.Bool
	src := stack.NewSource(st, func(ctx context.Context) ([]byte, error) {
		if fail.Load() {
			return nil, boom
		}
		return sourceConfig(6), nil
	})
	ctx := context.Background()
	if err := src.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := src.Refresh(ctx); !errors.Is(err, boom) {
		t.Fatalf("Refresh = %v, want %v", err, boom)
	}
	if got := rateInForce(t, st); got != 6 {
		t.Errorf("rate %d after a failed fetch, want 6", got)
	}
	// A context that ends during the fetch is not a failure of the source.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := src.Refresh(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Refresh with an ended context = %v", err)
	}
	if st := src.Status(); st.Errors != 1 {
		t.Errorf("errors %d, want 1", st.Errors)
	}
}

// TestSourceRun drives Run with injected ticks and stops it with its context.
func TestSourceRun(t *testing.T) {
	ticks := make(chan time.Time)
	f := newSourceFixture(t, stack.WithTicks(ticks))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.src.Run(ctx) }()

	// The first tick is received after the initial refresh is done.
	ticks <- time.Time{}
	if st := f.src.Status(); st.Generation != 1 {
		t.Fatalf("Run did not refresh at once: %+v", st)
	}
	if err := os.WriteFile(f.path, sourceConfig(8), 0o644); err != nil {
		t.Fatal(err)
	}
	ticks <- time.Time{} // refresh …
	ticks <- time.Time{} // … done once Run waits again
	if got := rateInForce(t, f.st); got != 8 {
		t.Fatalf("rate %d after a tick, want 8", got)
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
}

// TestSourceRunInterval runs the real ticker briefly: Run stops with its
// context (the interval itself is covered by WithTicks above).
func TestSourceRunInterval(t *testing.T) {
	f := newSourceFixture(t, stack.WithInterval(time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.src.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
}

// TestSourceEnforcementNeverStops rewrites, truncates, half-writes and
// replaces the file while requests flow and the source refreshes as fast as
// it can: every decision must come from a complete configuration (limit
// per-caller applies) and the configuration in force is always one of the
// documents written whole.
func TestSourceEnforcementNeverStops(t *testing.T) {
	f := newSourceFixture(t)
	valid := map[int64]bool{5: true}
	for r := int64(100); r < 110; r++ {
		valid[r] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup

	// Writer: torn writes in small chunks, truncation, rename, directory.
	// After each step it waits for the poller to finish a refresh that
	// started after the step, and for a decision made after it, so that
	// every state is seen by both. (Waiting for refreshes alone let the
	// writer finish all 50 steps before a busy scheduler ran the traffic.)
	var refreshes, decisions atomic.Int64
	polled := func() {
		wantR, wantD := refreshes.Load()+2, decisions.Load()+1
		for (refreshes.Load() < wantR || decisions.Load() < wantD) && ctx.Err() == nil {
			runtime.Gosched()
		}
	}
	wg.Go(func() {
		defer cancel()
		for i := range 50 {
			doc := sourceConfig(100 + i%10)
			switch i % 5 {
			case 0: // in place, in chunks
				w, err := os.OpenFile(f.path, os.O_WRONLY|os.O_TRUNC|os.O_CREATE, 0o644)
				if err != nil {
					t.Error(err)
					return
				}
				for half := len(doc) / 2; len(doc) > 0; {
					n := min(7, len(doc))
					if _, err := w.Write(doc[:n]); err != nil {
						t.Error(err)
					}
					doc = doc[n:]
					if len(doc) <= half {
						polled()
						half = -1
					}
				}
				w.Close()
			case 1: // by rename
				tmp := f.path + ".tmp"
				if err := os.WriteFile(tmp, doc, 0o644); err != nil {
					t.Error(err)
				}
				if err := os.Rename(tmp, f.path); err != nil {
					t.Error(err)
				}
			case 2: // truncated
				if err := os.Truncate(f.path, int64(len(doc)/2)); err != nil {
					t.Error(err)
				}
			case 3: // unreadable: a directory
				os.Remove(f.path)
				if err := os.Mkdir(f.path, 0o755); err != nil {
					t.Error(err)
				}
			case 4: // back
				os.Remove(f.path)
				if err := os.WriteFile(f.path, doc, 0o644); err != nil {
					t.Error(err)
				}
			}
			polled()
		}
	})
	// Poller.
	wg.Go(func() {
		for ctx.Err() == nil {
			_ = f.src.Refresh(ctx)
			refreshes.Add(1)
			if r := rateInForce(t, f.st); !valid[r] {
				t.Errorf("rate %d in force: not a document written whole", r)
			}
		}
	})
	// Traffic. A failure cancels the run: the writer waits on decisions.
	for g := range 2 {
		wg.Go(func() {
			keys := sluice.NewKeys("caller", fmt.Sprint("c", g))
			for ctx.Err() == nil {
				d, err := f.st.Allow(context.Background(), keys)
				if err != nil {
					t.Errorf("Allow: %v", err)
					cancel()
					return
				}
				if d.LimitID != "per-caller" {
					t.Errorf("decision without the configured limit: %+v", d)
					cancel()
					return
				}
				decisions.Add(1)
			}
		})
	}
	wg.Wait()
	if decisions.Load() < 50 {
		t.Fatalf("%d decisions; the writer waits for one after each of its 50 steps", decisions.Load())
	}
	st := f.src.Status()
	if st.Generation < 30 || st.Errors < 30 {
		t.Errorf("a run with good and bad documents: %+v", st)
	}
	t.Logf("%d decisions, %+v", decisions.Load(), st)
}

// NewSource names the nil argument it has no default for, at construction.
func TestNewSourceNilArguments(t *testing.T) {
	st, err := stack.Load([]byte(`{"rateLimits": []}`))
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(context.Context) ([]byte, error) { return nil, nil }
	for want, build := range map[string]func(){
		"nil *Stack":          func() { stack.NewSource(nil, fetch) },
		"nil fetch function":  func() { stack.NewSource(st, nil) },
		"nil *Stack (a file)": func() { stack.NewFileSource(nil, "limits.json") },
	} {
		func() {
			defer func() {
				if msg, _ := recover().(string); !strings.Contains(msg, strings.TrimSuffix(want, " (a file)")) {
					t.Errorf("%s: panic %q, want it to name the %s", want, msg, want)
				}
			}()
			build()
		}()
	}
	if s := stack.NewSource(st, fetch, nil); s == nil {
		t.Error("a nil SourceOption: no Source")
	}
}

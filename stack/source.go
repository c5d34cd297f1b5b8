package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// DefaultRefreshInterval is how often a Source polls unless WithInterval
// says otherwise. A configuration change therefore reaches enforcement
// within 30 s of being written.
const DefaultRefreshInterval = 30 * time.Second

// Source keeps a Stack's configuration in step with a document it fetches
// again and again: a file (NewFileSource) or anything a function can return
// (NewSource).
//
// Each refresh fetches the document and, if it differs from the one last
// applied, parses, validates and reloads it (Stack.ReloadJSON: limits that
// keep their identity keep their state). A fetch that fails, or a document
// that is not a valid configuration, changes nothing: the Stack goes on
// enforcing the last good configuration, the failure is counted (Status) and
// passed, as a *SourceError, to the Stack's error handler (WithErrorHandler).
// Enforcement never stops and never runs without a configuration.
//
// Propagation bound: Run refreshes at once, then every interval
// (DefaultRefreshInterval unless WithInterval), so a change is enforced at
// most one interval after the document is complete (plus the fetch time). A
// document caught half written is rejected and picked up at the next poll.
//
// A Source assumes it owns the configuration: a document it already applied
// is not applied again, even if Stack.Reload was called in between.
//
// Refresh, Run and Status are safe for concurrent use; refreshes are
// serialized. A Source starts no goroutine of its own: Run blocks until its
// context ends.
type Source struct {
	st       *Stack
	fetch    func(context.Context) ([]byte, error)
	interval time.Duration
	ticks    <-chan time.Time

	refreshMu sync.Mutex // serializes refreshes
	applied   []byte     // the document last applied, under refreshMu

	mu          sync.Mutex // guards the status below
	created     time.Time
	generation  uint64
	errs        uint64
	lastSuccess time.Time
	lastErr     error
}

// SourceOption configures a Source (NewSource, NewFileSource). It is a
// type of its own, so that a Stack's Option given to a Source, or the
// other way round, does not compile.
type SourceOption interface{ applySource(*Source) }

type sourceOptionFunc func(*Source)

func (f sourceOptionFunc) applySource(s *Source) { f(s) }

// WithInterval sets how often Run refreshes: the bound on how long a change
// takes to be enforced. d ≤ 0 means the default, DefaultRefreshInterval.
func WithInterval(d time.Duration) SourceOption {
	return sourceOptionFunc(func(s *Source) {
		if d > 0 {
			s.interval = d
		}
	})
}

// WithTicks makes Run refresh on each value received from c instead of on
// its own ticker (the interval is then c's business). Tests drive a Source
// this way without waiting; a program can share one scheduler among several
// sources. If c is closed, Run stops refreshing and waits for its context.
// A nil c means the default: Run's own ticker (WithInterval).
func WithTicks(c <-chan time.Time) SourceOption {
	return sourceOptionFunc(func(s *Source) {
		if c != nil {
			s.ticks = c
		}
	})
}

// NewSource returns a Source that keeps st's configuration in step with the
// gateway JSON document fetch returns (see Parse). fetch is called with the
// context of Refresh or Run and should honour it; it is never called
// concurrently with itself. Nothing is fetched before Refresh or Run. A
// nil Option is ignored. st and fetch have no default: NewSource panics,
// naming the one that is nil (a programming error, found at construction).
func NewSource(st *Stack, fetch func(ctx context.Context) ([]byte, error), opts ...SourceOption) *Source {
	if st == nil {
		panic("stack: NewSource with a nil *Stack")
	}
	if fetch == nil {
		panic("stack: NewSource with a nil fetch function")
	}
	s := &Source{st: st, fetch: fetch, interval: DefaultRefreshInterval, created: st.clockNow()}
	for _, o := range opts {
		if o != nil {
			o.applySource(s)
		}
	}
	return s
}

// NewFileSource returns a Source that reads the file at path. Each refresh
// reads at most MaxConfigBytes+1 bytes (a larger file fails validation
// without being read whole) and fails when path is not a regular file
// (checked before opening it, so a named pipe cannot block a refresh), or
// when the file's size or modification time changed during the read (it is
// being written, and is read again at the next refresh).
//
// A half-written file is never loaded: besides that check, a JSON document
// cut short does not parse. Writing a temporary file and renaming it over
// path is atomic and the recommended way to update the file; rewriting it in
// place works too.
//
// A nil st panics, as with NewSource.
func NewFileSource(st *Stack, path string, opts ...SourceOption) *Source {
	return NewSource(st, readFile(path), opts...)
}

// errFileChanged is returned by readFile's function when the file changed
// while it was being read.
var errFileChanged = errors.New("stack: configuration file changed while being read")

// readFile returns the fetch function of NewFileSource.
func readFile(path string) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Refuse what is not a regular file before opening it: opening a
		// named pipe blocks until a writer comes, whatever ctx says.
		if fi, err := os.Stat(path); err != nil {
			return nil, err
		} else if !fi.Mode().IsRegular() {
			return nil, notRegular(path, fi)
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		before, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if !before.Mode().IsRegular() {
			return nil, notRegular(path, before)
		}
		data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
		if err != nil {
			return nil, err
		}
		after, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) ||
			(int64(len(data)) != after.Size() && len(data) <= MaxConfigBytes) {
			return nil, fmt.Errorf("%w: %s", errFileChanged, path)
		}
		return data, nil
	}
}

func notRegular(path string, fi os.FileInfo) error {
	return fmt.Errorf("stack: configuration %s is not a regular file (%v)", path, fi.Mode().Type())
}

// SourceError is a refresh that failed; the configuration in force did not
// change. It is what a Source passes to the Stack's error handler.
type SourceError struct {
	// Op is SourceFetch when the document could not be fetched, SourceLoad
	// when it was fetched but is not a valid configuration.
	Op string
	// Err is the cause: the fetch error, or the *ConfigError listing
	// every problem of the document.
	Err error
}

// Values of SourceError.Op.
const (
	SourceFetch = "fetch"
	SourceLoad  = "load"
)

func (e *SourceError) Error() string {
	return "stack: configuration refresh (" + e.Op + ") failed, keeping the last good configuration: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *SourceError) Unwrap() error { return e.Err }

// SourceStatus describes a Source at one instant.
type SourceStatus struct {
	// Generation counts the configurations the Source applied (0 until the
	// first refresh that succeeds).
	Generation uint64
	// LastSuccess is when a refresh last fetched a valid configuration,
	// whether it changed or not; zero if none has yet.
	LastSuccess time.Time
	// Age is the time since LastSuccess (since the Source was created if
	// no refresh succeeded yet), on the Stack's clock: how stale the
	// configuration in force may be.
	Age time.Duration
	// Errors counts the failed refreshes.
	Errors uint64
	// LastError is the latest failure (a *SourceError), nil once a refresh
	// succeeds again.
	LastError error
}

// Status returns the Source's counters. It is cheap enough to be read by a
// metrics callback.
func (s *Source) Status() SourceStatus {
	now := s.st.clockNow()
	s.mu.Lock()
	defer s.mu.Unlock()
	since := s.lastSuccess
	if since.IsZero() {
		since = s.created
	}
	return SourceStatus{
		Generation:  s.generation,
		LastSuccess: s.lastSuccess,
		Age:         max(now.Sub(since), 0),
		Errors:      s.errs,
		LastError:   s.lastErr,
	}
}

// Refresh fetches the document once and applies it if it changed. It
// returns the *SourceError it also reports, or the context's error if ctx
// ended during the fetch (not counted as a failure).
func (s *Source) Refresh(ctx context.Context) error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	data, err := s.fetch(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.fail(&SourceError{Op: SourceFetch, Err: err})
	}
	changed := s.applied == nil || !bytes.Equal(data, s.applied)
	if changed {
		if err := s.st.ReloadJSON(data); err != nil {
			return s.fail(&SourceError{Op: SourceLoad, Err: err})
		}
		s.applied = bytes.Clone(data)
	}
	now := s.st.clockNow()
	s.mu.Lock()
	if changed {
		s.generation++
	}
	s.lastSuccess, s.lastErr = now, nil
	s.mu.Unlock()
	return nil
}

func (s *Source) fail(err *SourceError) error {
	s.mu.Lock()
	s.errs++
	s.lastErr = err
	s.mu.Unlock()
	if s.st.onError != nil {
		s.st.onError(err)
	}
	return err
}

// Run refreshes at once, then at every interval (or on every tick, with
// WithTicks), until ctx ends; it then returns ctx's error. Failed refreshes
// do not stop it: they are counted, reported and retried at the next tick.
// Run it in a goroutine you own:
//
//	go src.Run(ctx)
func (s *Source) Run(ctx context.Context) error {
	ticks := s.ticks
	if ticks == nil {
		t := time.NewTicker(s.interval)
		defer t.Stop()
		ticks = t.C
	}
	for {
		_ = s.Refresh(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case _, ok := <-ticks:
			if !ok {
				<-ctx.Done()
				return ctx.Err()
			}
		}
	}
}

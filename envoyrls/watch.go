package envoyrls

import (
	"crypto/sha256"
	"sort"
	"sync"
	"time"
)

// Watcher reloads a Server's configuration from a file or directory when
// its contents change. A bad file never replaces the configuration in force:
// the last good one stays, and the error goes to the error handler. Bucket
// state is kept across reloads (see Server.Reload).
//
// Check does one round synchronously; Start runs Check every interval on a
// goroutine that Close stops and waits for.
type Watcher struct {
	srv     *Server
	path    string
	onError func(error)

	mu      sync.Mutex
	last    [32]byte // digest of the files last seen, good or bad
	pending [32]byte // digest of files refused once as possibly mid-write; zero for none

	stop chan struct{}
	done chan struct{}

	// ticker makes Start's ticks: a real ticker, or the test's channel
	// (export_test.go).
	ticker func(d time.Duration) (ticks <-chan time.Time, stop func())
	// afterCheck, when set (by a test), runs after each of Start's Checks;
	// betweenReads runs between a refused read and the read that confirms it.
	afterCheck, betweenReads func()
}

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// NewWatcher returns a Watcher of path for srv. It starts nothing. It
// reads the files once to remember them, so that the first Check reloads
// only if they change afterwards (srv is assumed to hold their
// configuration). onError, if not nil, is called with every failed reload.
// A nil srv has no default: NewWatcher panics, naming it.
func NewWatcher(srv *Server, path string, onError func(error)) *Watcher {
	if srv == nil {
		panic("envoyrls: NewWatcher with a nil *Server")
	}
	w := &Watcher{srv: srv, path: path, onError: onError, ticker: realTicker}
	if files, err := readPath(path); err == nil {
		w.last = digest(files)
	}
	return w
}

func digest(files map[string][]byte) [32]byte {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	var n [8]byte
	for _, name := range names {
		for _, part := range [][]byte{[]byte(name), files[name]} {
			l := len(part)
			for i := range n {
				n[i] = byte(l >> (8 * i))
			}
			h.Write(n[:])
			h.Write(part)
		}
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// Check reads the files and, if they changed since the last Check, parses
// them and reloads the Server. It reports whether the configuration was
// replaced; err is the reason a change was refused (the configuration in
// force then stays). Unchanged files are not parsed again, so a bad file
// is reported once, not at every Check. Files that do not parse and may be
// caught mid-write (an empty file, or contents that change when read again)
// are refused silently once: the error is reported, and returned, only when
// the next Check reads them unchanged, so a file replaced in place is not
// reported as bad when the next read is good.
func (w *Watcher) Check() (reloaded bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	files, err := readPath(w.path)
	if err != nil {
		w.report(err)
		return false, err
	}
	d := digest(files)
	if d == w.last {
		return false, nil
	}
	cfg, err := Parse(files)
	if err != nil {
		if d != w.pending && w.unsettled(files, d) {
			// Possibly a file read while it was being written (truncated,
			// half-written): refused, but reported only if the next Check
			// reads the same files.
			w.pending = d
			return false, nil
		}
		w.last, w.pending = d, [32]byte{}
		w.report(err)
		return false, err
	}
	w.last, w.pending = d, [32]byte{}
	w.srv.Reload(cfg)
	return true, nil
}

// unsettled reports whether files that did not parse may be caught in the
// middle of a write: one of them is empty (os.WriteFile truncates before it
// writes), or reading them again gives other contents.
func (w *Watcher) unsettled(files map[string][]byte, d [32]byte) bool {
	for _, data := range files {
		if len(data) == 0 {
			return true
		}
	}
	if w.betweenReads != nil {
		w.betweenReads()
	}
	again, err := readPath(w.path)
	return err != nil || digest(again) != d
}

func (w *Watcher) report(err error) {
	if w.onError != nil {
		w.onError(err)
	}
}

// Start runs Check every interval until Close. It must be called at most
// once.
func (w *Watcher) Start(interval time.Duration) {
	stop, done := make(chan struct{}), make(chan struct{})
	w.mu.Lock()
	w.stop, w.done = stop, done
	w.mu.Unlock()
	go func() {
		defer close(done)
		ticks, stopTicks := w.ticker(interval)
		defer stopTicks()
		for {
			select {
			case <-stop:
				return
			case <-ticks:
				_, _ = w.Check()
				if w.afterCheck != nil {
					w.afterCheck()
				}
			}
		}
	}()
}

// Close stops what Start started and waits for it to end. It is safe to
// call without Start, and more than once.
func (w *Watcher) Close() error {
	w.mu.Lock()
	stop, done := w.stop, w.done
	w.stop = nil
	w.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	return nil
}

package redis_test

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// Tests step an injected clock and switch faults at chosen steps; what they
// wait for is an event, never a span of the wall clock. The only real-time
// bound is eventLimit, a generous deadline that fails the test when the
// event does not come (a hang), and on which nothing is asserted.
const eventLimit = 30 * time.Second

// progress is a counter of what background traffic did; a test waits on
// it (await) for the traffic to have done something, instead of sleeping.
type progress struct {
	mu sync.Mutex
	ch chan struct{}
}

// bump wakes the tests waiting on p.
func (p *progress) bump() {
	p.mu.Lock()
	if p.ch != nil {
		close(p.ch)
		p.ch = nil
	}
	p.mu.Unlock()
}

// await waits, through p's bumps, until cond holds, failing the test after
// eventLimit with what.
func (p *progress) await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	limit := time.NewTimer(eventLimit)
	defer limit.Stop()
	for {
		p.mu.Lock()
		if p.ch == nil {
			p.ch = make(chan struct{})
		}
		ch := p.ch
		p.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-limit.C:
			t.Fatalf("not %s: the event did not come (the test waited %v)", what, eventLimit)
		}
	}
}

// eventually asks cond again and again until it holds, failing the test
// after eventLimit: for what a server gives no notification of (a cluster's
// state, a replica's sync, a restarted server). Each cond is a round trip,
// which paces the loop; nothing sleeps.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eventLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s: the event did not come (the test waited %v)", what, eventLimit)
		}
		runtime.Gosched()
	}
}

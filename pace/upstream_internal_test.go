package pace

import (
	"context"
	"testing"
	"time"
)

// blockingClock stands still; its Sleep returns only when ctx is done.
type blockingClock struct{ slept chan struct{} }

func (blockingClock) Now() time.Time { return time.Time{} }
func (c blockingClock) Sleep(ctx context.Context, d time.Duration) error {
	c.slept <- struct{}{}
	<-ctx.Done()
	return ctx.Err()
}

func noJitterNs(time.Duration) time.Duration { return 0 }

// A remaining count higher than the belief raises it: the callers queued
// for a slot move earlier by as much and are woken; a lower one moves them
// later. A count from a request that was not alone in flight lowers the
// belief only when the belief is above it by more than the requests that
// may have been counted twice.
func TestSyncMovesQueuedCallers(t *testing.T) {
	const sec = int64(time.Second)
	const far = 1 << 62
	u := &upstream{interval: sec, burst: 10, learned: true}

	// A request alone in flight: the upstream says none are left.
	u.reserve(0, far, noJitterNs)
	s := u.send()
	u.done()
	u.sync(0, 0, s, true)

	// Another request leaves; then two callers queue, one and two
	// seconds ahead.
	u.reserve(0, far, noJitterNs) // at 1 s: the belief was empty
	other := u.send()
	s1, w1, _ := u.reserve(0, far, noJitterNs)
	s2, w2, _ := u.reserve(0, far, noJitterNs)
	if w1 != 2*sec || w2 != 3*sec {
		t.Fatalf("queued at +%v and +%v, want 2s and 3s", time.Duration(w1), time.Duration(w2))
	}
	clk := blockingClock{slept: make(chan struct{})}
	woken := make(chan error)
	go func() { woken <- u.sleep(context.Background(), clk, time.Duration(w1)) }()
	<-clk.slept

	// Its response says 5 are left: the upstream counted it, and the two
	// queued callers are not counted yet (uncounted 2): 3 are free where
	// the pacer believed it was 3 short, so each queued caller moves 6 s
	// earlier (and may go now).
	u.done()
	wake := u.sync(0, 5, other, true)
	if len(wake) != 1 {
		t.Fatalf("%d callers to wake, want the 1 asleep", len(wake))
	}
	for _, w := range wake {
		w()
	}
	if err := <-woken; err != nil {
		t.Fatalf("the woken sleep returned %v, want nil (the slot moved)", err)
	}
	if e1, e2 := u.extra(s1), u.extra(s2); e1 != -6*sec || e2 != -6*sec {
		t.Fatalf("slots moved by %v and %v, want -6s each", time.Duration(e1), time.Duration(e2))
	}

	// The same count from a request that had 5 others in flight with it
	// cannot tell its peers apart: it does not lower a belief within 5 of
	// it. A count lower by more than that does.
	tat := u.tat
	u.sync(0, 0, sent{mark: u.settled, amb: 5, sends: u.sends}, true)
	if u.tat != tat {
		t.Fatalf("an ambiguous count moved the belief by %v", time.Duration(u.tat-tat))
	}
	u.sync(0, 0, sent{mark: u.settled, amb: 0, sends: u.sends}, true)
	if u.tat <= tat {
		t.Fatal("an exact count of none left did not lower the belief")
	}
	// Under a ceiling (raise false) a higher count changes nothing.
	tat = u.tat
	u.sync(0, 10, sent{mark: u.settled, sends: u.sends}, false)
	if u.tat != tat {
		t.Fatal("a count raised the belief under a ceiling")
	}
}

package pace_test

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/stack/limitertest"
)

// t0 is far enough ahead that a context deadline set on it has not
// passed in real time.
var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// newStepClock returns the repository's test clock at t0: its Sleep
// advances it at once and records the sleep, for tests with one goroutine.
func newStepClock() *limitertest.Clock { return limitertest.NewClock(t0) }

// vsched runs goroutines in virtual time on a limitertest.Clock: the
// goroutines it runs (Go) are active until they sleep; when none is
// active, the clock jumps to the earliest wake-up and releases those
// sleepers. Work done by other goroutines (an HTTP server) happens while
// its caller is active, so in no virtual time.
type vsched struct {
	clock *limitertest.Clock

	mu       sync.Mutex
	changed  *sync.Cond // broadcast when the sleepers change
	active   int
	seq      int
	sleepers sleeperHeap
	wg       sync.WaitGroup
}

type sleeper struct {
	at   time.Time
	seq  int
	ch   chan struct{}
	gone bool
}

type sleeperHeap []*sleeper

func (h sleeperHeap) Len() int { return len(h) }
func (h sleeperHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h sleeperHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *sleeperHeap) Push(x any)   { *h = append(*h, x.(*sleeper)) }
func (h *sleeperHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newVSched() *vsched {
	c := &vsched{clock: limitertest.NewClock(t0)}
	c.changed = sync.NewCond(&c.mu)
	return c
}

// Now reads the clock.
func (c *vsched) Now() time.Time { return c.clock.Now() }

// Go runs f as an active goroutine.
func (c *vsched) Go(f func()) {
	c.mu.Lock()
	c.active++
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			c.active--
			c.advance()
			c.mu.Unlock()
		}()
		f()
	}()
}

func (c *vsched) Wait() { c.wg.Wait() }

// Sleep blocks the calling goroutine (one of Go's) until the clock reaches
// now+d or ctx ends.
func (c *vsched) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	c.mu.Lock()
	c.seq++
	s := &sleeper{at: c.clock.Now().Add(d), seq: c.seq, ch: make(chan struct{})}
	heap.Push(&c.sleepers, s)
	c.active--
	c.advance()
	c.changed.Broadcast()
	c.mu.Unlock()
	select {
	case <-s.ch:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		select {
		case <-s.ch: // woken as the context ended: counted active already
		default:
			s.gone = true
			c.active++
			c.changed.Broadcast()
		}
		return ctx.Err()
	}
}

// advance releases the earliest sleepers when nobody is active; c.mu is
// held.
func (c *vsched) advance() {
	for c.active == 0 && c.sleepers.Len() > 0 {
		s := heap.Pop(&c.sleepers).(*sleeper)
		c.changed.Broadcast()
		if s.gone {
			continue
		}
		if d := s.at.Sub(c.clock.Now()); d > 0 {
			c.clock.Advance(d)
		}
		c.active++
		close(s.ch)
	}
}

// sleeping counts the goroutines asleep; c.mu is held.
func (c *vsched) sleeping() int {
	n := 0
	for _, s := range c.sleepers {
		if !s.gone {
			n++
		}
	}
	return n
}

// AwaitSleeping blocks until exactly n goroutines are asleep: an event
// (each sleep and wake-up signals it), not a poll.
func (c *vsched) AwaitSleeping(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.sleeping() != n {
		c.changed.Wait()
	}
}

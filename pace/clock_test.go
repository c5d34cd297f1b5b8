package pace_test

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// t0 is far enough ahead that a context deadline set on it has not
// passed in real time.
var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// stepClock is a clock whose sleep advances it at once, recording every
// sleep: for tests with one goroutine.
type stepClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newStepClock() *stepClock { return &stepClock{now: t0} }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.sleeps = append(c.sleeps, d)
	c.mu.Unlock()
	return nil
}

func (c *stepClock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// vclock is virtual time for many goroutines: the goroutines it runs (Go)
// are active until they sleep; when none is active, time jumps to the
// earliest wake-up and releases those sleepers. Work done by other
// goroutines (an HTTP server) happens while its caller is active, so in
// no virtual time.
type vclock struct {
	mu       sync.Mutex
	now      time.Time
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

func newVClock() *vclock { return &vclock{now: t0} }

func (c *vclock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Go runs f as an active goroutine.
func (c *vclock) Go(f func()) {
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

func (c *vclock) Wait() { c.wg.Wait() }

func (c *vclock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	c.mu.Lock()
	c.seq++
	s := &sleeper{at: c.now.Add(d), seq: c.seq, ch: make(chan struct{})}
	heap.Push(&c.sleepers, s)
	c.active--
	c.advance()
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
		}
		return ctx.Err()
	}
}

// advance releases the earliest sleepers when nobody is active; c.mu is
// held.
func (c *vclock) advance() {
	for c.active == 0 && c.sleepers.Len() > 0 {
		s := heap.Pop(&c.sleepers).(*sleeper)
		if s.gone {
			continue
		}
		if s.at.After(c.now) {
			c.now = s.at
		}
		c.active++
		close(s.ch)
	}
}

// Sleeping reports how many goroutines are asleep.
func (c *vclock) Sleeping() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.sleepers {
		if !s.gone {
			n++
		}
	}
	return n
}

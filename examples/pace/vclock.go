package main

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// vclock is simulated time for the goroutines it runs (Go): each is active
// until it sleeps, and when none is active, time jumps to the earliest
// wake-up. An HTTP round trip on loopback happens while its caller is
// active, so in no simulated time; a run is deterministic for a seed.
type vclock struct {
	mu       sync.Mutex
	now      time.Time
	active   int
	seq      int
	sleepers sleepers
	wg       sync.WaitGroup
}

type sleeper struct {
	at   time.Time
	seq  int
	ch   chan struct{}
	gone bool
}

type sleepers []*sleeper

func (h sleepers) Len() int { return len(h) }
func (h sleepers) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h sleepers) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *sleepers) Push(x any)   { *h = append(*h, x.(*sleeper)) }
func (h *sleepers) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newVClock(start time.Time) *vclock { return &vclock{now: start} }

// Now returns the simulated time.
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

// Wait waits for every goroutine started by Go.
func (c *vclock) Wait() { c.wg.Wait() }

// Sleep blocks until d has passed in simulated time, or ctx ends.
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
		case <-s.ch:
		default:
			s.gone = true
			c.active++
		}
		return ctx.Err()
	}
}

// advance wakes the earliest sleeper when nobody is active; c.mu is held.
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

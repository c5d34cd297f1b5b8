package lincheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/bucket"
)

// The seeded scheduler over Bucket.WaitN's cancel: a waiter takes its
// tokens from the future (a reservation, kept at the instant they are due)
// and sleeps; while it sleeps other callers take and give back; then it is
// either woken (it keeps its tokens) or cancelled (WaitN gives them back).
// WaitN runs on a goroutine of its own, but the scheduler lets only one
// goroutine run at a time: the bucket's sleep hands control back to the
// scheduler and blocks until the scheduler wakes or cancels it, so a seed
// replays exactly, and a cancel can land after any number of later takes.

// errCancelled is what a cancelled waiter's sleep returns, as a context's
// would.
var errCancelled = errors.New("cancelled by the scheduler")

// waitBucket is a Bucket whose clock the scheduler sets before each call
// and whose sleep parks the waiting goroutine until the scheduler answers.
type waitBucket struct {
	b   *bucket.Bucket
	clk int64 // µs: the instant the next call reads
}

// waiterKey carries a waiter's channels in the context WaitN passes to sleep.
type waiterKey struct{}

type waiterChans struct {
	slept  chan time.Duration // sleep was entered, for this long
	answer chan error         // the scheduler's answer: nil wakes, an error cancels
}

func newWaitBucket(burst int) *waitBucket {
	w := &waitBucket{}
	w.b = bucket.New(testRate, burst, bucket.WithClock(waitClock{w}))
	return w
}

// waitClock is the scheduler's clock: Now reads the waitBucket's instant,
// Sleep hands the wait to the scheduler and returns its answer.
type waitClock struct{ w *waitBucket }

func (c waitClock) Now() time.Time { return at(c.w.clk) }

func (waitClock) Sleep(ctx context.Context, d time.Duration) error {
	ch := ctx.Value(waiterKey{}).(*waiterChans)
	ch.slept <- d
	return <-ch.answer
}

// waitCaller is one logical caller: a waiter (WaitN, then woken or
// cancelled) or a taker (TryTakeGrant at a possibly stale instant, then a
// give-back in full or in parts), by a coin per decision.
type waitCaller struct {
	s     *sched
	w     *waitBucket
	id    int
	burst int
	state int // 0 read the instant, 1 decide, 2 settle
	t     int64
	n     int64
	wait  bool
	ch    *waiterChans
	done  chan error // the waiter's WaitN result
	g     bucket.Grant
	kept  int
}

func (c *waitCaller) step() {
	s := c.s
	switch c.state {
	case 0:
		c.t = s.now
		c.state = 1
		s.tracef("c%d reads %d µs", c.id, c.t)
	case 1:
		c.n = 1 + s.rng.Int64N(int64(c.burst))
		c.state = 0
		if c.wait = s.rng.IntN(2) == 0; !c.wait {
			ok, rem := c.w.b.TryTakeGrant(at(c.t), int(c.n), &c.g)
			s.tracef("c%d takes %d at %d µs: ok=%v, %d left", c.id, c.n, c.t, ok, rem)
			if !ok {
				return
			}
			s.kept = append(s.kept, keptDecision{at: c.t, units: c.n})
			if s.rng.IntN(2) == 0 {
				c.kept, c.state = len(s.kept)-1, 2
			}
			return
		}
		c.ch = &waiterChans{slept: make(chan time.Duration), answer: make(chan error)}
		c.done = make(chan error, 1)
		c.w.clk = c.t
		ctx := context.WithValue(context.Background(), waiterKey{}, c.ch)
		go func() { c.done <- c.w.b.WaitN(ctx, int(c.n)) }()
		select {
		case err := <-c.done: // no wait was needed: a take at the instant read
			s.tracef("c%d waits for %d at %d µs: at once, err=%v", c.id, c.n, c.t, err)
			if err != nil {
				s.errs = append(s.errs, fmt.Sprintf("c%d: WaitN(%d) at %d µs: %v", c.id, c.n, c.t, err))
				return
			}
			s.kept = append(s.kept, keptDecision{at: c.t, units: c.n})
		case d := <-c.ch.slept: // reserved: the tokens are due at t + d
			// The due instant is kept rounded up to a whole µs: a give-back
			// after a later take returns up to a 1 µs quantum of refill
			// less (bucket.highQuantum), which leaves the state, and so
			// later dues, off the µs grid by less than a µs. A token is
			// 1,000 µs here, so the rounding cannot hide an over-admission.
			due := c.t + int64((d+time.Microsecond-1)/time.Microsecond)
			s.tracef("c%d waits for %d at %d µs: due at %d µs", c.id, c.n, c.t, due)
			s.kept = append(s.kept, keptDecision{at: due, units: c.n})
			c.kept, c.state = len(s.kept)-1, 2
		}
	case 2:
		c.state = 0
		if !c.wait {
			n := c.n
			if n > 1 && s.rng.IntN(3) == 0 {
				n = 1 + s.rng.Int64N(n-1)
			}
			if err := c.w.b.GiveBack(&c.g, int(n)); err != nil {
				s.errs = append(s.errs, fmt.Sprintf("c%d gives back %d: %v", c.id, n, err))
			}
			c.n -= n
			s.kept[c.kept].units -= n
			s.tracef("c%d gives back %d (taken at %d µs), %d still held", c.id, n, c.t, c.n)
			if c.n > 0 {
				c.state = 2
			}
			return
		}
		cancel := s.rng.IntN(2) == 0
		if cancel {
			c.ch.answer <- errCancelled
		} else {
			c.ch.answer <- nil
		}
		err := <-c.done
		switch {
		case cancel && !errors.Is(err, errCancelled), !cancel && err != nil:
			s.errs = append(s.errs, fmt.Sprintf("c%d: WaitN returned %v (cancelled: %v)", c.id, err, cancel))
		case cancel:
			s.kept[c.kept].units = 0 // WaitN gave its tokens back
		}
		s.tracef("c%d is %s", c.id, map[bool]string{true: "cancelled: gives back its reservation", false: "woken: keeps it"}[cancel])
	}
}

// finish settles every waiter still parked, so that no goroutine outlives
// the seed.
func (c *waitCaller) finish() {
	if c.wait && c.state == 2 {
		c.ch.answer <- nil
		<-c.done
	}
}

// TestInterleavingsWaitNCancel runs the scheduler over WaitN's cancel with
// takes and give-backs between a reservation and its cancel: no window of
// kept decisions may exceed burst + rate·Δt on any seed.
func TestInterleavingsWaitNCancel(t *testing.T) {
	const callers, steps, burst = 5, 400, 3
	params := targetSpec(1, burst).Params
	for _, seed := range seedsToRun(t, seedsFor(300)) {
		s := newSched(seed, 400)
		w := newWaitBucket(burst)
		var cs []*waitCaller
		var fns []func()
		for i := range callers {
			c := &waitCaller{s: s, w: w, id: i, burst: burst}
			cs, fns = append(cs, c), append(fns, c.step)
		}
		violation := ""
		for range steps / 20 {
			s.run(20, fns)
			if len(s.errs) > 0 {
				violation = s.errs[0]
				break
			}
			if v := windowViolation(s.kept, params); v != "" {
				violation = v
				break
			}
		}
		for _, c := range cs {
			c.finish()
		}
		if _, ok := replaySeed(t); ok {
			t.Logf("seed %d:\n%s", seed, strings.Join(s.trace, "\n"))
		}
		if violation != "" {
			t.Fatalf("seed %d: %s (replay: LINCHECK_SEED=%d); last steps:\n%s", seed, violation, seed, tail(strings.Join(s.trace, "\n"), 30))
		}
	}
}

package pace

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// upstream is the pacing state of one upstream key. Times are nanoseconds
// since the Transport's base instant, on its clock.
//
// Pacing is GCRA in reservation form: a caller takes the next slot at
// tat−burst·interval (or now, if later) and sleeps until it, so callers
// are served in the order they took their slots: first come, first served.
type upstream struct {
	mu sync.Mutex

	interval int64 // ns between requests; 0: no limit known, not paced
	burst    int64
	tat      int64 // theoretical arrival time of the next request
	shift    int64 // total of the pauses imposed so far, for sleeping waiters
	paused   int64 // no request is sent before this instant

	inflight  int64                         // requests sent and not yet answered
	taken     int64                         // slots taken so far
	settled   int64                         // of those, the ones answered or never sent
	sends     int64                         // requests sent so far
	wakers    map[uint64]context.CancelFunc // callers asleep until their slot
	wakeSeq   uint64
	throttled int // throttled responses in a row, for the default backoff
	waiting   int // callers asleep in wait
	lastUsed  int64
	learned   bool          // interval/burst come from the upstream, not only a ceiling
	turn      fifo          // callers ask the shared limiter in turn
	seen      bool          // a response has come back from the upstream
	probe     chan struct{} // closed when the first request in flight answers
	policy    atomic.Pointer[policyCache]

	// Fleet state (WithStore).
	limitAt   int64 // when the quota in force was read, here or by the fleet
	obsLimit  int64 // the quota this process last read from the upstream
	obsWindow time.Duration
	obsAt     int64
	dirty     bool         // obs* has not been written to the store yet
	ownPause  int64        // the latest pause this process imposed (not adopted)
	pubPause  int64        // the latest of those written to the store
	storeKey  string       // the upstream's key in the store; "" until needed
	nextSync  atomic.Int64 // when the store is read next
	nextQuota atomic.Int64 // when a new quota may be written at once next
}

// cold reports whether the caller must wait for the upstream's first
// answer before sending: until a response has come back, one request at a
// time is sent, so that a crowd of callers does not all hit an upstream
// whose limit is not known yet. It returns the channel to wait on, or nil
// when the caller may go (and is then the probe, if the upstream is
// cold).
func (u *upstream) cold() (wait <-chan struct{}, probe bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen || u.interval > 0 {
		return nil, false
	}
	if u.probe != nil {
		return u.probe, false
	}
	u.probe = make(chan struct{})
	return nil, true
}

// answered ends the cold start: a response came back (ok) or the probe
// failed, and the next caller becomes the probe.
func (u *upstream) answered(ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if ok {
		u.seen = true
	}
	if u.probe != nil {
		close(u.probe)
		u.probe = nil
	}
}

// slot is one caller's place in its upstream's queue.
type slot struct {
	at    int64 // when the caller may send
	tat   int64 // the upstream's tat right after this slot was taken
	shift int64 // the upstream's shift when the slot was taken
}

// reserve takes the next slot at now, unless the caller would have to wait
// past deadline (then it takes nothing and reports the wait needed).
// jitter is added to a pause's end for callers of an upstream with no
// known rate, which would otherwise all leave together.
func (u *upstream) reserve(now, deadline int64, jitter func(time.Duration) time.Duration) (s slot, wait int64, ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.lastUsed = now
	if u.interval == 0 {
		at := now
		if u.paused > now {
			at = u.paused + int64(jitter(time.Duration(u.paused-now)))
		}
		if at > deadline {
			return slot{}, at - now, false
		}
		u.taken++
		return slot{at: at, shift: u.shift}, at - now, true
	}
	base := max(u.tat, now)
	newTat := base + u.interval
	at := max(newTat-u.burst*u.interval, now)
	if at > deadline {
		return slot{}, at - now, false
	}
	u.tat = newTat
	u.taken++
	return slot{at: at, tat: newTat, shift: u.shift}, at - now, true
}

// giveBack returns a slot its caller will not use. Only the last slot
// taken can be given back exactly (later callers' slots were computed
// after it); any other stays spent until the upstream's next remaining
// count corrects it, which paces more slowly, never faster.
func (u *upstream) giveBack(s slot) {
	u.mu.Lock()
	if u.interval > 0 && s.tat != 0 && u.tat == s.tat && u.shift == s.shift {
		u.tat -= u.interval
	}
	u.settled++ // the upstream never sees it
	u.mu.Unlock()
}

// sent is what the upstream may have counted of a request's peers when
// it sent its response: see send and sync.
type sent struct {
	mark  int64 // slots settled before the request left
	amb   int64 // other requests in flight when it left
	sends int64 // requests sent until it left, itself included
}

// send marks a request leaving for the upstream. Every request answered
// before it left has been counted by the upstream in the remaining count
// its response states; the ones then in flight may or may not have been.
func (u *upstream) send() sent {
	u.mu.Lock()
	u.sends++
	s := sent{mark: u.settled, amb: u.inflight, sends: u.sends}
	u.inflight++
	u.mu.Unlock()
	return s
}

// forget settles a slot no response will settle: a call that was not sent
// after all, or one named to Wait, whose answer pace does not read.
func (u *upstream) forget() {
	u.mu.Lock()
	u.settled++
	u.mu.Unlock()
}

// done marks a request sent with send as answered.
func (u *upstream) done() {
	u.mu.Lock()
	u.inflight--
	u.settled++
	u.mu.Unlock()
}

// sleep sleeps d on clock, or until the upstream's remaining count shows
// more room than the caller's slot was computed for (then it returns nil
// early, and the caller's slot has moved earlier: see extra).
func (u *upstream) sleep(ctx context.Context, clock interface {
	Sleep(context.Context, time.Duration) error
}, d time.Duration) error {
	sctx, cancel := context.WithCancel(ctx)
	u.mu.Lock()
	if u.wakers == nil {
		u.wakers = make(map[uint64]context.CancelFunc)
	}
	u.wakeSeq++
	id := u.wakeSeq
	u.wakers[id] = cancel
	u.mu.Unlock()
	err := clock.Sleep(sctx, d)
	u.mu.Lock()
	delete(u.wakers, id)
	u.mu.Unlock()
	cancel()
	if err != nil && ctx.Err() == nil {
		return nil // woken: the slot moved earlier
	}
	return err
}

// extra reports how much later than planned the holder of s may send,
// because pauses were imposed after it took its slot.
func (u *upstream) extra(s slot) int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.shift - s.shift
}

// pause stops every caller of the upstream until until: queued callers'
// slots move back by the pause (keeping their order and spacing), and new
// callers queue after it. It reports whether the pause was extended.
func (u *upstream) pause(now, until int64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if until <= now || until <= u.paused {
		return false
	}
	d := until - max(u.paused, now)
	u.paused = until
	if u.interval > 0 {
		if u.tat-u.burst*u.interval > now { // callers are queued: move them all
			u.tat += d
		}
		// The bucket is empty when the pause ends: the first caller goes
		// then and the next ones one interval apart, not all at once.
		u.tat = max(u.tat, until+(u.burst-1)*u.interval)
	}
	u.shift += d
	return true
}

// learn applies a request quota of limit per window read from the
// upstream at now, capped by the ceiling (ceilInterval ≥ the interval,
// ceilBurst ≥ the burst; zero: none), and keeps it for the store.
// It reports whether the pacing changed, and whether the quota differs
// from the one read before.
func (u *upstream) learn(now, limit int64, window time.Duration, ceilInterval, ceilBurst int64) (changed, newQuota bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	newQuota = u.obsLimit != limit || u.obsWindow != window
	u.obsLimit, u.obsWindow, u.obsAt, u.dirty = limit, window, now, true
	u.limitAt = now
	return u.learnLocked(now, limit, window, ceilInterval, ceilBurst), newQuota
}

// adopt applies a quota the fleet read at at, unless the quota in force
// was read later. It reports whether the pacing changed.
func (u *upstream) adopt(now, at, limit int64, window time.Duration, ceilInterval, ceilBurst int64) (changed bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.learned && at <= u.limitAt {
		return false
	}
	u.limitAt = at
	return u.learnLocked(now, limit, window, ceilInterval, ceilBurst)
}

// learnLocked applies a quota; u.mu is held.
func (u *upstream) learnLocked(now, limit int64, window time.Duration, ceilInterval, ceilBurst int64) (changed bool) {
	interval := int64(window) / limit
	if interval <= 0 {
		interval = 1
	}
	burst := limit
	if ceilInterval > 0 {
		interval = max(interval, ceilInterval)
		burst = min(burst, ceilBurst)
	}
	changed = u.interval != interval || u.burst != burst
	u.interval, u.burst, u.learned = interval, burst, true
	if u.paused > now { // a pause in force still holds
		u.tat = max(u.tat, u.paused+(burst-1)*interval)
	}
	return changed
}

// sync applies the remaining count of the response to a request sent as
// s (see send), read at now.
//
// The upstream lowered that count for the request and for every request
// it counted before it; none of those may be subtracted again. What it
// may not have counted is every other slot taken: but for those answered
// before the request left, and those taken since (queued, in flight or
// answered). Subtracting these once gives a bound: the upstream holds at
// least that many (its refill since it counted is ignored). The requests
// in flight at any time while this one was (sent before it and not yet
// answered when it left, or sent before its response came back) may have
// been counted by the upstream too: the bound is short by at most as many,
// amb.
//
// The bound replaces the pacer's belief when the belief is above it by
// more than amb (it cannot be right) and when the bound is higher (the
// upstream has more room than the pacer thought: the belief is raised,
// and every slot taken since a lower count moves earlier). Within amb
// above the bound, the belief stands: it came from an earlier count less
// the slots taken since, and the ambiguous count does not contradict it.
// An exact count (amb 0: the request was alone in flight) therefore sets
// the belief. Nothing raises it
// during a pause, nor under a ceiling (WithLimit; raise false).
//
// Callers queued for a slot move with the belief: later when it is
// lowered, earlier (woken) when it is raised, keeping their order and
// spacing. sync returns the wakers to call once u.mu is released.
func (u *upstream) sync(now, remaining int64, s sent, raise bool) (wake []context.CancelFunc) {
	u.mu.Lock()
	if u.interval == 0 {
		u.mu.Unlock()
		return nil
	}
	uncounted := max(u.taken-1-s.mark, 0)
	avail := min(remaining-uncounted, u.burst)
	bound := now + (u.burst-avail)*u.interval // the tat the bound means
	amb := s.amb + u.sends - s.sends
	old := max(u.tat, now)
	tat := old
	switch {
	case old < bound-amb*u.interval: // the belief is too high
		tat = bound
	case bound < old && raise && u.paused <= now:
		tat = bound
	}
	if tat == old {
		u.mu.Unlock()
		return nil
	}
	queued := u.tat-u.burst*u.interval > now
	u.tat = tat
	if queued {
		u.shift += tat - old
		if tat < old {
			for id, w := range u.wakers {
				wake = append(wake, w)
				delete(u.wakers, id)
			}
		}
	}
	u.mu.Unlock()
	return wake
}

// empty lowers the requests the pacer believes it has left at now to none
// (a throttled response); it never raises them.
func (u *upstream) empty(now int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.interval > 0 {
		u.tat = max(u.tat, now+u.burst*u.interval)
	}
}

// table holds the upstreams by key digest, at most max of them. When it is
// full, the least recently used idle upstream is evicted; when none is
// idle, the request shares the overflow upstream, which paces all such
// requests together (more slowly, never faster).
type table struct {
	mu       sync.RWMutex
	m        map[uint64]*upstream
	max      int
	overflow upstream
	init     func(*upstream)
}

func (t *table) get(key uint64, now int64) *upstream {
	t.mu.RLock()
	u := t.m[key]
	t.mu.RUnlock()
	if u != nil {
		return u
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if u = t.m[key]; u != nil {
		return u
	}
	if len(t.m) >= t.max && !t.evict(now) {
		return &t.overflow
	}
	u = &upstream{lastUsed: now}
	t.init(u)
	t.m[key] = u
	return u
}

// evict drops the least recently used upstream with nobody waiting or in
// flight and no pause in force; t.mu is held.
func (t *table) evict(now int64) bool {
	var (
		victim uint64
		oldest int64
		found  bool
	)
	for k, u := range t.m {
		u.mu.Lock()
		idle := u.waiting == 0 && u.inflight == 0 && u.paused <= now
		last := u.lastUsed
		u.mu.Unlock()
		if idle && (!found || last < oldest) {
			victim, oldest, found = k, last, true
		}
	}
	if found {
		delete(t.m, victim)
	}
	return found
}

func (t *table) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

package pace

import (
	"context"
	"time"
)

// maxSkew is how far in the future a quota read by another process may
// claim to have been read: beyond it, that process's clock is wrong and
// its quota is ignored.
const maxSkew = time.Minute

// syncStore exchanges u's record with the store when its refresh interval
// has passed (the first call for an upstream always does): one caller per
// interval makes the call, the others go on without waiting for it.
//
// It reports whether it called the store (and so whether time passed).
func (t *Transport) syncStore(ctx context.Context, u *upstream, c call, now int64) bool {
	if u == &t.ups.overflow || ctx.Err() != nil {
		return false
	}
	next := u.nextSync.Load()
	if now < next || !u.nextSync.CompareAndSwap(next, now+int64(t.cfg.storeEvery)) {
		return false
	}
	t.exchange(ctx, u, c)
	return true
}

// exchange writes what u learned since the last write (its quota, a pause
// it imposed) and adopts the fleet's record: one call to the store.
func (t *Transport) exchange(ctx context.Context, u *upstream, c call) {
	key := t.storeKeyOf(u, c)
	u.mu.Lock()
	var pub Learned
	wasDirty, prevPub := u.dirty, u.pubPause
	if u.dirty {
		pub.Limit, pub.Window, pub.At = u.obsLimit, u.obsWindow, t.wall(u.obsAt)
		u.dirty = false
	}
	if u.ownPause > u.pubPause {
		pub.PausedUntil = t.wall(u.ownPause)
		u.pubPause = u.ownPause
	}
	published := u.pubPause
	u.mu.Unlock()

	var (
		rec Learned
		err error
	)
	if pub != (Learned{}) {
		rec, err = t.cfg.store.Merge(ctx, key, pub)
	} else {
		rec, err = t.cfg.store.Load(ctx, key)
	}
	if err != nil {
		// Write it again next time: nothing was lost but time.
		u.mu.Lock()
		if wasDirty {
			u.dirty = true
		}
		if u.pubPause == published {
			u.pubPause = prevPub
		}
		u.mu.Unlock()
		// A call cut short by the caller's own context is not the
		// store's failure.
		if t.cfg.hooks.StoreFailed != nil && ctx.Err() == nil {
			t.cfg.hooks.StoreFailed(ctx, err)
		}
		return
	}
	t.adoptRecord(ctx, u, rec, t.nowNs())
}

// paused is called when this process paused u itself, until until: the
// first pause after the last one written ended is written at once, so
// that the fleet stops as soon as one process is throttled; extensions of
// it wait for the next refresh.
func (t *Transport) paused(ctx context.Context, u *upstream, c call, now, until int64) {
	if t.cfg.store == nil || u == &t.ups.overflow {
		return
	}
	u.mu.Lock()
	u.ownPause = max(u.ownPause, until)
	first := u.pubPause <= now
	u.mu.Unlock()
	if first {
		u.nextSync.Store(now + int64(t.cfg.storeEvery))
		t.exchange(ctx, u, c)
	}
}

// newQuota is called when this process read a quota from the upstream
// that differs from the one it read before (the first one, or a change):
// it is written at once, at most once per refresh interval, so that the
// fleet paces by it without waiting for this process's next refresh.
func (t *Transport) newQuota(ctx context.Context, u *upstream, c call, now int64) {
	if u == &t.ups.overflow {
		return
	}
	next := u.nextQuota.Load()
	if now < next || !u.nextQuota.CompareAndSwap(next, now+int64(t.cfg.storeEvery)) {
		return
	}
	u.nextSync.Store(now + int64(t.cfg.storeEvery))
	t.exchange(ctx, u, c)
}

// adoptRecord applies what the fleet knows, ignoring what cannot be
// trusted as bad headers are.
func (t *Transport) adoptRecord(ctx context.Context, u *upstream, rec Learned, now int64) {
	if rec.Limit > 0 && rec.Limit <= maxQuota && rec.Window >= time.Millisecond && rec.Window <= maxHint && !rec.At.IsZero() {
		if at := t.toNs(rec.At); at <= now+int64(maxSkew) {
			if u.adopt(now, at, rec.Limit, rec.Window, t.cfg.ceilInterval, t.cfg.ceilBurst) && t.cfg.hooks.Learned != nil {
				u.mu.Lock()
				burst, interval := u.burst, u.interval
				u.mu.Unlock()
				t.cfg.hooks.Learned(ctx, burst, time.Duration(burst*interval))
			}
		}
	}
	if rec.PausedUntil.IsZero() {
		return
	}
	until := t.toNs(rec.PausedUntil)
	if until <= now || until-now > int64(maxHint) || until <= u.pausedUntil() {
		return // over, absurd, or already in force here
	}
	// Every process adds its own jitter, so that the fleet does not
	// restart all at once; callers of an upstream with no known rate
	// each add theirs when they take their slot.
	if u.paced() {
		until += int64(t.jitter(time.Duration(until - now)))
	}
	u.pause(now, until)
}

// storeKeyOf returns u's key in the store: for an HTTP upstream, the value
// of DefaultKeys' "upstream" dimension (the same in every process), for a
// named one its name. It is computed once per upstream.
func (t *Transport) storeKeyOf(u *upstream, c call) string {
	u.mu.Lock()
	key := u.storeKey
	u.mu.Unlock()
	if key != "" {
		return key
	}
	if c.req == nil {
		key = "name:" + c.name
	} else {
		key = t.upstreamName(c.req)
	}
	u.mu.Lock()
	u.storeKey = key
	u.mu.Unlock()
	return key
}

// wall is the instant ns after the Transport's base, on its clock.
func (t *Transport) wall(ns int64) time.Time { return t.base.Add(time.Duration(ns)) }

// toNs is the inverse of wall, saturating far from the base.
func (t *Transport) toNs(at time.Time) int64 { return int64(at.Sub(t.base)) }

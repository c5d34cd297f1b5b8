package pace

import (
	"context"
	"hash/maphash"
	"time"
)

// Wait waits until a call to the upstream named key may be sent. It is
// for protocols other than HTTP (grpclimit's client interceptors use it):
// the same pacing, maximum wait, order, pauses and shared limiter as
// RoundTrip, with the error RoundTrip would return. A shared limiter is
// asked with the Keys {"upstream": key}. Upstreams named here are apart
// from those of HTTP requests.
func (t *Transport) Wait(ctx context.Context, key string) error {
	now := t.nowNs()
	u := t.ups.get(t.nameKey(key), now)
	if t.cfg.store != nil && t.syncStore(ctx, u, call{name: key}, now) {
		now = t.nowNs()
	}
	waited, err := t.waitSlot(ctx, u, call{name: key}, t.bounds(ctx, now), now)
	if err != nil {
		return err
	}
	u.forget() // no response of a named call is read
	if t.cfg.hooks.Paced != nil {
		t.cfg.hooks.Paced(ctx, waited)
	}
	return nil
}

// Throttled reports that a call to the upstream named key was throttled
// and asked for a delay of d (hasDelay false: it named none, and the
// default pause applies, doubling with each throttled call in a row).
// Every later Wait for key waits until the delay has passed; d is
// ignored when negative or above a day. code is passed to the Throttled
// hook.
func (t *Transport) Throttled(ctx context.Context, key string, d time.Duration, hasDelay bool, code int) {
	if d < 0 || d > maxHint {
		d, hasDelay = 0, false
	}
	now := t.nowNs()
	t.throttle(ctx, t.ups.get(t.nameKey(key), now), call{name: key}, now, d, hasDelay, code)
}

// Succeeded reports that a call to the upstream named key succeeded: the
// default pause starts over from its first length.
func (t *Transport) Succeeded(key string) {
	t.ups.get(t.nameKey(key), t.nowNs()).succeeded()
}

func (t *Transport) nameKey(key string) uint64 {
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.WriteByte(0xfe) // apart from HTTP keys, which start with a scheme
	h.WriteString(key)
	return h.Sum64()
}

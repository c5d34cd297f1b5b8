package httplimit

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/internal/ratefield"

	slerrors "github.com/sluicehq/sluice/errors"
)

// The canonical forms (textproto.CanonicalMIMEHeaderKey) of the RateLimit
// fields: setting them directly spares Header.Set its canonicalization.
const (
	fieldPolicy    = "Ratelimit-Policy"
	fieldRateLimit = "Ratelimit"
)

// fieldPolicies bounds a fieldCache: the responses of policies beyond it
// are rendered each time, by slerrors.SetRateLimitHeaders.
const fieldPolicies = 16

// fieldSlots is the number of rendered RateLimit values a policy keeps,
// indexed by the remaining units modulo fieldSlots: a policy whose Limit is
// below it keeps all of them, a larger one the most recent value of each
// residue.
const fieldSlots = 256

// fieldCache keeps the rendered values of the RateLimit fields of allowed
// responses, so that most responses set shared values instead of rendering
// and allocating their own. A field's value is a function of the policy
// (its name, Limit and Window) and the remaining units alone, since the
// reset time of an allowed response is computed from those
// (slerrors.NewQuota). Its zero value is ready to use; it is safe for
// concurrent use.
//
// The value slices set on a response are shared with every response of the
// same policy and remaining units. They are capped at their one element, so
// that Header.Add copies them, and Header.Set and Header.Del replace them;
// only a handler that wrote into a value slice in place
// (h["Ratelimit"][0] = v) would change other responses' fields.
type fieldCache struct {
	policies [fieldPolicies]atomic.Pointer[policyFields]
}

// policyFields are the rendered fields of one policy.
type policyFields struct {
	name   string
	limit  int64
	window time.Duration
	policy string // the RateLimit-Policy value
	prefix []byte // the start of every RateLimit value: the quoted name and ";r="
	values [fieldSlots]atomic.Pointer[fieldValues]
}

// fieldValues are the values of both fields for one remaining count: vals
// backs the two one-element value slices, and the RateLimit value's bytes
// are in buf when they fit (then the whole is one 80-byte allocation).
type fieldValues struct {
	remaining int64
	vals      [2]string
	buf       [40]byte
}

// set sets the RateLimit-Policy and RateLimit fields of an allowed decision
// of the bucket whose quota is limit (> 0), with remaining units, refilling
// from empty in window, exactly as
// slerrors.SetRateLimitHeaders(h, slerrors.NewQuota(name, limit, remaining, window))
// does.
func (c *fieldCache) set(h http.Header, name string, limit, remaining int64, window time.Duration) {
	// The first policy is looked at here, without a call: a middleware with
	// one limit finds its policy there on every request.
	p := c.policies[0].Load()
	if p == nil || p.name != name || p.limit != limit || p.window != window {
		if p = c.policy(name, limit, window); p == nil {
			slerrors.SetRateLimitHeaders(h, slerrors.NewQuota(name, limit, remaining, window))
			return
		}
	}
	slot := &p.values[uint64(remaining)%fieldSlots]
	v := slot.Load()
	if v == nil || v.remaining != remaining {
		v = p.render(remaining)
		slot.Store(v)
	}
	h[fieldPolicy] = v.vals[0:1:1]
	h[fieldRateLimit] = v.vals[1:2:2]
}

// policy returns the rendered fields of the policy (name, limit, window):
// the ones c has, or new ones in a free slot; nil when c is full and the
// policy is not in it.
func (c *fieldCache) policy(name string, limit int64, window time.Duration) *policyFields {
	for i := range c.policies {
		p := c.policies[i].Load()
		if p == nil {
			q := slerrors.NewQuota(name, limit, 0, window)
			p = &policyFields{name: name, limit: limit, window: window, policy: string(q.AppendPolicy(nil))}
			// The RateLimit value of a Quota with r=0 and t=0 ends in
			// `;r=0;t=0`: what precedes it is the prefix of every value.
			v := slerrors.Quota{Policy: name}.AppendRateLimit(nil)
			p.prefix = v[:len(v)-len("0;t=0")]
			if !c.policies[i].CompareAndSwap(nil, p) {
				p = c.policies[i].Load() // another request filled the slot first
			}
		}
		if p.name == name && p.limit == limit && p.window == window {
			return p
		}
	}
	return nil
}

// sfMaxInt is the largest Structured Field integer (15 decimal digits):
// the RateLimit value's integers are clamped to [0, sfMaxInt].
const sfMaxInt = 999_999_999_999_999

// render returns new values of p's fields for remaining units, as
// slerrors.Quota.AppendRateLimit writes them, from p's prefix.
func (p *policyFields) render(remaining int64) *fieldValues {
	v := &fieldValues{remaining: remaining}
	v.vals[0] = p.policy
	var reset int64 // whole seconds, rounded up
	if d := slerrors.NewQuota(p.name, p.limit, remaining, p.window).Reset; d > 0 {
		reset = ratefield.CeilSeconds(d)
	}
	b := append(v.buf[:0], p.prefix...)
	b = strconv.AppendInt(b, min(max(remaining, 0), sfMaxInt), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, min(reset, sfMaxInt), 10)
	// b is buf, or for a long policy name a new array append made; neither
	// is written again.
	v.vals[1] = unsafe.String(unsafe.SliceData(b), len(b))
	return v
}

package pace

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/internal/monoclock"
)

// ErrMaxWait matches, with errors.Is, the *WaitError of a request that
// would have had to wait longer than the Transport's maximum wait (or past
// its context's deadline).
var ErrMaxWait = errors.New("pace: the upstream's rate limit needs a longer wait than allowed")

// WaitError is returned by RoundTrip, before anything is sent, when the
// wait for the upstream would pass the maximum wait or the context's
// deadline. It matches ErrMaxWait and errors.ErrThrottled of
// github.com/sluicehq/sluice/errors, and, when the context's deadline was
// the bound, context.DeadlineExceeded.
type WaitError struct {
	// Host is the upstream's scheme and host.
	Host string
	// Wait is how much longer the request would have had to wait, when
	// known (zero when a limiter said the request can never pass).
	Wait time.Duration
	// MaxWait is the bound that was in force for this request.
	MaxWait time.Duration
	// Cause is context.DeadlineExceeded when the context's deadline was
	// the bound, or the *errors.ThrottledError of a limiter that denied
	// permanently; nil otherwise.
	Cause error
}

// Error describes the wait.
func (e *WaitError) Error() string {
	s := "pace: " + e.Host + ": rate limit needs a wait of " + e.Wait.String() + ", longer than the allowed " + e.MaxWait.String()
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Is reports whether target is ErrMaxWait or errors.ErrThrottled.
func (e *WaitError) Is(target error) bool {
	return target == ErrMaxWait || target == slerrors.ErrThrottled
}

// Unwrap returns Cause.
func (e *WaitError) Unwrap() error { return e.Cause }

// Transport is an http.RoundTripper that paces the requests it sends to
// each upstream so as to stay under the upstream's rate limit, which it
// learns from the responses' rate-limit headers (see the package
// documentation) and from throttled responses
// (429, 503 with Retry-After, AWS throttling errors). A throttled response
// pauses every request to that upstream until the delay it asked for has
// passed.
//
// Requests to one upstream are sent first come, first served. A request
// that would have to wait longer than the maximum wait, or past its
// context's deadline, fails at once with a *WaitError, and a request
// whose context ends while it waits fails with the context's error; in
// both cases nothing is sent.
//
// Transport never modifies the caller's request; a retried request is a
// clone with a fresh body. It is safe for concurrent use and starts no
// goroutine.
type Transport struct {
	next   http.RoundTripper
	cfg    config
	clock  sluice.Clock
	base   time.Time
	baseNs int64 // base in Unix nanoseconds, for the default clock
	seed   maphash.Seed
	sys    bool // the clock is the default, internal/monoclock
	ups    table
}

// New returns a Transport that sends through next (http.DefaultTransport
// when nil).
func New(next http.RoundTripper, opts ...Option) *Transport {
	if next == nil {
		next = http.DefaultTransport
	}
	t := &Transport{next: next, cfg: defaultConfig()}
	for _, o := range opts {
		if o != nil {
			o.apply(&t.cfg)
		}
	}
	t.clock, t.sys = t.cfg.clock, t.cfg.clock == nil
	if t.sys {
		t.clock = monoclock.Clock{}
		t.baseNs = monoclock.Nanos()
		t.base = time.Unix(0, t.baseNs)
	} else {
		t.base = t.clock.Now()
	}
	if t.cfg.keys == nil {
		t.cfg.keys = func(r *http.Request) (sluice.Keys, error) { return t.DefaultKeys(r), nil }
	}
	t.seed = maphash.MakeSeed()
	t.ups = table{m: make(map[uint64]*upstream), max: t.cfg.maxKeys, init: t.initUpstream}
	t.initUpstream(&t.ups.overflow)
	return t
}

func (t *Transport) initUpstream(u *upstream) {
	if t.cfg.ceilInterval > 0 {
		u.interval, u.burst = t.cfg.ceilInterval, t.cfg.ceilBurst
	}
}

// nowNs reads the clock: with the default clock, the monotonic clock only
// (one read, and immune to wall-clock steps).
func (t *Transport) nowNs() int64 {
	if t.sys {
		return monoclock.Nanos() - t.baseNs
	}
	return int64(t.clock.Now().Sub(t.base))
}

// FNV-1a, 64 bits: the same key digests in every process, so that a fleet
// names an upstream alike.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// fnvSep ends a field, so that ("ab","c") and ("a","bc") differ.
func fnvSep(h uint64) uint64 { h ^= 0xff; return h * fnvPrime }

// digest is the fleet-wide digest of a request's key: FNV-1a, the same in
// every process.
func (t *Transport) digest(r *http.Request) uint64 {
	h := uint64(fnvOffset)
	if t.cfg.upstream != nil {
		return fnvString(h, t.cfg.upstream(r))
	}
	h = fnvSep(fnvString(h, r.URL.Scheme))
	h = fnvSep(fnvString(h, r.URL.Host))
	for _, name := range t.cfg.credHeaders {
		for _, v := range r.Header[name] {
			h = fnvSep(fnvString(h, v))
		}
		h = fnvSep(h)
	}
	return h
}

// key is the local digest of a request's key, seeded per Transport so
// that nobody can choose keys that collide.
func (t *Transport) key(r *http.Request) uint64 {
	var h maphash.Hash
	h.SetSeed(t.seed)
	if t.cfg.upstream != nil {
		h.WriteString(t.cfg.upstream(r))
		return h.Sum64()
	}
	h.WriteString(r.URL.Scheme)
	h.WriteByte(0)
	h.WriteString(r.URL.Host)
	for _, name := range t.cfg.credHeaders {
		h.WriteByte(0)
		for _, v := range r.Header[name] {
			h.WriteString(v)
			h.WriteByte(0)
		}
	}
	return h.Sum64()
}

// DefaultKeys returns the Keys a limiter is asked with by default: one
// dimension, "upstream", holding the URL's scheme and host and, after a
// '#', the hex digest of the upstream's name (WithUpstream, or the credential
// headers).
func (t *Transport) DefaultKeys(r *http.Request) sluice.Keys {
	return sluice.NewKeys("upstream", t.upstreamName(r))
}

// upstreamName is the fleet-wide name of a request's upstream: scheme,
// host, '#' and the hex digest of its key.
func (t *Transport) upstreamName(r *http.Request) string {
	v := make([]byte, 0, len(r.URL.Scheme)+len(r.URL.Host)+20)
	v = append(v, r.URL.Scheme...)
	v = append(v, "://"...)
	v = append(v, r.URL.Host...)
	v = append(v, '#')
	v = strconv.AppendUint(v, t.digest(r), 16)
	return string(v)
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	now := t.nowNs()
	u := t.ups.get(t.key(req), now)
	if t.cfg.store != nil && t.syncStore(ctx, u, call{req: req}, now) {
		now = t.nowNs() // the store's round trip took time
	}
	bound := t.bounds(ctx, now)

	var (
		res      sluice.Reservation
		estimate int
	)
	send := req
	for attempt := 0; ; attempt++ {
		waited, probe, err := t.wait(ctx, u, call{req: req}, bound, now)
		now = -1 // a later attempt reads the clock
		if err == nil && attempt == 0 && t.cfg.tokens != nil {
			res, estimate, err = t.reserveTokens(ctx, call{req: req}, bound)
			if err != nil {
				u.forget() // the slot taken is not used
			}
		}
		if err != nil {
			if probe { // the upstream is still cold: let the next caller probe
				u.answered(false)
			}
			res.Cancel()
			closeBody(send)
			return nil, err
		}
		if t.cfg.hooks.Paced != nil {
			t.cfg.hooks.Paced(ctx, waited)
		}
		sent := u.send()
		resp, err := t.next.RoundTrip(send)
		u.done()
		if err != nil {
			u.answered(false)
			res.Cancel()
			return nil, err
		}
		throttled := t.learn(ctx, u, call{req: req}, resp, sent)
		u.answered(true)
		// Retry only when the pause ends within the bound: otherwise the
		// caller is better served by the throttled response than by a
		// *WaitError after its body was thrown away.
		if throttled && attempt < t.cfg.retries && u.pausedUntil() <= bound.deadline {
			if next, ok := replay(req); ok {
				discard(resp.Body)
				send = next
				continue
			}
		}
		if res.Held() {
			if resp.StatusCode < 200 || resp.StatusCode > 299 {
				res.Cancel()
			} else {
				resp.Body = newUsageBody(resp.Body, res, estimate)
			}
		}
		return resp, nil
	}
}

// call is what pacing needs of one call: an HTTP request, or the name of
// a non-HTTP upstream (Wait).
type call struct {
	req  *http.Request
	name string
}

func (c call) host() string {
	if c.req == nil {
		return c.name
	}
	return c.req.URL.Scheme + "://" + c.req.URL.Host
}

func (c call) keys(t *Transport) (sluice.Keys, error) {
	if c.req == nil {
		return sluice.NewKeys("upstream", c.name), nil
	}
	k, err := t.cfg.keys(c.req)
	if err != nil {
		err = fmt.Errorf("pace: resolving rate-limit keys: %w", err)
		t.observe(err)
	}
	return k, err
}

// observe hands err to the error handler, if any.
func (t *Transport) observe(err error) {
	if t.cfg.onError != nil {
		t.cfg.onError(err)
	}
}

// CloseIdleConnections closes the idle connections of the wrapped
// RoundTripper, if it has that method, so that http.Client's method of
// the same name reaches it.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// bounds is how long one RoundTrip may wait, on the Transport's clock.
type bounds struct {
	deadline int64
	start    int64
	maxWait  time.Duration
	ctxBound bool
}

// bounds returns how long a call starting at now may wait.
func (t *Transport) bounds(ctx context.Context, now int64) bounds {
	maxWait := t.cfg.maxWait
	deadline := now + int64(maxWait)
	var ctxBound bool
	if dl, ok := ctx.Deadline(); ok {
		if d := int64(dl.Sub(t.base)); d < deadline {
			deadline, ctxBound = d, true
		}
	}
	return bounds{deadline: deadline, ctxBound: ctxBound, maxWait: maxWait, start: now}
}

func (t *Transport) waitError(c call, b bounds, wait int64, cause error) *WaitError {
	if cause == nil && b.ctxBound {
		cause = context.DeadlineExceeded
	}
	return &WaitError{Host: c.host(), Wait: time.Duration(wait), MaxWait: b.maxWait, Cause: cause}
}

// wait takes the request's slot with its upstream, and with the shared
// limiter if there is one, and sleeps until they are due.
//
// It reports whether the caller is the probe of a cold upstream: the one
// request sent before anything is known about it.
func (t *Transport) wait(ctx context.Context, u *upstream, c call, b bounds, now int64) (waited time.Duration, probe bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	for {
		var ch <-chan struct{}
		if ch, probe = u.cold(); ch == nil {
			break
		}
		if err := t.awaitProbe(ctx, ch, c, b); err != nil {
			return 0, false, err
		}
		now = -1
	}
	waited, err = t.waitSlot(ctx, u, c, b, now)
	return waited, probe, err
}

func (t *Transport) waitSlot(ctx context.Context, u *upstream, c call, b bounds, now int64) (time.Duration, error) {
	if now < 0 {
		now = t.nowNs()
	}
	s, wait, ok := u.reserve(now, b.deadline, t.jitter)
	if !ok {
		return 0, t.waitError(c, b, wait, nil)
	}
	if wait > 0 {
		u.mu.Lock()
		u.waiting++
		u.mu.Unlock()
		err := t.sleepSlot(ctx, u, s, now+wait, b, c)
		u.mu.Lock()
		u.waiting--
		u.mu.Unlock()
		if err != nil {
			u.giveBack(s)
			return 0, err
		}
	}
	if t.cfg.limiter != nil {
		if err := t.waitLimiter(ctx, u, c, b); err != nil {
			u.forget()
			return 0, err
		}
	} else if wait == 0 {
		return time.Duration(now - b.start), nil
	}
	return time.Duration(t.nowNs() - b.start), nil
}

// awaitProbe waits for the first request to a cold upstream to answer, at
// most until the request's deadline.
func (t *Transport) awaitProbe(ctx context.Context, ch <-chan struct{}, c call, b bounds) error {
	left := time.Duration(b.deadline - t.nowNs())
	if left <= 0 {
		return t.waitError(c, b, 0, nil)
	}
	timer := time.NewTimer(left)
	defer timer.Stop()
	if t.cfg.probeWait != nil {
		t.cfg.probeWait()
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return t.waitError(c, b, 0, nil)
	}
}

// sleepSlot sleeps until at, and then for as long as pauses imposed since
// the slot was taken have moved it.
func (t *Transport) sleepSlot(ctx context.Context, u *upstream, s slot, at int64, b bounds, c call) error {
	for {
		// A pause or a lower remaining count moves the slot later; a
		// higher one moves it earlier, and wakes the caller.
		if extra := u.extra(s); extra != 0 {
			s.shift += extra
			at += extra
		}
		if at > b.deadline {
			return t.waitError(c, b, at-t.nowNs(), nil)
		}
		d := at - t.nowNs()
		if d <= 0 {
			return nil
		}
		if err := u.sleep(ctx, t.clock, time.Duration(d)); err != nil {
			return err
		}
	}
}

func (t *Transport) jitter(d time.Duration) time.Duration {
	return min(max(t.cfg.jitter(d), 0), d)
}

// waitLimiter asks the shared limiter until it allows the request. The
// callers of one upstream ask in turn, first come first served.
func (t *Transport) waitLimiter(ctx context.Context, u *upstream, c call, b bounds) error {
	if err := u.turn.lock(ctx); err != nil {
		return err
	}
	defer u.turn.unlock()
	keys, err := c.keys(t)
	if err != nil {
		return err
	}
	for {
		d, err := t.cfg.limiter.Allow(ctx, keys)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			err = fmt.Errorf("pace: rate limiter failed: %w", err)
			t.observe(err)
			return err // cannot decide: refuse
		}
		if d.Allowed {
			return nil
		}
		if d.Permanent {
			return t.waitError(c, b, 0, d.Err())
		}
		if err := t.sleepBounded(ctx, c, b, d.RetryAfter); err != nil {
			return err
		}
	}
}

// sleepBounded sleeps d (at least a millisecond, so that a limiter that
// keeps saying "now" cannot spin) unless that passes the deadline.
func (t *Transport) sleepBounded(ctx context.Context, c call, b bounds, d time.Duration) error {
	d = max(d, time.Millisecond)
	now := t.nowNs()
	if now+int64(d) > b.deadline {
		return t.waitError(c, b, int64(d), nil)
	}
	return t.clock.Sleep(ctx, d)
}

func (t *Transport) reserveTokens(ctx context.Context, c call, b bounds) (sluice.Reservation, int, error) {
	est := 0
	if t.cfg.estimate != nil {
		est = max(t.cfg.estimate(c.req), 0)
	}
	keys, err := c.keys(t)
	if err != nil {
		return sluice.NoReservation, 0, err
	}
	for {
		res, d, err := t.cfg.tokens.Reserve(ctx, keys, est)
		if err != nil {
			if ctx.Err() != nil {
				return sluice.NoReservation, 0, ctx.Err()
			}
			err = fmt.Errorf("pace: rate limiter failed: %w", err)
			t.observe(err)
			return sluice.NoReservation, 0, err // cannot decide: refuse
		}
		if d.Allowed {
			return res, est, nil
		}
		if d.Permanent {
			return sluice.NoReservation, 0, t.waitError(c, b, 0, d.Err())
		}
		if err := t.sleepBounded(ctx, c, b, d.RetryAfter); err != nil {
			return sluice.NoReservation, 0, err
		}
	}
}

// learn reads what resp says about the upstream and reports whether resp
// is a throttled response.
func (t *Transport) learn(ctx context.Context, u *upstream, c call, resp *http.Response, s sent) bool {
	nowNs := t.nowNs()
	o := observe(resp.Header, t.base.Add(time.Duration(nowNs)), &u.policy)
	if o.Limit > 0 {
		changed, newQuota := u.learn(nowNs, o.Limit, o.Window, t.cfg.ceilInterval, t.cfg.ceilBurst)
		if changed && t.cfg.hooks.Learned != nil {
			u.mu.Lock()
			burst, interval := u.burst, u.interval
			u.mu.Unlock()
			t.cfg.hooks.Learned(ctx, burst, time.Duration(burst*interval))
		}
		if newQuota && t.cfg.store != nil {
			t.newQuota(ctx, u, c, nowNs)
		}
	}
	throttled := isThrottled(resp, &o)
	if throttled {
		d, hasDelay := o.RetryAfter, o.HasRetryAfter
		if !hasDelay && o.HasRemaining && o.Remaining == 0 && o.Reset > 0 {
			d, hasDelay = o.Reset, true
		}
		t.throttle(ctx, u, c, nowNs, d, hasDelay, resp.StatusCode)
		return true
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 399 {
		u.succeeded()
	}
	if o.HasRemaining {
		for _, wake := range u.sync(nowNs, o.Remaining, s, t.cfg.ceilInterval == 0) {
			wake()
		}
		if o.Remaining == 0 && o.Reset > 0 && (o.FixedWindow || !u.paced()) {
			if until := nowNs + int64(o.Reset); u.pause(nowNs, until) {
				t.paused(ctx, u, c, nowNs, until)
			}
		}
	}
	if o.HasTokensRemaining && o.TokensRemaining == 0 && o.TokensReset > 0 {
		if until := nowNs + int64(o.TokensReset); u.pause(nowNs, until) {
			t.paused(ctx, u, c, nowNs, until)
		}
	}
	return false
}

// throttle pauses u after a throttled call: for d when hasDelay, else for
// the default pause, doubled for each throttled call in a row.
func (t *Transport) throttle(ctx context.Context, u *upstream, c call, nowNs int64, d time.Duration, hasDelay bool, status int) {
	if t.cfg.hooks.Throttled != nil {
		t.cfg.hooks.Throttled(ctx, status)
	}
	u.empty(nowNs)
	if !hasDelay {
		d = t.backoff(u)
	}
	u.mu.Lock()
	u.throttled++
	u.mu.Unlock()
	// Callers of an upstream with a known rate leave the pause one
	// interval apart, after one jitter that keeps processes sharing the
	// upstream from all starting together; callers of one with no known
	// rate each add their own jitter when they take their slot.
	if u.paced() {
		d += t.jitter(d)
	}
	if until := nowNs + int64(d); u.pause(nowNs, until) {
		t.paused(ctx, u, c, nowNs, until)
	}
}

// backoff is the pause after a throttled response that named no delay:
// the default pause doubled for each throttled response in a row.
func (t *Transport) backoff(u *upstream) time.Duration {
	u.mu.Lock()
	n := u.throttled
	u.mu.Unlock()
	d := t.cfg.defaultPause
	for i := 0; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

func (u *upstream) pausedUntil() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.paused
}

func (u *upstream) succeeded() {
	u.mu.Lock()
	u.throttled = 0
	u.mu.Unlock()
}

func (u *upstream) paced() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.interval > 0
}

// replay returns a clone of req with a fresh body, or false when its body
// cannot be replayed.
func replay(req *http.Request) (*http.Request, bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return req.Clone(req.Context()), true
	}
	if req.GetBody == nil {
		return nil, false
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, false
	}
	r := req.Clone(req.Context())
	r.Body = body
	return r, true
}

func closeBody(r *http.Request) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
}

// discard reads a little of a body that is being replaced, so that its
// connection can be reused, and closes it.
func discard(rc io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, rc, 4<<10)
	_ = rc.Close()
}

// fifo is a lock granted in the order it was asked for. It allocates only
// when callers have to queue.
type fifo struct {
	mu    sync.Mutex
	held  bool
	queue []chan struct{}
}

func (f *fifo) lock(ctx context.Context) error {
	f.mu.Lock()
	if !f.held {
		f.held = true
		f.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	f.queue = append(f.queue, ch)
	f.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		for i, c := range f.queue {
			if c == ch {
				f.queue = append(f.queue[:i], f.queue[i+1:]...)
				f.mu.Unlock()
				return ctx.Err()
			}
		}
		f.mu.Unlock()
		// The lock was handed over as the context ended: pass it on.
		f.unlock()
		return ctx.Err()
	}
}

func (f *fifo) unlock() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queue) == 0 {
		f.held = false
		return
	}
	ch := f.queue[0]
	f.queue = f.queue[1:]
	close(ch)
}

package pace

import (
	"context"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
)

// Option configures New. Options are applied in order.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	clock   sluice.Clock
	jitter  func(d time.Duration) time.Duration
	maxWait time.Duration
	maxKeys int

	upstream    UpstreamFunc
	credHeaders []string

	ceilInterval, ceilBurst int64 // the user's ceiling; zero: none

	retries      int
	defaultPause time.Duration

	limiter  sluice.Limiter
	keys     httplimit.KeyFunc
	tokens   sluice.Reserver
	estimate func(*http.Request) int

	store      Store
	storeEvery time.Duration

	hooks   Hooks
	onError func(error)

	// probeWait, if not nil, is called by a caller about to wait for a
	// cold upstream's probe to answer: tests use it as the event that the
	// caller is held back (export_test.go).
	probeWait func()
}

// Defaults of the options (the docs of the options state them).
const (
	defaultMaxWait      = 30 * time.Second
	defaultMaxUpstreams = 1024
	defaultPauseLen     = time.Second
	// defaultStoreRefresh is how often a Transport reads the Store of
	// WithStore for each upstream it calls.
	defaultStoreRefresh = time.Second
	// maxBackoff caps the pause after throttled responses that gave no
	// delay, as the AWS SDKs cap theirs.
	maxBackoff = 20 * time.Second
)

func defaultConfig() config {
	return config{
		jitter:       defaultJitter,
		maxWait:      defaultMaxWait,
		maxKeys:      defaultMaxUpstreams,
		credHeaders:  []string{"Authorization", "X-Api-Key", "Api-Key"},
		defaultPause: defaultPauseLen,
	}
}

// defaultJitter spreads callers released together over a quarter of the
// pause that held them, at most two seconds.
func defaultJitter(d time.Duration) time.Duration {
	spread := min(d/4, 2*time.Second)
	if spread <= 0 {
		return 0
	}
	return rand.N(spread)
}

// WithClock sets the Transport's clock: it reads the time from clock.Now
// and waits with clock.Sleep (a caller whose slot moves earlier is woken
// by cancelling the context it sleeps with). The deadline of a request's
// context is compared with this clock. A nil clock means the default:
// wall time advanced by the monotonic clock only, sleeping on a real
// timer, as in every sluice engine. Tests pass a manual clock such as
// stack/limitertest.Clock.
func WithClock(clock sluice.Clock) Option {
	return optionFunc(func(c *config) {
		if clock != nil {
			c.clock = clock
		}
	})
}

// WithJitter sets the random delay added when a pause ends, given the
// pause's length; it must return a value in [0, d] (others are clamped).
// The default is uniform over [0, min(d/4, 2s)); a nil jitter means the
// default.
func WithJitter(jitter func(d time.Duration) time.Duration) Option {
	return optionFunc(func(c *config) {
		if jitter != nil {
			c.jitter = jitter
		}
	})
}

// WithMaxWait sets the longest a request waits for its upstream before
// RoundTrip gives up with a *WaitError. d ≤ 0 means the default,
// 30 s; to never wait, use WithoutWait.
func WithMaxWait(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.maxWait = d
		}
	})
}

// WithoutWait makes a request that would have to wait for its upstream
// fail at once with a *WaitError instead (a maximum wait of zero), for
// callers that would rather shed load than queue it. A later WithMaxWait
// sets a wait again.
func WithoutWait() Option {
	return optionFunc(func(c *config) { c.maxWait = 0 })
}

// WithMaxUpstreams bounds how many upstream keys the Transport keeps state
// for (default 1024). When it is full, the least recently
// used idle key is forgotten; when none is idle, requests for new keys are
// paced together in one shared slot, more slowly, never faster. n ≤ 0
// means the default.
func WithMaxUpstreams(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.maxKeys = n
		}
	})
}

// UpstreamFunc names the upstream of a request: requests with the same name
// share one quota (grpclimit's client interceptors take a name instead:
// a gRPC connection has one upstream).
type UpstreamFunc func(*http.Request) string

// WithUpstream sets how requests are grouped into upstreams. nil means the
// default: the URL's scheme and host and a digest of the credential headers
// (WithCredentialHeaders). Only a 64-bit digest of the name is kept.
func WithUpstream(f UpstreamFunc) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.upstream = f
		}
	})
}

// WithErrorHandler sets a function that observes the errors of the
// limiters of WithLimiter and WithTokens (a limiter that could not decide:
// the request is refused, and RoundTrip returns the error) and of the key
// function, for logs and metrics. It must be safe for concurrent use and
// quick. nil means the default: no handler.
func WithErrorHandler(f func(error)) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.onError = f
		}
	})
}

// WithCredentialHeaders sets the request headers whose values, digested,
// are part of the default key (default: Authorization, X-Api-Key and
// Api-Key), so that two API keys on one host are paced apart. Names are
// canonicalized; empty names are skipped, and no name at all means the
// default. To key by host alone, without any credential, give an
// UpstreamFunc (WithUpstream) that returns req.URL.Host.
func WithCredentialHeaders(names ...string) Option {
	var hs []string
	for _, n := range names {
		if n != "" {
			hs = append(hs, http.CanonicalHeaderKey(n))
		}
	}
	return optionFunc(func(c *config) {
		if len(hs) > 0 {
			c.credHeaders = hs
		}
	})
}

// WithLimit sets a ceiling of n requests per period (burst n) for every
// upstream key. Requests are paced at it from the first one, and a limit
// learned from responses can lower it but never raise it. By default
// there is no ceiling; n ≤ 0 or per ≤ 0 means the default.
func WithLimit(n int, per time.Duration) Option {
	return optionFunc(func(c *config) {
		if n <= 0 || per <= 0 {
			return
		}
		c.ceilInterval = max(int64(per)/int64(n), 1)
		c.ceilBurst = int64(n)
	})
}

// WithRetry makes RoundTrip retry a throttled request, after the pause its
// response imposed, up to attempts times in all. By default a request is
// not retried; attempts ≤ 0 means the default, and 1 is the same. A request is retried only when its body can be replayed:
// it has none, or it has GetBody. The throttled response's body is closed.
func WithRetry(attempts int) Option {
	return optionFunc(func(c *config) {
		if attempts > 0 {
			c.retries = attempts - 1
		}
	})
}

// WithDefaultPause sets the pause after a throttled response that states
// no delay (default 1 s); it doubles with each throttled response
// in a row, up to 20 seconds. d ≤ 0 keeps the default.
func WithDefaultPause(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.defaultPause = d
		}
	})
}

// WithLimiter makes every request also take a unit from l before it is
// sent, waiting as l's RetryAfter says (up to the maximum wait). With a
// limiter shared by several processes (a stack.Stack over Redis), they
// share the upstream's quota exactly. keys gives the Keys l is asked with,
// as in httplimit; nil means the default, Transport.DefaultKeys. An error
// of keys fails the request's RoundTrip before anything is sent, without
// asking the limiter.
//
// When l cannot decide (it returns an error), the request is refused:
// RoundTrip returns the error, wrapped, and sends nothing, as every sluice
// middleware refuses on a Limiter error. Whether a failed backend admits
// is decided once, on the engine that talks to it (a stack.Stack admits
// by default and refuses with stack.WithFailClosed), and pace has no
// option of its own for it. The error handler (WithErrorHandler) observes
// the error too. A nil l means the default: no limiter (keys, if not nil,
// still applies to WithTokens).
func WithLimiter(l sluice.Limiter, keys httplimit.KeyFunc) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.limiter = l
		}
		if keys != nil {
			c.keys = keys
		}
	})
}

// WithTokens makes every request reserve estimate(req) units from r before
// it is sent (waiting as r's RetryAfter says, up to the maximum wait), and
// settles the reservation with the tokens the response's usage reports
// (OpenAI and Anthropic JSON, streamed or not) when its body has been read
// to the end or closed. A response without usage keeps the estimate; a
// response that is not a success gives the reservation back. r is asked
// with the Keys of WithLimiter's keys, or DefaultKeys. A nil r means the
// default: no token reservation. A nil estimate reserves 0 units up front
// (the response's usage is still charged), as does an estimate below 0.
func WithTokens(r sluice.Reserver, estimate func(*http.Request) int) Option {
	return optionFunc(func(c *config) {
		if r != nil {
			c.tokens, c.estimate = r, estimate
		}
	})
}

// WithStore makes the Transport share what it learns about each upstream
// through s with every process using the same Store (see Store;
// sluiceredis.PaceStore (package sluice/redis) for a fleet): the request quota read from the
// upstream's headers, and the pause a throttled response imposed. Each
// process then paces by the fleet's newest quota (under its own WithLimit
// ceiling, which nothing raises) and, from its next refresh, pauses when
// any process was throttled, adding its own jitter so that the fleet does
// not restart as a herd. The store shares knowledge, not the quota: each
// process paces by all of it; WithLimiter shares the quota itself.
//
// Reads are bounded: for each upstream, the first request and then one
// request per refresh interval (on the Transport's clock; refresh ≤ 0
// means 1 s) reads the store, and writes what this
// Transport learned since, in one call; the other requests do not touch
// the store. A throttled response that starts a pause writes it at once
// (one call per pause, not per response), and so does a quota that
// differs from the one read before (at most once per interval). Values
// read that cannot be trusted (a quota of none or above 10^9, a window
// under a millisecond or over a day, a quota read more than a minute in
// the future, a pause longer than a day) are ignored, as bad headers are. When the store fails, the Transport paces
// by what it learned itself and calls Hooks.StoreFailed; it tries again
// at the next refresh. A nil s means the default: nothing is shared.
func WithStore(s Store, refresh time.Duration) Option {
	return optionFunc(func(c *config) {
		if s == nil {
			return
		}
		c.store = s
		c.storeEvery = refresh
		if refresh <= 0 {
			c.storeEvery = defaultStoreRefresh
		}
	})
}

// Hooks are called as requests are paced, for metrics (otelmetric.PaceHooks
// builds them). Any may be nil. They must be safe for concurrent use and
// quick.
type Hooks struct {
	// Paced is called once per request sent, with the time it waited
	// (0 when it did not).
	Paced func(ctx context.Context, waited time.Duration)
	// Throttled is called for every throttled response received.
	Throttled func(ctx context.Context, status int)
	// Learned is called when an upstream's request quota changes: limit
	// requests per window (after the ceiling), read from a response or
	// from the Store.
	Learned func(ctx context.Context, limit int64, window time.Duration)
	// StoreFailed is called when a call to the Store of WithStore failed;
	// the Transport goes on with what it learned itself.
	StoreFailed func(ctx context.Context, err error)
}

// WithHooks sets the Hooks. The default is none; nil fields are not
// called.
func WithHooks(h Hooks) Option {
	return optionFunc(func(c *config) { c.hooks = h })
}

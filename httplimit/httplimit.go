// Package httplimit is net/http middleware that rate-limits requests with
// any sluice.Limiter.
//
// A caller-supplied KeyFunc turns each request into sluice.Keys (the caller,
// the route, the model…). A throttled request is answered in the chosen
// protocol's shape (the gateway's HTTP JSON by default; OpenAI, Anthropic,
// AWS or JSON-RPC on request) with Retry-After and the IETF RateLimit
// fields; an allowed request reaches the next handler with RateLimit and
// RateLimit-Policy set on its response.
//
// # When the limiter cannot decide
//
// A Limiter error means "could not decide": the middleware refuses the
// request through the ErrorResponder (503 Service Unavailable by default)
// and the next handler does not run. Whether a failed backend is such an
// error is the policy of the engine that talks to it, set there once: a
// stack.Stack over a Backend fails open by default (it admits and returns
// no error, so requests pass) and fails closed with stack.WithFailClosed
// (it returns the error, so the middleware refuses every request).
//
// # Connections
//
// The middleware admits requests through a sluice.Admitter: when the
// limiter also implements sluice.SlotReserver (a stack.Stack does), it calls
// ReserveSlots instead of Allow, so connections limits (concurrent in-flight
// requests) are enforced: the slot is taken before the next handler runs and released when it returns — also when it panics (the
// panic goes on after the release) and when the client disconnects (the
// handler returns once the request context ends; a handler that ignores the
// context holds its slot until it returns or until the limiter's lease
// expires). A request denied by any limit holds no slot, and a request no
// connections limit applies to holds nothing: it costs what Allow costs. A
// limiter that is only a sluice.Reserver is asked Reserve(ctx, keys, 0) and
// its reservation reconciled with 0. Requests limits are charged once either
// way, and tokens limits are not charged by the middleware. WithoutReserve
// restores Allow.
//
// An allowed request usually costs the middleware no allocation beyond the
// limiter's: the values of the RateLimit fields are rendered once per limit
// and remaining count and shared by the responses that carry them (one
// allocation renders a new one). A handler may Set, Add or Del these fields
// as any other, but must not write into their value slices in place
// (w.Header()["Ratelimit"][0] = v), which would change other responses'.
//
// Client addresses are never taken from X-Forwarded-For unless the caller
// names the proxies it trusts: see TrustedProxies.
//
// # Where to mount it
//
//   - After routing, on the routes it limits (mux.Handle("GET /hello",
//     limit(h))): only requests that reach a route count; a 404 or 405 uses
//     up nothing, and r.Pattern names the route for the KeyFunc.
//   - Around the whole router (limit(mux)): every request counts before
//     routing, so one that ends in 404 still uses up its caller's quota
//     (useful against path scanners, surprising otherwise); r.Pattern is
//     still empty there, and mux.Handler(r) finds the route.
//   - After authentication when the key is the authenticated caller: the
//     KeyFunc reads only what the request carries when the middleware runs.
//
// The same Limiter serves every protocol: WithFormat picks the throttled
// body here, and in a handler of your own errors.Response renders a denied
// Decision in one call. otelattr.Wrap(l) records each decision on the
// request's span.
package httplimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
)

// KeyFunc resolves the rate-limit keys of a request. An error means the
// request is malformed for limiting purposes; the Limiter is not asked, and
// the error is handed to the ErrorResponder wrapped in a *KeyError (400 Bad
// Request by default); the error handler (WithErrorHandler) observes it. A
// request that simply lacks a dimension should leave it out of the Keys
// instead: limits on that dimension are then skipped.
type KeyFunc func(*http.Request) (sluice.Keys, error)

// KeyError wraps an error returned by the KeyFunc.
type KeyError struct{ Err error }

func (e *KeyError) Error() string { return "httplimit: resolving rate-limit keys: " + e.Err.Error() }

// Unwrap returns the KeyFunc's error.
func (e *KeyError) Unwrap() error { return e.Err }

// LimiterError wraps an error returned by the Limiter (it could not decide):
// the ErrorResponder answers the request with it, and the error handler
// (WithErrorHandler) observes it.
type LimiterError struct{ Err error }

func (e *LimiterError) Error() string { return "httplimit: rate limiter failed: " + e.Err.Error() }

// Unwrap returns the Limiter's error.
func (e *LimiterError) Unwrap() error { return e.Err }

// ErrorResponder writes the response to a request the middleware could not
// decide on: err is a *KeyError or a *LimiterError. The request does not
// reach the next handler, so the ErrorResponder must answer it. (It is not an
// error handler: WithErrorHandler, as in every package of sluice, only
// observes errors.)
type ErrorResponder func(w http.ResponseWriter, r *http.Request, err error)

// DefaultErrorResponder answers 400 Bad Request to a *KeyError and 503 Service
// Unavailable otherwise, with a short plain-text body that does not reveal
// the error.
func DefaultErrorResponder(w http.ResponseWriter, r *http.Request, err error) {
	var ke *KeyError
	if errors.As(err, &ke) {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
}

type config struct {
	format    slerrors.Format
	rpcCode   int
	respond   ErrorResponder
	onError   func(error)
	maxBody   int64
	noHeaders bool
	noReserve bool
}

// Option configures New.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithFormat selects the shape of throttled responses (default
// slerrors.HTTPJSON). With slerrors.JSONRPC the request body is read (up to
// 1 MiB) on a denial to echo the request's id. A Format the errors package
// does not define (slerrors.Format(99)) means the default.
func WithFormat(f slerrors.Format) Option {
	return optionFunc(func(c *config) {
		if _, err := slerrors.ParseFormat(f.String()); err == nil {
			c.format = f
		}
	})
}

// WithJSONRPCCode sets the JSON-RPC error code of throttled responses in the
// JSONRPC format. 0 means the default, slerrors.DefaultJSONRPCCode
// (-32003); any other code is used as given, negative ones included
// (JSON-RPC's codes are negative).
func WithJSONRPCCode(code int) Option {
	return optionFunc(func(c *config) {
		if code != 0 {
			c.rpcCode = code
		}
	})
}

// WithErrorResponder replaces DefaultErrorResponder as the writer of the
// responses to requests whose keys could not be resolved and to requests
// the Limiter could not decide. A nil f means
// the default, DefaultErrorResponder.
func WithErrorResponder(f ErrorResponder) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.respond = f
		}
	})
}

// WithErrorHandler sets a function that observes every error the middleware
// handles: the *KeyError of a key function and the *LimiterError of a
// Limiter that failed (the request is then answered by the ErrorResponder),
// for logs and metrics. It must be safe for
// concurrent use and quick. nil means the default: no handler. Writing the
// response is the ErrorResponder's job, not the handler's.
func WithErrorHandler(f func(error)) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.onError = f
		}
	})
}

// WithoutRateLimitHeaders leaves the RateLimit and RateLimit-Policy fields
// off allowed responses (throttled responses keep them).
func WithoutRateLimitHeaders() Option { return optionFunc(func(c *config) { c.noHeaders = true }) }

// WithoutReserve makes the middleware call Allow even when the limiter
// implements sluice.SlotReserver or sluice.Reserver: connections limits are
// then not enforced (no slot is taken).
func WithoutReserve() Option { return optionFunc(func(c *config) { c.noReserve = true }) }

// New returns middleware that asks l about every request, with the keys
// keys resolves. Neither has a default: New panics, at construction, when
// l or keys is nil (a programming error; the message names the argument).
// The keys are what select a request's limits (a limit whose dimension
// keys a request lacks is skipped), so no default could be right; for the
// client's address, pass ClientIPKey. A nil Option is ignored.
func New(l sluice.Limiter, keys KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	if l == nil {
		panic("httplimit: New: the Limiter l is nil")
	}
	if keys == nil {
		panic("httplimit: New: the KeyFunc keys is nil")
	}
	c := config{respond: DefaultErrorResponder, maxBody: 1 << 20}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	adm := sluice.NewAdmitter(l)
	return func(next http.Handler) http.Handler {
		return &handler{cfg: c, l: l, adm: adm, keys: keys, next: next}
	}
}

type handler struct {
	cfg  config
	l    sluice.Limiter  // asked Allow, with WithoutReserve
	adm  sluice.Admitter // l, without WithoutReserve
	keys KeyFunc
	next http.Handler
	// fields keeps the rendered RateLimit field values of allowed
	// responses.
	fields fieldCache
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cfg.noReserve {
		h.serveAllow(w, r)
		return
	}
	ctx := r.Context() // read first: its cache miss overlaps the key function's
	keys, err := h.keys(r)
	if err != nil {
		h.keyError(w, r, err)
		return
	}
	// The Decision is declared at its call, not ahead of the branch, where
	// it was zeroed on every request whichever path then assigned it.
	slots, d, err := h.adm.Admit(ctx, keys)
	if err != nil || !d.Allowed {
		h.refuse(w, r, &d, err)
		return
	}
	if slots.Held() {
		// The request holds its connection slots until the next handler
		// returns. A deferred release runs on a normal return and while a
		// panic unwinds; the panic then goes on to net/http (or the
		// caller's recover).
		defer slots.Reconcile(0)
	}
	h.admit(w, r, &d)
}

// serveAllow is ServeHTTP with WithoutReserve: Allow, holding nothing. It
// is a function of its own so that ServeHTTP's frame holds one Keys and one
// Decision, not two of each (43–66 instructions fewer a request, counted by
// callgrind on bench/middleware's BenchmarkHandlerSide).
func (h *handler) serveAllow(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	keys, err := h.keys(r)
	if err != nil {
		h.keyError(w, r, err)
		return
	}
	d, err := h.l.Allow(ctx, keys)
	if err != nil || !d.Allowed {
		h.refuse(w, r, &d, err)
		return
	}
	h.admit(w, r, &d)
}

// keyError answers a request whose keys could not be resolved.
func (h *handler) keyError(w http.ResponseWriter, r *http.Request, err error) {
	ke := &KeyError{err}
	if h.cfg.onError != nil {
		h.cfg.onError(ke)
	}
	h.cfg.respond(w, r, ke)
}

func (h *handler) admit(w http.ResponseWriter, r *http.Request, d *sluice.Decision) {
	if !h.cfg.noHeaders && d.Limit > 0 {
		h.fields.set(w.Header(), d.LimitID, d.Limit, d.Remaining, d.Window)
	}
	h.next.ServeHTTP(w, r)
}

// refuse answers a request that was not admitted: with err (the Limiter
// could not decide) through the ErrorResponder; otherwise d is a denial,
// answered as throttled.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, d *sluice.Decision, err error) {
	if err != nil {
		le := &LimiterError{err}
		if h.cfg.onError != nil {
			h.cfg.onError(le)
		}
		h.cfg.respond(w, r, le)
		return
	}
	te, _ := slerrors.AsThrottled(d.Err())
	h.throttle(w, r, te)
}

func (h *handler) throttle(w http.ResponseWriter, r *http.Request, te *slerrors.ThrottledError) {
	resp := slerrors.Response{Format: h.cfg.format, Code: h.cfg.rpcCode}
	if h.cfg.format == slerrors.JSONRPC {
		resp.ID = requestID(r, h.cfg.maxBody)
	}
	_ = resp.Write(w, te)
}

// requestID reads the JSON-RPC id of r's body; nil when there is none.
func requestID(r *http.Request, limit int64) []byte {
	if r.Body == nil {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit))
	if err != nil {
		return nil
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil // a batch or not JSON-RPC: the id is unknown
	}
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return nil
	}
	return msg.ID
}

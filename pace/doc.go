// Package pace keeps a program's outbound calls under the rate limits of
// the APIs it calls.
//
// It is the client half of rate limiting: an http.RoundTripper
// that paces the requests a program sends to rate-limited upstreams (LLM
// APIs, cloud APIs, GitHub, internal services) so that it stays under
// their limits instead of running into 429s and retrying in a herd.
//
//	client := &http.Client{Transport: pace.New(http.DefaultTransport)}
//
// # Upstreams
//
// Requests are grouped into upstreams by a key: by default the URL's
// scheme and host and a digest of the credential headers (Authorization,
// X-Api-Key, Api-Key), so two API keys on one host are paced apart
// (WithUpstream, WithCredentialHeaders). The Transport keeps a small, fixed
// state per upstream, for at most WithMaxUpstreams of them.
//
// # Learning the limit
//
// Every response is read for the upstream's limits: the IETF
// RateLimit and RateLimit-Policy fields (draft 11, as sluice's own
// middleware writes them), OpenAI's x-ratelimit-*-requests, Anthropic's
// anthropic-ratelimit-requests-*, GitHub's x-ratelimit-*. The Transport
// then paces requests one interval apart (window / limit) once the
// upstream's burst is spent. The window is the one the fields state for
// the IETF dialect (w); the others do not state it, and pace assumes one
// minute for OpenAI and Anthropic (their limits are per minute) and one
// hour for GitHub (one minute for its search resources), whose window
// starts over at x-ratelimit-reset.
//
// What pace believes is left follows each remaining count: the upstream
// has already lowered it for the request answered and for every request
// it counted before, so only the requests it may not have counted yet
// (queued, still in flight, or sent since) are subtracted, each once. A
// count higher than the belief raises it, and callers already queued move
// earlier; one lower moves them later. A limit set with WithLimit is a
// ceiling: pacing starts at it, learning can lower it but never raise it,
// and no remaining count raises the belief under it. Until an upstream
// has answered once, one request at a time is sent to it: the first
// probes, the others wait for its answer.
//
// # Throttled responses
//
// A 429, a 503 or 403 with Retry-After (or retry-after-ms), or an AWS
// throttling error (X-Amzn-ErrorType, or a ThrottlingException body) pauses
// every request to that upstream until the delay has passed, plus a
// jitter; after the pause requests leave one interval apart. Without a
// stated delay the pause is WithDefaultPause, doubling with each throttled
// response in a row up to 20 s. The throttled response is returned to the
// caller unchanged unless WithRetry is given: the request is then sent
// again after the pause, when its body can be replayed (GetBody).
//
// # Waiting
//
// Requests to one upstream are served first come, first served. A request
// waits at most WithMaxWait (30 s by default) and never past its context's
// deadline: one that would have to wait longer fails at once with a
// *WaitError (matching ErrMaxWait and errors.ErrThrottled), and nothing is
// sent. Values an upstream sends that cannot be trusted (unparseable,
// negative, absurdly large, contradictory) are ignored.
//
// # Fleets and tokens
//
// WithLimiter makes every request also pass a sluice.Limiter, for example a
// stack.Stack over Redis that every process calling the upstream shares:
// the fleet then shares one quota instead of each process guessing. A
// limiter that cannot decide (it returns an error) refuses the request:
// whether a failed backend admits is the policy of the engine that talks
// to it (stack.WithFailClosed), set there once.
// WithStore shares what the processes learn: the quota any of them read
// from the upstream's headers, and the pause a throttled response imposed
// on any of them, through a Store (MemoryStore in one process,
// sluiceredis.PaceStore (package sluice/redis) in Redis). The store is read on the first request
// to an upstream and then at most once per refresh interval, never on
// every request; a new quota and the start of a pause are written at once.
// A process's own WithLimit stays its ceiling, and when the store fails,
// each process paces by what it learned itself.
// WithTokens reserves an estimate of a request's LLM tokens from a
// sluice.Reserver and settles the reservation with the usage the response
// reports (OpenAI's and Anthropic's usage objects, streamed or not).
//
// # Time
//
// The Transport reads and waits on one sluice.Clock (WithClock): by
// default wall time advanced by the monotonic clock only, with real-timer
// sleeps, as every sluice engine. Tests give it a manual clock such as
// stack/limitertest.Clock and never sleep.
package pace

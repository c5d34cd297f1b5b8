// Package sluice is the shared vocabulary of the sluice rate-limiting library:
// the Limiter interface, the Keys a request resolves to, and the Decision a
// limiter returns.
//
// The engines live in sub-packages; the two that decide whole requests,
// stack.Stack and category.Set, implement Limiter, so they compose with
// the middlewares and with each other.
//
// In this module (github.com/sluicehq/sluice):
//
//   - bucket: a token bucket (GCRA on one atomic int64, lock-free),
//     mirroring golang.org/x/time/rate (its AllowN(t, n) is AllowAt(t, n)
//     here), and a
//     keyed table of buckets (sharded, a lock per shard). The building block
//     of the engines; it does not implement Limiter (it has no Keys to look
//     at).
//   - category: API actions grouped into categories that share one bucket.
//   - match: most-specific entry matching with trailing "*" fallback.
//   - stack: several rate limits evaluated with AND semantics, loaded from the
//     gateway's JSON configuration, hot-reloadable, refreshed from a file or
//     any source by stack.Source; in memory or through a stack.Backend.
//   - errors: the typed *ThrottledError and its protocol renderings.
//   - httplimit: net/http middleware.
//   - pace: the outbound side, an http.RoundTripper that keeps a service's
//     own calls under the limits its upstreams announce.
//   - otelattr: OpenTelemetry span attributes for each decision.
//   - otelmetric: OpenTelemetry metrics for decisions, backend errors,
//     configuration refreshes and pacing.
//
// Nested modules, each with its own go.mod so that importing the core never
// brings in their dependencies:
//
//   - github.com/sluicehq/sluice/grpclimit: gRPC server interceptors, and
//     client interceptors that pace calls.
//   - github.com/sluicehq/sluice/mcplimit: MCP handler middleware.
//   - github.com/sluicehq/sluice/redis: a stack.Backend on Redis
//     and Redis Cluster, so that a fleet shares one limit.
//   - github.com/sluicehq/sluice/envoyrls: Envoy's rate limit service
//     (envoy.service.ratelimit.v3) over any stack.Backend, configured as
//     envoyproxy/ratelimit is.
//
// # Decisions, not errors
//
// A denied request is a normal outcome: Allow returns a Decision with Allowed
// false, the RetryAfter after which a retry succeeds, and which limit denied.
// The error result is only for "could not decide" (the context ended, or a
// backend failed under a fail-closed policy). Decision.Err converts a denial
// into an error that matches errors.ErrThrottled.
//
// # Middleware
//
// Middleware admits each request through an Admitter, built once per
// Limiter: with a Limiter that holds connection slots (a SlotReserver or a
// Reserver, as a stack.Stack is) the request keeps its slots until
// Reservation.Reconcile(0), and with a plain Limiter Admit is Allow. httplimit,
// grpclimit and mcplimit all do so.
//
// A Limiter's error means it could not decide, and every middleware refuses
// the request then (httplimit with 503, grpclimit with UNAVAILABLE,
// mcplimit with a JSON-RPC internal error). Whether a failed backend is
// such an error is set once, on the engine that talks to the backend: a
// stack.Stack fails open by default (it admits, and returns no error) and
// fails closed with stack.WithFailClosed.
//
// # Keys
//
// A request is described by Keys: dimension names and the request's values
// ("targetName" → "my-target", "toolName" → "readData"). Keys stores up to six
// pairs inline, so building one per request allocates nothing.
//
// # Explicit time
//
// Every engine reads the time from a Clock, which its WithClock option
// replaces; a nil Clock, or none, means the default (wall time advanced by
// the monotonic clock only, so a step of the system clock never moves an
// engine's time backwards). One naming rule covers every package:
//
//   - A method whose name ends in At takes the instant as its first argument
//     after the context (its first argument when it takes no context):
//     Bucket.AllowAt(t, n), Bucket.TakeAt(t, n),
//     Table.AllowAt(t, key, n) (a Table's key comes after the instant),
//     Stack.AllowAt(ctx, t, keys, n),
//     Stack.ReserveAt(ctx, t, keys, estimate), Stack.ReserveSlotsAt(ctx, t, keys).
//   - Every method whose name does not end in At reads the engine's clock:
//     Bucket.Allow(), Bucket.AllowN(n), Stack.Allow(ctx, keys),
//     Stack.AllowN(ctx, keys, n), Stack.ReserveSlots(ctx, keys).
//   - No method takes a time.Time without ending in At, and every method
//     that reads the clock to decide has an At form (category.Set's too),
//     for tests, simulations and callers that have read the clock already.
//
// Methods that exist only with an explicit instant (a stack.Backend's Take
// and Adjust) take it in the same place.
//
// Functions follow the same order: one that reads a response's header
// values against an instant (a Retry-After date, a reset time) takes the
// instant first.
//
// # Semantics
//
// Buckets are exact from the first request: in any window of length Δt a bucket
// of burst b and rate r admits at most b + r·Δt units, under any concurrency.
// Time never runs backwards inside a bucket. A request whose cost exceeds a
// bucket's burst is denied permanently instead of being told to wait. A request
// denied by one of several stacked limits consumes nothing from any of them.
package sluice

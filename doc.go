// Package sluice is the shared vocabulary of the sluice rate-limiting library:
// the Limiter interface, the Keys a request resolves to, and the Decision a
// limiter returns.
//
// The engines live in sub-packages and all implement Limiter, so they compose:
//
//   - bucket: a lock-free token bucket (GCRA on one atomic int64), API-compatible
//     with golang.org/x/time/rate where they overlap, and a keyed table of buckets.
//   - category: API actions grouped into categories that share one bucket.
//   - match: most-specific entry matching with trailing "*" fallback.
//   - stack: several rate limits evaluated with AND semantics, loaded from the
//     gateway's JSON configuration, hot-reloadable, refreshed from a file or
//     any source by stack.Source.
//   - errors: the typed *ThrottledError and its protocol renderings.
//   - otelattr: OpenTelemetry span attributes for each decision.
//   - otelmetric: OpenTelemetry metrics for decisions, backend errors and
//     configuration refreshes.
//
// # Decisions, not errors
//
// A denied request is a normal outcome: Allow returns a Decision with Allowed
// false, the RetryAfter after which a retry succeeds, and which limit denied.
// The error result is only for "could not decide" (the context ended, or a
// backend failed under a fail-closed policy). Decision.Err converts a denial
// into an error that matches errors.ErrThrottled.
//
// # Keys
//
// A request is described by Keys: dimension names and the request's values
// ("targetName" → "my-target", "toolName" → "readData"). Keys stores up to six
// pairs inline, so building one per request allocates nothing.
//
// # Semantics
//
// Buckets are exact from the first request: in any window of length Δt a bucket
// of burst b and rate r admits at most b + r·Δt units, under any concurrency.
// Time never runs backwards inside a bucket. A request whose cost exceeds a
// bucket's burst is denied permanently instead of being told to wait. A request
// denied by one of several stacked limits consumes nothing from any of them.
package sluice

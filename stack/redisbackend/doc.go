// Package redisbackend is a stack.Backend that computes sluice's GCRA
// decisions inside Redis, so that a fleet of N processes sharing one Redis
// behaves as one limiter: the same configuration, the same decisions as the
// in-memory stack (AND stacking in order, a denied request consumes
// nothing, rate 0 blocks, "*" per-value buckets, cost, refund, debt,
// RetryAfter never early).
//
//	client := redis.NewClient(&redis.Options{Addr: "redis:6379",
//		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
//	b, err := redisbackend.New(client, redisbackend.WithLocalFallback(1.0/6))
//	...
//	limiter, err := stack.New(cfg, stack.WithBackend(b))
//
// # One round trip
//
// Every decision is one EVALSHA of one Lua script that evaluates and commits
// all of the decision's buckets atomically, whatever their number (EVAL
// once when the server lost the script, e.g. after SCRIPT FLUSH or a
// restart). All keys of a Backend share one hash tag ("sluice:{sluice}:…"
// by default), so the script is legal on Redis Cluster; one Backend's keys
// therefore live in one slot.
//
// # Time and resolution
//
// Time comes from the Redis server (TIME, microseconds) unless WithClock is
// given, so pods with skewed clocks share one timeline; the instant a Stack
// passes to Take is then not used. Each bucket is kept in exact integer
// ticks (a token is P/g ticks and a microsecond Rate/g ticks, with P the
// period in microseconds and g = gcd(P, Rate)), stored with its parameters,
// so that all stored numbers are integers below 2^53 (exact in Lua's
// doubles). A changed rate or burst keeps the tokens held, capped at the new
// burst, as bucket.Reconfigure does. RetryAfter is rounded up to the
// microsecond.
//
// # Expiry
//
// A full bucket has no key; any other expires one second after it would be
// full again, so idle "*" buckets cost nothing. A bucket with rate 0 and
// tokens taken never refills and never expires.
//
// # Failures
//
// Each call has a timeout (WithTimeout, default 50 ms; the client needs
// ContextTimeoutEnabled for it to bound reads). When Redis does not answer,
// Take returns an error matching ErrUnavailable and the Stack fails open
// (default) or closed (stack.WithFailClosed); for WithProbeInterval after a
// failure calls do not wait on Redis at all, then one call probes it.
// WithLocalFallback decides with in-process buckets at a share of each
// limit meanwhile, and returns to Redis by itself when it answers. The
// Backend starts no goroutine and needs no Close.
//
// # Not yet through Redis
//
// Reservations (reserve an estimate, reconcile the actual cost) and
// concurrent-connection limits do not exist in the engine yet; Adjust, which
// their settlement will use, is implemented (forced charge into debt, exact
// refund never above full).
package redisbackend

// Package redis lets a fleet of processes share sluice's limits through
// Redis or Redis Cluster.
//
// It is a stack.Backend that computes sluice's GCRA
// decisions inside Redis, so that a fleet of N processes sharing one Redis
// behaves as one limiter: the same configuration, the same decisions as the
// in-memory stack (AND stacking in order, a denied request consumes
// nothing, rate 0 blocks, "*" per-value buckets, cost, refund, debt,
// RetryAfter never early).
//
// Its package name is redis, as go-redis's is; import it beside go-redis
// under another name, as this documentation does:
//
//	import (
//		"github.com/redis/go-redis/v9"
//		sluiceredis "github.com/sluicehq/sluice/redis"
//	)
//
//	redis.SetLogger(sluiceredis.QuietLogger(nil)) // see Quiet logs
//	client := redis.NewClient(&redis.Options{Addr: "redis:6379",
//		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
//	b, err := sluiceredis.New(client, sluiceredis.WithLocalFallback(1.0/6))
//	...
//	limiter, err := stack.New(cfg, stack.WithBackend(b), stack.WithErrorHandler(report))
//
// # One round trip
//
// Every decision is at most one EVALSHA of one Lua script that evaluates
// and commits all of the decision's buckets atomically, whatever their
// number (EVAL once when the server lost the script, e.g. after SCRIPT
// FLUSH or a restart); concurrent decisions of one process share a call
// (see Batching). By default all keys of a Backend share one hash tag
// ("sluice:{sluice}:…"), so the script is legal on Redis Cluster and one
// Backend's keys live in one slot; WithSpread spreads them (see Redis
// Cluster).
//
// # Time and resolution
//
// Time comes from the Redis server (TIME, microseconds) unless WithClock is
// given, so pods with skewed clocks share one timeline; the instant a Stack
// passes to Take is then not used. Each bucket is kept in exact integer
// ticks (a token is P/g ticks and a microsecond Rate/g ticks, with P the
// period in microseconds and g = gcd(P, Rate)), stored with its parameters,
// so that all stored numbers are integers below 2^53 (exact in Lua's
// doubles). A bucket's key holds one 57-byte string: the byte 2, then the
// parameters, the instant, the ticks held and the instant of the latest
// take (see Give-backs) as seven little-endian doubles; buckets stored by
// earlier versions (the 49-byte form, or text) are read exactly and
// rewritten in this form at their next write. Earlier versions cannot read
// this form (their script answers an error naming the key, which the
// Stack's failure policy handles): during a rolling upgrade, old processes
// fail their decisions on buckets the new ones wrote. A changed rate or burst keeps the
// tokens held, capped at the new burst, as a bucket.Bucket's SetLimit and SetBurst do.
// RetryAfter is rounded up to the microsecond.
//
// # Give-backs
//
// A give-back (Adjust with a negative Cost: a reservation cancelled or
// settled for less, a part of a cluster decision undone because another
// part denied) never hands out a unit that was not refilled, whatever the
// order in which the fleet's calls arrive. Each bucket keeps H, the latest
// instant of any take or forced charge on it; a give-back of c units taken
// at instant a (Op.TakenAt) adds at most c units less the refill between a
// and H, never less than nothing: a take after a that found the bucket
// refilled started over from its own state, and the units given back may
// already have been handed out again. Given promptly, with no take since,
// it gives back all c; a give-back with a zero TakenAt gives nothing. A part
// g of a take given back (a reservation settled for less), c units of the
// take outstanding (Op.Taken), adds at most g units, and at most c less the
// refill between a and H: what a later take may have handed out again is
// counted against the part kept first, as package bucket's Grant counts
// it, and the in-memory specification the tests check every history
// against allows no less. With
// WithClock, a decision's instant on the script's timeline is the clock's
// reading when the call is made, not the instant the Stack passes, and
// TakenAt is read as an instant of that timeline: give the Stack the same
// clock (stack.WithClock), so that TakenAt is never later than the take's
// instant there. Instants that run backwards (processes whose clocks lag)
// are fine: a give-back that fills a bucket stores it full from its own
// instant, so an older instant still sees it as it was. On the server's time the
// take's instant there is not known to the client: the script places it at
// now less the time since the take on the caller's clock less the
// backend's timeout, never later than it ran, so a prompt give-back on the
// server's time returns up to the timeout's refill less than it took.
//
// # Expiry
//
// A bucket never taken from has no key (a missing key is a full bucket at
// every instant); any other expires one second after it would be full
// again, so idle "*" buckets cost nothing. A bucket that a give-back fills
// keeps its key, full from that give-back's instant on, for that second:
// deleting it would make it full at earlier instants too, which a caller
// with an older instant (with WithClock, a process whose clock lags) would
// be admitted by beyond b + r·Δt. Key expiry follows the server's clock, so
// a caller whose instant lags the clocks the bucket was written with by
// more than about a second may still find an expired key, full. A bucket
// with rate 0 and tokens taken never refills and never expires.
//
// # Failures
//
// Each call has a timeout (WithTimeout, default 50 ms; the client needs
// ContextTimeoutEnabled for it to bound reads). Every reply that means
// Redis cannot decide now is treated alike: no reply (connection refused or
// reset, timeout, a stopped server) and the error replies OOM, BUSY,
// LOADING, READONLY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, MISCONF, NOREPLICAS
// and a NOSCRIPT that EVAL did not cure. Take then returns an error
// matching ErrUnavailable and the Stack fails open (default) or closed
// (stack.WithFailClosed); for WithProbeInterval after a failure calls do
// not wait on Redis at all, then one call probes it. With WithClock the
// probe interval, the rejoin period and the fallback's reports are measured
// on that clock too (a frozen clock never probes again); only the timeout,
// a network deadline, is always real time. Other error replies
// (a key holding something that is not a bucket) are errors too, never
// taken for unavailability.
//
// With WithLocalFallback the backend decides with in-process buckets at a
// share of each limit instead, and switching never creates tokens: a local
// bucket starts empty (every bucket of one outage at the outage's first
// local instant, so that one first needed in the rejoin period holds the
// share's refill since then rather than nothing), a give-back during the
// outage returns at most what the local bucket took, the probe that ends
// the outage charges Redis with what was decided locally (down to zero),
// and for a rejoin period a decision must pass both Redis and the local
// bucket. A charge Redis refuses with an error reply (a key holding
// something else) stays owed and is tried again, up to three times, then
// reported to the error handler as a *PaymentError. Over any window the
// fleet then admits at most what one limiter would, b + r·Δt, plus one
// burst if Redis restarted without persistence (it forgot what was taken),
// as long as every process of the fleet sees the outage (a process cut off
// from a Redis the others still reach adds its share). The Stack's error
// handler hears a *stack.FallbackError on entering the fallback, at most
// once a second while in it (failures and local decisions so far) and on
// leaving it. The Backend starts no goroutine and needs no Close.
//
// # Quiet logs
//
// go-redis logs every failed dial ("connection pool: failed to dial"),
// many lines a second while Redis is down. The recommended setup:
//
//	redis.SetLogger(sluiceredis.QuietLogger(nil)) // or wrap your logger
//	client := redis.NewClient(&redis.Options{Addr: addr,
//		ContextTimeoutEnabled: true, // WithTimeout bounds reads too
//		MaxRetries:            -1,   // the backend decides what a failure means
//		DialerRetries:         1})   // one dial per probe, not several
//
// QuietLogger drops only the dial messages; the error handler reports the
// outage instead.
//
// # Redis Cluster
//
//	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs,
//		ContextTimeoutEnabled: true}) // as the tests run it
//	b, err := sluiceredis.New(client, sluiceredis.WithPin(byCaller)) // or WithSpread()
//
// With WithSpread every bucket has its own hash tag, a digest of its limit
// and of the values that select it ("sluice:{1f0c9a2e}:<bucket key>"), so
// the buckets of one stack spread over all the slots and masters of a
// cluster (100,000 callers' buckets fall on three masters within 1% of a
// third each). WithPin keeps chosen buckets together, for instance every
// bucket of one caller, so that the common decision stays on one node.
//
// A decision whose buckets sit on one node is one script call, as before
// (the keys of several slots of one node go in one call through the
// script flag allow-cross-slot-keys of Redis 7; an older server gets one
// call per slot). A decision whose buckets sit on several nodes makes one
// call per node, sent concurrently, each deciding its buckets all or
// nothing; then the first denial in evaluation order decides, RetryAfter
// is the longest wait any part reports (never early), and what the parts
// that passed took is given back by a second call to each (see
// Give-backs: exact unless another take came since at a later instant). While that
// give-back is in flight, another decision may be denied by those units: a
// spurious denial for one round trip, never an admission beyond a limit.
// Shadow limits, reservations and connections slots work across nodes
// (one difference: a full connections slot after the denying bucket, on
// another node, may lengthen RetryAfter to its one second, where the
// in-memory stack does not probe slots). A
// decision that changes a bucket's parameters (after a reload) and is
// denied on another node may convert that bucket at once rather than at
// its next use.
//
// Concurrent decisions on one node are batched per node (WithMaxBatch),
// in one call even when their buckets span several of its slots; a
// decision on several nodes is not batched (its parts go to different
// nodes).
//
// A slot moving (MOVED, ASK while resharding) is followed: a call that
// touched a slot no longer on its node is redone slot by slot through the
// cluster client, which follows the redirection. A node that cannot decide
// fails only the decisions that need it: without WithLocalFallback those
// decisions return ErrUnavailable (the Stack fails open or closed) and
// the node is not asked again for WithProbeInterval, while decisions on
// the other nodes go on; if another node denied, the decision is that
// denial. Redis Cluster itself refuses every command (CLUSTERDOWN) while
// some slot has no master, unless cluster-require-full-coverage is no:
// set it so that the other masters keep deciding during a failover. What
// the other nodes took for a failed decision stays taken, so
// that a fail-open admission still counts where it could.
//
// With WithLocalFallback the fallback is per master: the buckets of a
// master that cannot decide are decided in local buckets, by the rules of
// the single-server fallback (they start empty, at the fallback's share;
// what they take is charged, down to zero, by the probe that ends the
// outage; for a rejoin period a decision on them must pass both Redis and
// the local bucket), while the other masters go on deciding theirs in
// Redis. A decision with buckets on both stays all or nothing: the first
// denial in order decides, and what the other parts took is given back, in
// Redis or locally. The probe charges through the cluster's current
// routing, so that after a failover the new master of the slots is
// charged. The error handler hears a *stack.FallbackError for each master
// entering, staying in (at most once a second) and leaving its fallback,
// its Err a *NodeError naming the master. While any master is in its
// fallback, or rejoining, decisions are not batched.
//
// Switching a fleet to WithSpread renames every key, so it is not the
// default: buckets start full once, and while old and new processes run
// side by side each side has its own buckets (up to twice the limit for
// the length of the rollout). On a single server (*redis.Client) the
// spread only renames keys.
//
// # Reservations and connections
//
// Reservations work through Redis: Stack.Reserve takes the estimate in the
// same script call as the other limits, Reconcile and Cancel settle with
// Adjust (a forced charge into debt, or a give-back bounded by what refill
// has not yet covered and by the latest take since, never above full: see
// Give-backs). Connections limits (concurrent
// in-flight requests) are shared by the fleet too: each slot is a lease in
// a sorted set per bucket, taken in the same atomic call as the rate
// limits, released by Reconcile or Cancel, and expired after the Stack's
// lease TTL (stack.WithLeaseTTL) when a process dies holding it. While
// Redis cannot decide, a local fallback holds its share of the slots
// locally; a slot taken in Redis before the outage and released during it
// stays held in Redis until its lease expires.
//
// # Batching
//
// Decisions that one process makes concurrently go to Redis together: a
// decision is sent at once while fewer than two script calls are in flight,
// and the ones that arrive meanwhile wait and go in one call (up to
// WithMaxBatch), each still evaluated atomically and in order. A lone
// caller never waits.
//
// # Denial cache
//
// When the script denies a decision because one bucket needs time to
// refill, the Backend answers that bucket's denials itself until the
// instant Redis would admit it: no call, the same Outcome the script would
// give at that instant (the same denying op, RetryAfter counting down,
// shadow ops reported), so the Stack's Decision and metrics are the same.
// Remaining is left nil on such a denial, as the script's general path
// leaves it. This is what envoyproxy/ratelimit's LOCAL_CACHE_SIZE_IN_BYTES
// does, kept exact: a cached denial only ever denies. It is on by default
// with 1 MiB (about 100 bytes an entry plus its bucket key; a random entry
// is evicted when full); WithDenialCache resizes it, WithoutDenialCache
// turns it off, and DenialCacheStats counts its hits and evictions
// (otelmetric.Metrics.ObserveDenialCache exports them).
//
// Anything this process does that can make the bucket admit sooner drops
// the entry: a give-back, a settlement or a charge (Adjust), a take that
// Redis admitted, a failed call, a call with the bucket under another
// rate, period or burst (a reload: an entry answers only ops with the
// parameters and cost it was made with). What another process gives back
// is seen up to the entry's RetryAfter late: this process keeps denying
// until then. That is the only cost; other processes' takes only delay
// admission. A decision with several buckets is answered only when the
// script's answer is known: its first bucket that can deny has a live
// entry (shadow buckets before it too; no connections slot before it) and
// so does every later non-shadow bucket (the script's RetryAfter is the
// longest wait of them); an entry is made only from a denial whose
// RetryAfter is the denying bucket's own wait (no non-shadow bucket after
// it), with a time unit of one microsecond (see Time and resolution).
//
// When an entry expires or is dropped, the decisions of this process on
// that bucket alone (one op, with the entry's parameters and cost) ask
// Redis one at a time: one makes the call, the others wait for its reply
// and look again, so that a flood costs Redis about one call per
// RetryAfter per process, plus the admitted decisions, instead of one per
// waiting caller (BenchmarkFlood). A waiter whose context ends returns its
// error. Once Redis has admitted the bucket twice since its last denial,
// the entry is gone and decisions on it go to Redis concurrently again.
//
// With WithSpread or WithPin on a Redis Cluster the cache stays empty:
// every decision goes to Redis, as before.
//
// While Redis is unreachable, a cached denial still denies until its
// RetryAfter; after it the failure policy decides, as without the cache.
// Expiry is measured on the backend's clock with WithClock (the script's
// own instants, exactly), else on this process's monotonic clock: the
// script then reads the server's TIME, so an entry expires RetryAfter
// (less 1 µs and RetryAfter/1024 for clock rates) after the call was sent,
// never after the instant Redis would admit, and reports RetryAfter
// counted from when the reply arrived, never early.
//
// # How it is tested
//
// The fallback's promise is checked under four processes offering far more
// than the limit (TestFleetSwitchesCreateNoTokens): Redis hangs (a proxy
// holds its requests), then acts without answering (the proxy holds its
// replies), answers again, then is killed (-9) and restarted empty; over
// every window the fleet admits at most b + r·Δt, plus one burst when the
// window holds the restart. On a three-master
// cluster the tests check 400 random multi-node decisions against the
// in-memory stack, a slot migrating under traffic with an exact count, and
// a master killed and replaced by its replica: decisions that do not need
// it go on, those on the healthy masters keep exact counts in Redis, the
// failed master's bucket (with WithLocalFallback) admits nothing while the
// injected clock stands still and its share of the rate when it moves, and
// the new master holds the charge after the failover.
package redis

// Package bucket is an exact token bucket and a keyed table of buckets.
//
// The bucket is lock-free; the table is sharded with a lock per shard.
//
// A [Bucket] of capacity b refilled at r tokens per second is stored as one
// int64, its GCRA "theoretical arrival time", updated by compare-and-swap:
// integer arithmetic on the hot path, no floats, no locks, no allocation.
// Its API mirrors golang.org/x/time/rate, so switching is mostly a rename:
//
//	lim := rate.NewLimiter(20, 50)   // before
//	lim := bucket.New(20, 50)        // after
//
// Beyond x/time/rate, [Bucket.TakeN] reports the exact RetryAfter of a
// denial (never early) or that no wait helps ([Result].Permanent), and
// [Bucket.GiveBack] returns what a take took through the [Grant] it left (a
// later limit denied, a request was cancelled, an estimate was too high). A
// cost larger than the burst is reported as OverBurst (and
// [ErrCostExceedsBurst] from WaitN), never as a wait.
//
// # Time
//
// One rule, as everywhere in sluice: a method whose name ends in At takes
// the instant as its first argument ([Bucket.AllowAt](t, n),
// [Bucket.TakeAt](t, n), [Table.AllowAt](t, key, n), [Table.TakeAt](t, key,
// n), TokensAt, SetLimitAt, SetBurstAt); every other method reads the
// clock given with [WithClock], a [sluice.Clock] (default: wall time
// advanced by the monotonic clock only, and a real timer for Wait). Where
// x/time/rate's AllowN(t, n) takes an instant, this package's AllowN(n)
// reads the clock and AllowAt(t, n) takes it.
//
// A new bucket is full at whatever instant it is first used. Time never
// moves backwards inside a bucket: a caller with an older instant than the
// others gets no tokens that were already spent (golang/go#56287 cannot
// happen). Internally one token is exactly an integer number of ticks,
// chosen per rate, so the refill does not drift: over a simulated day the
// admitted count stays within one token of b + r·day for rates from
// 0.001/s to 10,000,000/min.
//
// # Arguments
//
// rate.Inf allows everything; a rate of 0 admits the burst and then
// nothing (its denials are Permanent); a burst of 0 admits nothing; rates
// above 5e8 tokens per second are treated as 5e8, bursts above 2⁶⁰ as 2⁶⁰.
// A negative or NaN rate, or a negative burst, has no meaning: [New],
// [NewTable] and the setters panic at once with a message naming it. A
// take of n ≤ 0 takes nothing and passes only while a whole token is held
// (a check); a take of more than the burst is never admitted.
//
// # Exactness
//
// Within any window of length Δt a bucket keeps at most b + r·Δt tokens
// taken, up to one internal tick of rounding (2 ns for rates of 1/s and
// above, at most about a microsecond for the slowest rates), under any
// interleaving of takes and give-backs from any number of goroutines, with
// stale callers, and whatever order give-backs arrive in. A give-back is
// exact when no take used a later instant than the one it undoes (for a
// Bucket, also whenever nothing was taken since); otherwise it may return
// less, never a token that a later take already counted on (see [Grant]).
// The tests check this three ways: a window oracle over histories recorded
// from many goroutines, a seeded scheduler that replays an interleaving
// exactly, and a linearizability checker (porcupine) over a sequential
// specification of the bucket.
//
// # Tables
//
// A [Table] holds one bucket per key, created on first use, for per-value
// limits. It stores a keyed 128-bit digest of each key, never the key, in
// fixed 24-byte slots, so its memory does not depend on what callers send
// (at most 64 bytes per live bucket). Buckets that have refilled to full
// are reclaimed by sweeps amortised over the Table's operations, so memory
// stays bounded by the keys that are actually limited and comes back when
// they go idle; no goroutine runs in the background. A [Budget] bounds the
// live buckets of several Tables together. A Table is not lock-free: each
// operation locks the shard its key falls in.
package bucket

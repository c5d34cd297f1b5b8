// Package bucket is a token bucket, lock-free, and a keyed table of buckets,
// sharded with a lock per shard.
//
// A [Bucket] of capacity b refilled at r tokens per second is stored as one
// int64, its GCRA "theoretical arrival time", updated by compare-and-swap:
// integer arithmetic on the hot path, no floats, no locks, no allocation.
// Its API mirrors golang.org/x/time/rate, so switching is a rename:
//
//	lim := rate.NewLimiter(20, 50)   // before
//	lim := bucket.New(20, 50)        // after
//
// Beyond x/time/rate, [Bucket.TakeN] reports the exact RetryAfter of a denial
// (never early), [Bucket.GiveBack] returns what a take took through the
// [Grant] the take left (a later stacked limit denied, a request was
// cancelled, an estimate was too high), [Bucket.ChargeN] consumes
// unconditionally and may put the bucket into debt (an actual cost larger
// than its estimate), and a cost larger than the burst is reported as
// OverBurst (and [ErrCostExceedsBurst] from WaitN), never as a wait.
//
// # Time
//
// Every time-dependent method but Wait and WaitN has an explicit-instant
// form (AllowN, TakeN, TokensAt, SetLimitAt, …); only Allow, Tokens,
// SetLimit, SetBurst, Wait and WaitN of a Bucket, and Allow, AllowBytes and
// Take of a Table, read the clock ([WithClock]). The instant is always the
// first argument, as in every method of sluice (see the sluice package
// documentation, "Explicit time"): the names and arguments of a Bucket's
// methods are x/time/rate's ([Bucket.AllowN](t, n), [Bucket.TakeN](t, n)),
// and a [Table] takes the key after the instant ([Table.AllowN](t, key, n),
// [Table.TakeN](t, key, n), [Table.TokensAt](t, key)). A new bucket is full
// at whatever instant it is first used. Time never moves backwards inside a bucket: a caller with an older
// instant than the others gets no tokens that were already spent
// (golang/go#56287 cannot happen).
//
// Internally one token is exactly an integer number of ticks, chosen per
// rate, and an instant is converted to ticks on each call from a fixed
// epoch, so the refill does not drift: over a simulated day the admitted
// count stays within one token of b + r·day for rates from 0.001/s to
// 10,000,000/min.
//
// # Exactness
//
// Within any window of length Δt a bucket keeps at most b + r·Δt tokens
// taken, up to one internal tick of rounding (2 ns for rates of 1/s and
// above, at most about a microsecond for the slowest rates), under any
// interleaving of takes and give-backs from any number of goroutines, with
// stale callers, and whatever order give-backs arrive in. A give-back is
// exact when no take used a later instant than the one it undoes (for a
// Bucket, also whenever nothing was taken since); otherwise it may return less,
// never a token that a later take already counted on (see [Grant] for the
// rule and why it holds). ChargeN is the exception by design: it takes
// unconditionally, into debt, and later takes wait until the debt refills.
// The tests check this three ways: a window oracle over histories recorded
// from many goroutines, a seeded scheduler that replays an interleaving
// exactly, and a linearizability checker (porcupine) over a sequential
// specification of the bucket.
//
// # Limits
//
// Instants are exact within about ±146 years of 2000-01-01 UTC and saturate
// beyond (the bucket then stops refilling; it never admits more). Finite
// rates above [MaxRate] (5e8 tokens/s) are treated as MaxRate; bursts above
// [MaxBurst] as MaxBurst.
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
// operation locks the shard its key falls in (a Table starts with one shard
// and splits at 256 live keys into 16, or as many as [WithShards] sets).
package bucket

// Package lincheck checks that sluice's limits keep their one promise under
// any interleaving: in any window Δt a limit admits at most burst + r·Δt,
// and a give-back never hands out a token that was not refilled.
//
// Spec is a sequential specification of GCRA buckets with explicit
// instants, for one Bucket, a Table's keys, or a stack's AND-stacked
// buckets (see its doc). The tests of this package check the real code two
// ways:
//
//   - Linearizability: histories recorded from goroutines on Bucket,
//     Table, the in-memory Stack (two and three limits, each decision
//     path, reservations) and a fleet on a shared MemoryBackend or Redis
//     backend are checked against Spec with porcupine
//     (TestLinearizable…). On a violation the history, the longest prefix
//     porcupine could linearize with the specification's states along it,
//     and porcupine's visualization are written to $LINCHECK_OUT (or the
//     test's temporary directory) and named in the failure.
//   - Seeded interleavings: logical callers (read the instant, take, give
//     back, settle) stepped one step at a time in a seeded order on one
//     goroutine, with an oracle that checks the window bound over every
//     sequence of kept decisions (TestInterleavings…). A failure names its
//     seed; LINCHECK_SEED=<seed> replays exactly that interleaving and
//     prints every step. Connections limits have a form of their own
//     (TestInterleavingsSlots), each caller on a goroutine that acts only
//     when handed the turn: callers acquire slots and release them in any
//     order, twice, and after the lease expired, and an oracle keeps the
//     leases as a model: no more than N slots of a limit value stand
//     admitted, a release frees its own slot and nothing more, none is
//     lost, and once all are released a fresh caller takes exactly N.
//
// Reference buckets check the checkers: an ideal give-back passes both,
// one that never gives back fails the exactness the specification demands,
// and a known-unsafe rule is caught. TestRegressions replays the shapes of
// the failing histories found in the give-backs before issue 21's fix.
//
// What it found: run against the give-backs before that fix, porcupine
// rejected 58 to 60 of 60 histories for RefundN and RefundTake and 14 of 60
// for the Table's RefundTakeBytes, and 265 of 300 seeds of the scheduler
// broke the window bound (none after). Stepping inside WaitN (the bucket's
// sleep parks the waiter until the scheduler wakes or cancels it, so a
// cancel lands after later takes) and driving the Redis script with each
// caller's own stale instants found a give-back that filled a bucket
// deleting its key, so that an older instant found it full; fixed, with the
// shape kept as a test. A stack decision that is not one Redis script takes
// its buckets one by one, so two overlapping decisions may reach two
// buckets in opposite orders; Spec checks such a decision as one part per
// bucket (two histories that showed it under load are kept in
// testdata/split). The Redis backend's give-backs are held to the same
// bound as the in-memory ones: an adjustment carries the take's outstanding
// units (stack.Op.Taken).
//
// It is a module of its own so that porcupine stays out of sluice's go.mod.
package lincheck

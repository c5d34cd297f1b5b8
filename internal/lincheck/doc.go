// Package lincheck checks that sluice's limits keep their one promise under
// concurrency: in any window Δt a limit admits at most burst + r·Δt, and a
// give-back never hands out a token that was not refilled.
//
// Spec is a sequential specification of GCRA buckets with explicit
// instants (see its doc); the tests of this package record concurrent
// histories on the real code and check them with porcupine, and drive the
// real code from a seeded single-threaded scheduler with a window-bound
// oracle. It is a module of its own so that the checker's dependency stays
// out of sluice's go.mod.
package lincheck

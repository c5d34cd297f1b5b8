package lincheck

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/redis/redistest"
	"github.com/sluicehq/sluice/stack"
)

// redisGiveBacksSafe says whether the Redis backend's give-backs keep the
// promise with instants in order. The Stack settles a reservation by
// giving back its whole cost with Op.TakenAt (issue 21) and the script
// bounds the give-back by the takes since that instant; before it did
// (between 39e1e88 and 0dbfd7d), a settle handed out tokens that later
// takes had already counted on, and the scheduler broke the window bound
// on 13 and 39 of 60 seeds. Set it to false to report instead of fail.
const redisGiveBacksSafe = true

// TestLinearizableFleet records histories of a fleet on a shared Backend:
// each caller is a process with its own Stack reading its own clock (set
// to each operation's instant), all deciding through one MemoryBackend, or
// one redis-server the test starts. A backend decides each request in one
// step (a Redis script is atomic); reservations are settled through
// Adjust. The histories are checked against the same specification as the
// in-memory Stack. Without redis-server the Redis half is skipped, or fails
// when SLUICE_REQUIRE_REDIS=1 (as in CI).
func TestLinearizableFleet(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		fleetHistories(t, func(string) stack.Backend { return stack.NewMemoryBackend() }, nil, stackLoad, false, false)
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
		defer client.Close()
		fleetHistories(t, nil, func(prefix string, now func() time.Time) stack.Backend {
			b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithClock(sluice.ClockFunc(now)),
				sluiceredis.WithTimeout(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}, redisLoad, !redisGiveBacksSafe, true)
	})
}

// TestLinearizableFleetDenialCache is TestLinearizableFleet's Redis half on
// one limit (singles-1), where denials are cached: each process's Backend
// answers a bucket's repeated denials from its near-cache of denials
// (issue #39) until the RetryAfter Redis gave. Every history must still be
// linearizable against the atomic specification, which checks each denial
// exactly (the denying bucket holds less than the cost at the decision's
// instant). It runs without reservations: with them, a give-back by one
// process may be seen by another's cache up to RetryAfter late, the
// documented cost, which denies a request the atomic specification would
// admit (seed 11 of singles-1-reserve does, about one run in twenty), and the
// specification does not model that lag. A cache's own give-backs, which it
// must see at once, are checked step by step against the script in the redis
// module (TestDenialCacheIsTheScript, TestDenialCacheDropsOnChange,
// TestDenialCacheConcurrentGiveBacks). The test fails
// if the caches answered nothing.
func TestLinearizableFleetDenialCache(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer client.Close()
	var backends []*sluiceredis.Backend
	fleetHistoriesModes(t, nil, func(prefix string, now func() time.Time) stack.Backend {
		b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(prefix+"-dc"), sluiceredis.WithClock(sluice.ClockFunc(now)),
			sluiceredis.WithTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		backends = append(backends, b)
		return b
	}, redisLoad, false, true, []bool{false}, stackShapes()[0])
	var hits int64
	for _, b := range backends {
		h, _ := b.DenialCacheStats()
		hits += h
	}
	t.Logf("%d denials answered from the processes' caches", hits)
	if hits == 0 {
		t.Error("no denial was answered from a cache: the form checks nothing")
	}
}

// fleetHistories runs the fleet on a backend shared by every process
// (shared), or one per process on shared storage (own, given the key
// prefix of the history and the process's clock). unsafeSettle says that
// the backend's give-backs of reservations are known to over-admit: the
// histories with reservations are then reported, not failed. oneStep says
// that it decides each request in one step (see Spec.Atomic): Redis. Its
// give-backs are checked as exactly as the in-memory ones: an Adjust op
// carries the take's outstanding units (Op.Taken), so a part given back
// after a later take returns all the rule allows.
func fleetHistories(t *testing.T, shared func(prefix string) stack.Backend, own func(prefix string, now func() time.Time) stack.Backend, w workload, unsafeSettle, oneStep bool, shapes ...stackShape) {
	fleetHistoriesModes(t, shared, own, w, unsafeSettle, oneStep, []bool{false, true}, shapes...)
}

// fleetHistoriesModes is fleetHistories with the reservation modes to run
// (false: Allow only; true: Reserve and settle).
func fleetHistoriesModes(t *testing.T, shared func(prefix string) stack.Backend, own func(prefix string, now func() time.Time) stack.Backend, w workload, unsafeSettle, oneStep bool, modes []bool, shapes ...stackShape) {
	seeds := seedsFor(12)
	if len(shapes) == 0 {
		shapes = []stackShape{stackShapes()[1], stackShapes()[2]}
	}
	for _, sh := range shapes {
		for _, reserve := range modes {
			name := sh.name
			if reserve {
				name += "-reserve"
			}
			t.Run(name, func(t *testing.T) {
				known := reserve && unsafeSettle
				bad := 0
				for seed := range uint64(seeds) {
					prefix := "lincheck-" + name + "-" + strconv.FormatUint(seed, 10)
					var clock atomic.Int64
					var sb stack.Backend
					if shared != nil {
						sb = shared(prefix)
					}
					pods := make([]pod, stackLoad.callers)
					for c := range pods {
						clk := new(atomic.Int64)
						now := func() time.Time { return at(clk.Load()) }
						b := sb
						if own != nil {
							b = own(prefix, now)
						}
						s, err := stack.New(sh.config(), stack.WithBackend(b), stack.WithClock(sluice.ClockFunc(now)), stack.WithFailClosed())
						if err != nil {
							t.Fatal(err)
						}
						pods[c] = pod{s: s, own: clk}
					}
					h := recordStack(func(c int) pod { return pods[c] }, &clock, sh, w, reserve, seed)
					checkOutputs(t, h)
					spec := sh.spec()
					spec.Atomic = oneStep
					res, msg := check(t, spec, h, t.Name()+"-seed"+strconv.FormatUint(seed, 10))
					if res != porcupine.Ok {
						bad++
						if !known {
							t.Error(msg)
						}
					}
				}
				if known {
					t.Logf("%d of %d histories are not linearizable (the give-backs are known to over-admit)", bad, seeds)
				}
			})
		}
	}
}

// TestInterleavingsRedis runs the seeded scheduler on a fleet deciding
// through the Redis backend, with reservations settled between other
// callers' decisions: each caller is a process with its own Stack and
// Backend (WithClock), whose clock reads the instant of its decision and
// the shared clock's when it settles. Once with every decision at the
// shared clock's instant, once with instants read earlier (stale: the
// process's clock lags), which the script then sees run backwards. A run
// that breaks the window bound names its seed; the Redis server's replies
// are deterministic for a seed, so it replays with LINCHECK_SEED.
//
// The backend decides at its clock's reading, not at the instant a Stack
// passes to Take, so the callers' instants reach the script only through
// their processes' clocks. (Until this test gave each caller its own clock,
// one backend read the shared clock while the callers passed stale
// instants to AllowAt: the script saw instants in order, and the oracle,
// which counts each decision at its caller's instant, reported windows the
// script never decided on. Seed 4 of singles-3-stale was one: its stale
// take "at 1314 µs" ran at 2820 µs, where the per-tenant bucket's four
// takes, at 463, 1122, 2064 and 2820 µs, keep the bound.)
func TestInterleavingsRedis(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer client.Close()
	const callers, steps = 5, 400
	seeds := seedsToRun(t, seedsFor(60))
	for _, sh := range []stackShape{stackShapes()[1], stackShapes()[2]} {
		for _, inOrder := range []bool{true, false} {
			name := sh.name + "-stale"
			if inOrder {
				name = sh.name + "-in-order"
			}
			// Known: with instants in order, only the give-backs of
			// reservations (redisGiveBacksSafe); with stale instants also
			// what redisStaleSafe says.
			safe := redisGiveBacksSafe && (inOrder || redisStaleSafe)
			t.Run(name, func(t *testing.T) {
				caught := 0
				for _, seed := range seeds {
					s := newSched(seed, 400)
					prefix := "lincheck-sched-" + name + "-" + strconv.FormatUint(seed, 10)
					var fns []func()
					for i := range callers {
						c := &stackCaller{s: s, sh: sh, id: i, reserve: true, inOrder: inOrder, own: new(int64)}
						now := func() time.Time { return at(*c.own) }
						b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithClock(sluice.ClockFunc(now)),
							sluiceredis.WithTimeout(10*time.Second))
						if err != nil {
							t.Fatal(err)
						}
						if c.st, err = stack.New(sh.config(), stack.WithBackend(b), stack.WithClock(sluice.ClockFunc(now)), stack.WithFailClosed()); err != nil {
							t.Fatal(err)
						}
						fns = append(fns, c.step)
					}
					v := ""
					for range steps / 20 {
						s.run(20, fns)
						if len(s.errs) > 0 {
							t.Fatalf("seed %d: %s", seed, s.errs[0])
						}
						if v = windowViolation(s.kept, sh.spec().Params); v != "" {
							break
						}
					}
					if v == "" {
						continue
					}
					caught++
					msg := fmt.Sprintf("seed %d: %s (replay: LINCHECK_SEED=%d); last steps:\n%s", seed, v, seed, tail(strings.Join(s.trace, "\n"), 40))
					if safe {
						t.Error(msg)
					} else if caught == 1 {
						t.Log(msg)
					}
				}
				t.Logf("%d of %d seeds broke the window bound", caught, len(seeds))
				if !safe && caught == 0 && len(seeds) > 1 {
					t.Errorf("the Redis backend's give-backs are known to over-admit here, but no seed caught it: if they were fixed, update redisGiveBacksSafe/redisStaleSafe")
				}
			})
		}
	}
}

// redisLoad is the load of the Redis fleet: stackLoad, with a quarter of
// the instants stale, so that each pod's clock (WithClock) hands the script
// instants that run backwards. Until a give-back that fills a bucket kept
// its key, and one to a bucket already full left it as stored (see
// redisStaleSafe), it used instants in order, as the server's clock gives
// them by default.
var redisLoad = stackLoad

// redisStaleSafe says whether a Redis bucket keeps the instant of its
// state when a give-back fills it. The script used to delete the key
// instead (a missing key is a full bucket at every instant), so a caller
// whose instant was older than that give-back's found a full bucket where
// GCRA would have it still refilling, and was admitted beyond burst +
// rate·Δt: 3 and 22 of 60 seeds of TestInterleavingsRedis
// (singles-3-stale, direct-2-stale) before the fix; its shape is
// the redis package's TestGiveBackThatFillsKeepsInstantForStaleCallers. A
// give-back to a bucket already full (refilled) now leaves it as stored:
// storing it full at the give-back's instant, the first form of the fix,
// took from a caller with an older instant what it had before the
// give-back, which the fleet's histories with stale instants (redisLoad)
// caught (TestGiveBackToFullBucketKeepsItsPast). Only instants that run
// backwards can see either: with the server's clock (the default) they do
// not, with WithClock they may.
const redisStaleSafe = true

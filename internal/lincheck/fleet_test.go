package lincheck

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/redisbackend"
	"github.com/sluicehq/sluice/stack/redisbackend/redistest"
)

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
		fleetHistories(t, func(string) stack.Backend { return stack.NewMemoryBackend() }, nil, true, false)
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
		defer client.Close()
		fleetHistories(t, nil, func(prefix string, now func() time.Time) stack.Backend {
			b, err := redisbackend.New(client, redisbackend.WithKeyPrefix(prefix), redisbackend.WithClock(now),
				redisbackend.WithTimeout(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}, false, true)
	})
}

// fleetHistories runs the fleet on a backend shared by every process
// (shared), or one per process on shared storage (own, given the key
// prefix of the history and the process's clock). unsafeTakes says that
// the backend's denials give back without bound until issue 21's fix;
// oneStep that it decides each request in one step (see Spec.Atomic).
func fleetHistories(t *testing.T, shared func(prefix string) stack.Backend, own func(prefix string, now func() time.Time) stack.Backend, unsafeTakes, oneStep bool) {
	seeds := seedsFor(12)
	for _, sh := range []stackShape{stackShapes()[1], stackShapes()[2]} {
		for _, reserve := range []bool{false, true} {
			name := sh.name
			if reserve {
				name += "-reserve"
			}
			t.Run(name, func(t *testing.T) {
				known := !stackGiveBacksSafe && (reserve || unsafeTakes)
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
						s, err := stack.New(sh.config(), stack.WithBackend(b), stack.WithClock(now), stack.WithFailClosed())
						if err != nil {
							t.Fatal(err)
						}
						pods[c] = pod{s: s, own: clk}
					}
					h := recordStack(func(c int) pod { return pods[c] }, &clock, sh, stackLoad, reserve, seed)
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

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

// TestLinearizableRedis records histories of a fleet on the Redis backend:
// each caller is a process with its own Stack and Backend, reading its own
// clock (set to each operation's instant), on one redis-server the test
// starts. Decisions are one script each, atomic in Redis; reservations are
// settled through Adjust. The histories are checked against the same
// specification as the in-memory Stack. Without redis-server the test is
// skipped, or fails when SLUICE_REQUIRE_REDIS=1 (as in CI).
func TestLinearizableRedis(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer client.Close()
	seeds := seedsFor(12)
	for _, sh := range []stackShape{stackShapes()[1], stackShapes()[2]} {
		for _, reserve := range []bool{false, true} {
			name := sh.name
			if reserve {
				name += "-reserve"
			}
			t.Run(name, func(t *testing.T) {
				bad := 0
				for seed := range uint64(seeds) {
					prefix := "lincheck-" + name + "-" + strconv.FormatUint(seed, 10)
					var clock atomic.Int64
					pods := make([]pod, stackLoad.callers)
					for c := range pods {
						own := new(atomic.Int64)
						now := func() time.Time { return at(own.Load()) }
						b, err := redisbackend.New(client, redisbackend.WithKeyPrefix(prefix), redisbackend.WithClock(now),
							redisbackend.WithTimeout(10*time.Second))
						if err != nil {
							t.Fatal(err)
						}
						s, err := stack.New(sh.config(), stack.WithBackend(b), stack.WithClock(now), stack.WithFailClosed())
						if err != nil {
							t.Fatal(err)
						}
						pods[c] = pod{s: s, own: own}
					}
					h := recordStack(func(c int) pod { return pods[c] }, &clock, sh, stackLoad, reserve, seed)
					for _, op := range h {
						if msg, ok := op.Output.(string); ok {
							t.Fatalf("%s: %s", Describe(op.Input, nil), msg)
						}
					}
					res, msg := check(t, sh.spec(), h, t.Name()+"-seed"+strconv.FormatUint(seed, 10))
					if res != porcupine.Ok {
						bad++
						if reserve && !stackGiveBacksSafe {
							continue // a reservation's give-back is known to over-admit
						}
						t.Error(msg)
					}
				}
				if reserve && !stackGiveBacksSafe {
					t.Logf("%d of %d histories are not linearizable (reservations' give-backs are known to over-admit)", bad, seeds)
				}
			})
		}
	}
}

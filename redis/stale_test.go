package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// A give-back that fills a bucket keeps its key: the bucket is full from
// the give-back's instant on, not before it, and a caller whose instant is
// older (a process whose clock lags, with WithClock) must see the bucket as
// it was at its own instant. The script used to delete the key of a bucket
// a give-back filled, and a missing key is a full bucket at every instant,
// so such a caller found the whole burst.
//
// The shape is seed 59 of lincheck's TestInterleavingsRedis/direct-2-stale
// (each caller a process with its own clock), on the per-user bucket
// (burst 4, 1000/s: 1000 µs a unit), behind the per-tenant one (burst 3,
// 500/s), both in every decision as the Stack sends them:
//
//	560 µs   take 2 (a reservation)                user: 2 left
//	2732 µs  take 1 (a reservation)                user: full by refill, 3 left
//	1882 µs  take 2 (a reservation, stale)         user: 0.15 left at 1882 µs
//	3643 µs  cancel the take at 2732 µs            gives back 1
//	3748 µs  cancel the take at 1882 µs            gives back 2 less the
//	         850 µs of refill since (the take at 2732 µs may have used
//	         it): the bucket is full at 3748 µs, and its key was deleted
//	1279 µs  take 3 (stale)                        user holds 4 − (3748 −
//	         1279)/1000 = 1.53 at 1279 µs: denied. It was admitted, and the
//	         window [560 µs, 1279 µs] kept 2 + 3 = 5 > 4 + 0.719.
func TestGiveBackThatFillsKeepsInstantForStaleCallers(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	ctx := context.Background()
	for _, shape := range []struct {
		name   string
		tenant bool // the per-tenant limit in front (the several-bucket fast path)
	}{{"two limits", true}, {"one bucket", false}} {
		t.Run(shape.name, func(t *testing.T) {
			var now time.Time
			b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(uniquePrefix("stalefill")),
				sluiceredis.WithClock(sluice.ClockFunc(func() time.Time { return now })), sluiceredis.WithTimeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			at := func(us int64) time.Time { return limitertest.Start.Add(time.Duration(us) * time.Microsecond) }
			ops := func(n int64) []stack.Op {
				user := stack.Op{Key: "per-user|ann", Rate: 1000, Period: time.Second, Burst: 4, Cost: n}
				if !shape.tenant {
					return []stack.Op{user}
				}
				return []stack.Op{{Key: "per-tenant|acme", Rate: 500, Period: time.Second, Burst: 3, Cost: 1}, user}
			}
			take := func(us, n int64) bool {
				t.Helper()
				now = at(us) // the caller's process clock
				out, err := b.Take(ctx, now, ops(n))
				if err != nil {
					t.Fatalf("take %d at %d µs: %v", n, us, err)
				}
				return out.Denied < 0
			}
			cancel := func(us, takenUS, n int64) {
				t.Helper()
				now = at(us)
				gb := ops(n)
				for i := range gb {
					gb[i].Cost, gb[i].TakenAt = -gb[i].Cost, at(takenUS)
				}
				if err := b.Adjust(ctx, now, gb); err != nil {
					t.Fatalf("cancel the take at %d µs: %v", takenUS, err)
				}
			}
			for _, st := range []struct {
				us, n int64
				want  bool
			}{{560, 2, true}, {2732, 1, true}, {1882, 2, true}} {
				if got := take(st.us, st.n); got != st.want {
					t.Fatalf("take %d at %d µs: admitted %v, want %v", st.n, st.us, got, st.want)
				}
			}
			cancel(3643, 2732, 1)
			cancel(3748, 1882, 2)
			if take(1279, 3) {
				t.Fatalf("a stale take of 3 at 1279 µs was admitted after a give-back filled the bucket at 3748 µs: " +
					"the bucket held 1.53 at 1279 µs, and the window [560 µs, 1279 µs] now keeps 5 units, above 4 + 0.719")
			}
			// A caller at the give-back's instant or later finds it full.
			if !take(3748, 4) {
				t.Errorf("a take of the whole burst at 3748 µs, where the give-back left the bucket full, was denied")
			}
		})
	}
}

// A give-back to a bucket that has refilled to full leaves it as stored:
// it has been full since an instant its state keeps, and a caller with an
// older instant than the give-back's must still find what it had before
// the give-back. Storing it full at the give-back's instant instead (the
// first form of the fix above) took tokens from such a caller: the shape
// is from lincheck's TestLinearizableFleet with stale instants (per-user
// bucket, burst 4 at 1000/s): a take of 2 at 21407 µs, full again from
// 23407 µs; its give-back at 25989 µs; then a take of 2 at 23960 µs, where
// the bucket was full before the give-back and must be after it.
func TestGiveBackToFullBucketKeepsItsPast(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	ctx := context.Background()
	var now time.Time
	b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(uniquePrefix("stalefull")),
		sluiceredis.WithClock(sluice.ClockFunc(func() time.Time { return now })), sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	at := func(us int64) time.Time { return limitertest.Start.Add(time.Duration(us) * time.Microsecond) }
	user := func(n int64) []stack.Op {
		return []stack.Op{{Key: "per-user|ann", Rate: 1000, Period: time.Second, Burst: 4, Cost: n}}
	}
	now = at(21407)
	if out, err := b.Take(ctx, now, user(2)); err != nil || out.Denied >= 0 {
		t.Fatalf("take 2 at 21407 µs: %+v, %v", out, err)
	}
	now = at(25989)
	gb := user(-2)
	gb[0].TakenAt = at(21407)
	if err := b.Adjust(ctx, now, gb); err != nil {
		t.Fatal(err)
	}
	now = at(23960)
	out, err := b.Take(ctx, now, user(2))
	if err != nil {
		t.Fatal(err)
	}
	if out.Denied >= 0 || out.Remaining[0] != 2 {
		t.Errorf("take 2 at 23960 µs, where the bucket was full before a give-back at 25989 µs: %+v, want admitted with 2 left", out)
	}
}

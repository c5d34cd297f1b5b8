package redis_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/bucketkey"
	"github.com/sluicehq/sluice/internal/faultproxy"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// Redis is killed mid-traffic and restarted on the same port: decisions
// follow the configured policy (fail-open, fail-closed, local fallback),
// nothing panics or hangs, the local fallback admits exactly its share from
// an empty bucket, decisions come back to Redis at the first probe after
// its return, and no goroutine is left behind. Time is a fake clock,
// stepped; the only real waits are for the restarted server to answer
// PING and for the goroutines to exit.
func TestRedisKilledAndRestarted(t *testing.T) {
	srv := startRedis(t)
	if srv.External {
		t.Skip("SLUICE_REDIS_ADDR is set: this test must kill its own server")
	}
	baseline := goleak.IgnoreCurrent()
	// After PoolSize failed dials go-redis stops dialling and retries on
	// its own, once a real second: a pool far larger than the failed dials
	// of this test keeps every probe a real dial.
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 50 * time.Millisecond, DialerRetries: 1, PoolSize: 10000})
	const probe = 50 * time.Millisecond
	clock := limitertest.NewClock(limitertest.Start)
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "rl", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"},
			Requests: []stack.Rate{{Rate: 50, Period: stack.Second, Burst: 10}}}}}}}
	keys := sluice.NewKeys("caller", "c")
	newBackend := func(name string, opts ...sluiceredis.Option) *sluiceredis.Backend {
		b, err := sluiceredis.New(client, append([]sluiceredis.Option{sluiceredis.WithKeyPrefix(uniquePrefix(name)),
			sluiceredis.WithClock(clock), sluiceredis.WithTimeout(time.Second), sluiceredis.WithProbeInterval(probe)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var openErrs atomic.Int64
	var lastOpenErr atomic.Value
	// Every decision of the fail-open stack must reach Redis: the test
	// counts the failures it absorbs, and its background traffic drains
	// the bucket on a still clock, whose denials the near-cache would
	// answer through the outage (TestDenialCacheDeniesThroughAnOutage).
	openB := newBackend("open", sluiceredis.WithoutDenialCache())
	open, _ := stack.New(cfg, stack.WithBackend(openB), stack.WithClock(clock), stack.WithErrorHandler(func(err error) {
		openErrs.Add(1)
		lastOpenErr.Store(err)
	}))
	closed, _ := stack.New(cfg, stack.WithBackend(newBackend("closed")), stack.WithClock(clock), stack.WithFailClosed())
	fbB := newBackend("fallback", sluiceredis.WithLocalFallback(0.5))
	fallback, _ := stack.New(cfg, stack.WithBackend(fbB), stack.WithClock(clock), stack.WithFailClosed())
	ctx := context.Background()

	// Background traffic through the whole outage: fail-open decisions,
	// each admitted (Redis up, or failing open).
	var prog progress
	var decided atomic.Int64
	var wg sync.WaitGroup
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			defer prog.bump()
			for {
				select {
				case <-done:
					return
				default:
				}
				if d, err := open.Allow(ctx, keys); err != nil || !d.Allowed && d.RetryAfter == 0 {
					t.Errorf("fail-open in the background: %+v, %v", d, err)
				}
				decided.Add(1)
				prog.bump()
			}
		})
	}
	traffic := func(when string) {
		t.Helper()
		n := decided.Load()
		prog.await(t, "background decisions "+when, func() bool { return decided.Load()-n >= 8 })
	}
	traffic("before the kill")

	if _, err := closed.Allow(ctx, keys); err != nil {
		t.Fatalf("with Redis up: %v", err)
	}
	srv.Stop()
	traffic("after the kill")

	// Down: every decision follows its policy. The local bucket starts
	// empty (a switch adds no burst) and gets half the rate, 25/s: one
	// unit per 40 ms step, none at the first.
	const step = 40 * time.Millisecond
	fbAllowed := 0
	for i := 0; i < 20; i++ {
		if d, err := open.Allow(ctx, keys); err != nil || !d.Allowed {
			t.Errorf("fail-open while down: %+v, %v", d, err)
		}
		if _, err := closed.Allow(ctx, keys); !errors.Is(err, sluiceredis.ErrUnavailable) {
			t.Errorf("fail-closed while down: err = %v, want ErrUnavailable", err)
		}
		d, err := fallback.Allow(ctx, keys)
		if err != nil {
			t.Errorf("local fallback while down: %v", err)
		}
		if d.Allowed != (i > 0) {
			t.Errorf("local fallback while down, step %d: allowed %v, want %v (one unit per step after an empty start)", i, d.Allowed, i > 0)
		}
		if d.Allowed {
			fbAllowed++
		}
		clock.Advance(step)
	}
	if fbAllowed != 19 {
		t.Errorf("local fallback admitted %d of 20 in 0.76 s at 25/s from empty, want 19", fbAllowed)
	}
	if e, _ := lastOpenErr.Load().(error); openErrs.Load() == 0 || !errors.Is(e, sluiceredis.ErrUnavailable) {
		t.Errorf("fail-open error handler saw %d errors, last %v", openErrs.Load(), e)
	}

	// Back: the first decisions after a probe interval go to Redis again.
	srv.Restart(t)
	clock.Advance(probe)
	if _, err := closed.Allow(ctx, keys); err != nil {
		t.Errorf("fail-closed, the first decision a probe interval after Redis returned: %v", err)
	}
	if _, err := fallback.Allow(ctx, keys); err != nil {
		t.Errorf("local fallback, the first decision a probe interval after Redis returned: %v", err)
	}
	key := fbB.KeyPrefix() + bucketkey.Render("rl", "requests", 0, []string{"*"}, []string{"c"})
	if n, err := client.Exists(ctx, key).Result(); err != nil || n != 1 {
		t.Errorf("the local fallback's decision after Redis returned is not in Redis: EXISTS %d, %v", n, err)
	}
	traffic("after the restart")
	close(done)
	wg.Wait()
	if err := client.Close(); err != nil {
		t.Error(err)
	}
	// Every goroutine exits (go-redis's dial prober may see the pool
	// closed late: wait for the event, within eventLimit).
	eventually(t, "every goroutine of the test exited", func() bool { return goleak.Find(baseline) == nil })
	goleak.VerifyNone(t, baseline)
}

// A hung server (the proxy holds every request, connections open): each
// decision gives up at the backend's timeout, not the client's read
// timeout (an hour here: a decision not bounded by the backend would never
// return), none of the held requests reaches Redis, and the first decision
// once Redis answers again is decided there.
func TestRedisHangsEachCallIsBounded(t *testing.T) {
	srv := startRedis(t)
	// The proxy, not the server, hangs: an external server
	// (SLUICE_REDIS_ADDR) serves as well as one of this test's own.
	proxy := faultproxy.NewProxy(t, srv.Addr)
	client := redis.NewClient(&redis.Options{Addr: proxy.Addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		ReadTimeout: time.Hour, WriteTimeout: time.Hour})
	t.Cleanup(func() { client.Close() })
	// The clock moves only when stepped: each decision that must ask Redis
	// is made one probe interval after the last failure.
	const probe = time.Nanosecond
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(uniquePrefix("hang")), sluiceredis.WithClock(clock),
		sluiceredis.WithTimeout(50*time.Millisecond), sluiceredis.WithProbeInterval(probe))
	if err != nil {
		t.Fatal(err)
	}
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "rl", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 10, Period: stack.Second}}}}}}}
	s, _ := stack.New(cfg, stack.WithBackend(b), stack.WithClock(clock), stack.WithFailClosed())
	ctx := context.Background()
	keys := sluice.NewKeys("caller", "c")
	if d, err := s.Allow(ctx, keys); err != nil || !d.Allowed {
		t.Fatalf("before the hang: %+v, %v", d, err)
	}
	proxy.SetMode(faultproxy.Stall)
	for i := 0; i < 3; i++ {
		clock.Advance(probe) // a probe is due: this decision asks the hung server too
		res := make(chan error, 1)
		go func() {
			_, err := s.Allow(ctx, keys)
			res <- err
		}()
		select {
		case err := <-res:
			if !errors.Is(err, sluiceredis.ErrUnavailable) {
				t.Errorf("hung server, decision %d: err = %v, want ErrUnavailable", i, err)
			}
		case <-time.After(eventLimit):
			t.Fatalf("hung server, decision %d: not bounded by the backend's timeout (no answer after %v)", i, eventLimit)
		}
	}
	if n := proxy.Accepted(); n < 2 {
		t.Errorf("the proxy accepted %d connections: the decisions did not reach it", n)
	}
	proxy.Release()
	clock.Advance(probe) // the first decision probes, and Redis answers
	// The held requests died with their connections: Redis took one unit
	// of the bucket of 10, so 9 more pass (4 ns later: no refill), then a
	// denial.
	for i := 0; i <= 9; i++ {
		d, err := s.Allow(ctx, keys)
		if err != nil {
			t.Fatalf("after the hang, decision %d: %v", i, err)
		}
		if d.Allowed != (i < 9) {
			t.Fatalf("after the hang, decision %d: allowed %v; want 9 admitted then denied (the held requests took nothing)", i, d.Allowed)
		}
	}
}

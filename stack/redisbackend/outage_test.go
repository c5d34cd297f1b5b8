package redisbackend_test

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
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/redisbackend"
)

// Redis is killed mid-traffic and restarted on the same port: decisions
// stay fast and follow the configured policy (fail-open, fail-closed, local
// fallback), nothing panics, decisions come back from Redis within a second
// of its return, and no goroutine is left behind.
func TestRedisKilledAndRestarted(t *testing.T) {
	srv := startRedis(t)
	if srv.External {
		t.Skip("SLUICE_REDIS_ADDR is set: this test must kill its own server")
	}
	baseline := goleak.IgnoreCurrent()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 50 * time.Millisecond, DialerRetries: 1})
	const timeout = 50 * time.Millisecond
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "rl", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"},
			Requests: []stack.Rate{{Rate: 50, Period: stack.PeriodSecond, Burst: 10}}}}}}}
	keys := sluice.NewKeys("caller", "c")
	newBackend := func(name string, opts ...redisbackend.Option) *redisbackend.Backend {
		b, err := redisbackend.New(client, append([]redisbackend.Option{redisbackend.WithKeyPrefix(uniquePrefix(name)),
			redisbackend.WithTimeout(timeout), redisbackend.WithProbeInterval(50 * time.Millisecond)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var openErrs atomic.Int64
	var lastOpenErr atomic.Value
	openB := newBackend("open")
	open, _ := stack.New(cfg, stack.WithBackend(openB), stack.WithErrorHandler(func(err error) {
		openErrs.Add(1)
		lastOpenErr.Store(err)
	}))
	closed, _ := stack.New(cfg, stack.WithBackend(newBackend("closed")), stack.WithFailClosed())
	fbB := newBackend("fallback", redisbackend.WithLocalFallback(0.5))
	fallback, _ := stack.New(cfg, stack.WithBackend(fbB), stack.WithFailClosed())
	ctx := context.Background()

	// Background traffic through the whole outage.
	var wg sync.WaitGroup
	done := make(chan struct{})
	var slowest atomic.Int64
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				t0 := time.Now()
				_, _ = open.Allow(ctx, keys)
				if d := int64(time.Since(t0)); d > slowest.Load() {
					slowest.Store(d)
				}
			}
		}()
	}

	if _, err := closed.Allow(ctx, keys); err != nil {
		t.Fatalf("with Redis up: %v", err)
	}
	srv.Stop()

	// Down: every decision is prompt and follows its policy.
	const prompt = 10 * timeout // generous for -race on a loaded 2-core machine; a hang (dial retries, no deadline) takes seconds
	fbAllowed := 0
	downStart := time.Now()
	for i := 0; i < 20; i++ {
		t0 := time.Now()
		if d, err := open.Allow(ctx, keys); err != nil || !d.Allowed {
			t.Errorf("fail-open while down: %+v, %v", d, err)
		}
		if _, err := closed.Allow(ctx, keys); !errors.Is(err, redisbackend.ErrUnavailable) {
			t.Errorf("fail-closed while down: err = %v, want ErrUnavailable", err)
		}
		d, err := fallback.Allow(ctx, keys)
		if err != nil {
			t.Errorf("local fallback while down: %v", err)
		}
		if d.Allowed {
			fbAllowed++
		}
		if el := time.Since(t0); el > 3*prompt {
			t.Errorf("three decisions while down took %v", el)
		}
	}
	// The local buckets start empty (a switch adds no burst): at most half
	// the rate (25/s) over the loop. The exact share is checked with a fake
	// clock in TestStoppedAndKilledFollowThePolicy.
	if maxFb := int(25*time.Since(downStart).Seconds()) + 1; fbAllowed > maxFb {
		t.Errorf("local fallback admitted %d of 20, want at most %d (half the rate)", fbAllowed, maxFb)
	}
	if e, _ := lastOpenErr.Load().(error); openErrs.Load() == 0 || !errors.Is(e, redisbackend.ErrUnavailable) {
		t.Errorf("fail-open error handler saw %d errors, last %v", openErrs.Load(), e)
	}

	// Back: decisions return to Redis within a second.
	srv.Restart(t)
	back := time.Now()
	for {
		_, errC := closed.Allow(ctx, keys)
		_, _ = fallback.Allow(ctx, keys)
		n, _ := client.Exists(ctx, fbB.KeyPrefix()+stack.BucketKey("rl", "requests", 0, []string{"*"}, []string{"c"})).Result()
		if errC == nil && n == 1 {
			break
		}
		if time.Since(back) > time.Second {
			t.Fatalf("decisions not back on Redis a second after its return: closed err %v, fallback key exists %d", errC, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("back on Redis %v after its return; slowest fail-open decision %v", time.Since(back), time.Duration(slowest.Load()))
	close(done)
	wg.Wait()
	if s := time.Duration(slowest.Load()); s > prompt {
		t.Errorf("slowest decision under outage took %v, want under %v", s, prompt)
	}
	if err := client.Close(); err != nil {
		t.Error(err)
	}
	// go-redis's own dial prober sleeps a second between attempts before it
	// sees the pool closed: allow it that long to exit.
	for deadline := time.Now().Add(3 * time.Second); goleak.Find(baseline) != nil && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	goleak.VerifyNone(t, baseline)
}

// A hung server (stopped, connections open): each decision gives up after
// the backend's timeout instead of waiting on the client's read timeout,
// and decisions come back when the server does.
func TestRedisHangsEachCallIsBounded(t *testing.T) {
	srv := startRedis(t)
	if srv.External {
		t.Skip("SLUICE_REDIS_ADDR is set: this test must pause its own server")
	}
	client, _ := newClient(t, srv.Addr)
	const timeout = 50 * time.Millisecond
	b, err := redisbackend.New(client, redisbackend.WithKeyPrefix(uniquePrefix("hang")),
		redisbackend.WithTimeout(timeout), redisbackend.WithProbeInterval(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "rl", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 10, Period: stack.PeriodSecond}}}}}}}
	s, _ := stack.New(cfg, stack.WithBackend(b), stack.WithFailClosed())
	ctx := context.Background()
	keys := sluice.NewKeys("caller", "c")
	if _, err := s.Allow(ctx, keys); err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		_, err := s.Allow(ctx, keys)
		el := time.Since(t0)
		if !errors.Is(err, redisbackend.ErrUnavailable) {
			t.Errorf("hung server: err = %v, want ErrUnavailable", err)
		}
		if el < timeout/2 || el > 6*timeout {
			t.Errorf("hung server: the decision took %v, want about the %v timeout", el, timeout)
		}
	}
	srv.Resume(t)
	back := time.Now()
	for {
		if _, err := s.Allow(ctx, keys); err == nil {
			break
		}
		if time.Since(back) > time.Second {
			t.Fatal("no decision from Redis a second after it resumed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package redisbackend_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/redisbackend"
)

// admission is one allowed decision, made somewhere in [t0, t1].
type admission struct{ t0, t1 time.Duration }

// Four processes (four Stacks, each with its own client and backend) share
// one limit of 100/s, burst 50, on one redis-server, with a local fallback
// of a quarter each, under load far above the limit. Redis is stopped
// (SIGSTOP) and continued, then killed (-9) and restarted empty. Over every
// window, the fleet admits at most what one limiter would: b + r·Δt, plus
// one burst when the window holds the restart (a Redis without persistence
// forgets what was taken).
func TestFleetSwitchesCreateNoTokens(t *testing.T) {
	srv := startRedis(t)
	if srv.External {
		t.Skip("SLUICE_REDIS_ADDR is set: this test must stop its own server")
	}
	const (
		rate  = 100.0
		burst = 50
		procs = 4
	)
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "fleet", DimensionKeys: []string{"svc"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"svc": "api"},
			Requests: []stack.Rate{{Rate: int64(rate), Period: stack.PeriodSecond, Burst: burst}}}}}}}
	prefix := uniquePrefix("fleet")
	start := time.Now()
	var (
		mu         sync.Mutex
		admissions []admission
	)
	evs := make([]events, procs)
	stacks := make([]*stack.Stack, procs)
	for i := range stacks {
		client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1,
			DialTimeout: 50 * time.Millisecond, DialerRetries: 1})
		t.Cleanup(func() { client.Close() })
		b, err := redisbackend.New(client, redisbackend.WithKeyPrefix(prefix), redisbackend.WithTimeout(50*time.Millisecond),
			redisbackend.WithProbeInterval(50*time.Millisecond), redisbackend.WithLocalFallback(1.0/procs))
		if err != nil {
			t.Fatal(err)
		}
		if stacks[i], err = stack.New(cfg, stack.WithBackend(b), stack.WithErrorHandler(evs[i].handle)); err != nil {
			t.Fatal(err)
		}
	}
	keys := sluice.NewKeys("svc", "api")
	ctx := context.Background()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range stacks {
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					t0 := time.Since(start)
					d, err := s.Allow(ctx, keys)
					t1 := time.Since(start)
					if err != nil {
						t.Errorf("Allow: %v", err)
						return
					}
					if d.Allowed {
						mu.Lock()
						admissions = append(admissions, admission{t0, t1})
						mu.Unlock()
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
	}
	phase := func(d time.Duration) { time.Sleep(d) }
	phase(time.Second)
	srv.Pause(t)
	phase(1500 * time.Millisecond)
	srv.Resume(t)
	phase(1500 * time.Millisecond)
	killAt := time.Since(start)
	srv.Stop()
	phase(time.Second)
	srv.Restart(t)
	restartedAt := time.Since(start)
	phase(2 * time.Second)
	close(done)
	wg.Wait()
	end := time.Since(start)

	slices.SortFunc(admissions, func(a, b admission) int { return int(a.t0 - b.t0) })
	t.Logf("%d admitted in %v (%.0f/s against %v/s)", len(admissions), end, float64(len(admissions))/end.Seconds(), rate)
	if min := int(0.3 * rate * end.Seconds()); len(admissions) < min {
		t.Errorf("only %d admitted in %v: the fleet should get at least %d", len(admissions), end, min)
	}
	// Every window starting at an admission: count the admissions surely
	// decided inside it (both ends in it).
	worst := map[time.Duration]float64{}
	for _, w := range []time.Duration{250 * time.Millisecond, time.Second, 3 * time.Second, end} {
		for i, a := range admissions {
			lo, hi := a.t0, a.t0+w
			n := 0
			for _, b := range admissions[i:] {
				if b.t0 > hi {
					break
				}
				if b.t1 <= hi {
					n++
				}
			}
			bound := float64(burst) + rate*w.Seconds()
			if lo <= restartedAt && hi >= killAt {
				bound += burst
			}
			if float64(n) > bound {
				t.Errorf("window [%v, %v]: %d admitted, one limiter admits at most %.0f", lo, hi, n, bound)
				break
			}
			worst[w] = max(worst[w], float64(n)/bound)
		}
	}
	t.Logf("highest share of the bound per window: %v", worst)
	// Each process heard both outages begin and end.
	for i := range evs {
		var on, off int
		for _, fe := range fallbacks(evs[i].take()) {
			if fe.Active && fe.Err != nil {
				on++
			}
			if !fe.Active {
				off++
			}
		}
		if on < 2 || off < 2 {
			t.Errorf("process %d: the error handler heard %d fallback events and %d returns, want 2 outages", i, on, off)
		}
	}
}

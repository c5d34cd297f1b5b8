package redis_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/faultproxy"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// Four processes (four Stacks, each with its own client and backend) share
// one limit of 50/s, burst 100, on one redis-server reached through a
// proxy, with a local fallback of a quarter each, under load far above the
// limit. Redis hangs (the proxy holds requests), then acts without
// answering (the proxy holds replies), answers again, then is killed (-9)
// and restarted empty. Time is a fake clock in 20 ms steps; at each step
// every process decides twice, concurrently. Over every window, the fleet
// admits at most what one limiter would: b + r·Δt, plus one burst when the
// window holds the restart (a Redis without persistence forgets what was
// taken). (The bucket refills in 2 s of the clock, which key expiry, on the
// server's real clock, must not outrun: the test's real time between two
// writes of the key stays well under that.)
func TestFleetSwitchesCreateNoTokens(t *testing.T) {
	srv := startRedis(t)
	if srv.External {
		t.Skip("SLUICE_REDIS_ADDR is set: this test must stop its own server")
	}
	proxy := faultproxy.NewProxy(t, srv.Addr)
	const (
		rate  = 50.0
		burst = 100
		procs = 4
		step  = 20 * time.Millisecond
	)
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "fleet", DimensionKeys: []string{"svc"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"svc": "api"},
			Requests: []stack.Rate{{Rate: int64(rate), Period: stack.Second, Burst: burst}}}}}}}
	prefix := uniquePrefix("fleet")
	clock := limitertest.NewClock(limitertest.Start)
	start := clock.Now()
	var (
		mu         sync.Mutex
		admissions []time.Duration // the clock's instant of each admission, since start
	)
	evs := make([]events, procs)
	stacks := make([]*stack.Stack, procs)
	for i := range stacks {
		// A pool larger than the failed dials keeps go-redis from
		// switching to its own once-a-second redial.
		client := redis.NewClient(&redis.Options{Addr: proxy.Addr, ContextTimeoutEnabled: true, MaxRetries: -1,
			DialTimeout: time.Second, DialerRetries: 1, PoolSize: 10000})
		t.Cleanup(func() { client.Close() })
		b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithClock(clock),
			sluiceredis.WithTimeout(50*time.Millisecond), sluiceredis.WithProbeInterval(50*time.Millisecond),
			sluiceredis.WithLocalFallback(1.0/procs))
		if err != nil {
			t.Fatal(err)
		}
		if stacks[i], err = stack.New(cfg, stack.WithBackend(b), stack.WithClock(clock),
			stack.WithErrorHandler(evs[i].handle)); err != nil {
			t.Fatal(err)
		}
	}
	keys := sluice.NewKeys("svc", "api")
	ctx := context.Background()
	// run makes n steps of the clock.
	run := func(n int) {
		t.Helper()
		for range n {
			at := clock.Now().Sub(start)
			var wg sync.WaitGroup
			for _, s := range stacks {
				for range 2 {
					wg.Go(func() {
						d, err := s.Allow(ctx, keys)
						if err != nil {
							t.Errorf("Allow: %v", err)
							return
						}
						if d.Allowed {
							mu.Lock()
							admissions = append(admissions, at)
							mu.Unlock()
						}
					})
				}
			}
			wg.Wait()
			clock.Advance(step)
		}
	}
	run(50) // 1 s with Redis up
	proxy.SetMode(faultproxy.Stall)
	run(15) // hung: nothing reaches Redis
	proxy.SetMode(faultproxy.Delay)
	run(15) // Redis takes, its replies are lost: decided locally as well
	proxy.Release()
	run(75)
	killAt := clock.Now().Sub(start)
	srv.Stop()
	run(25)
	srv.Restart(t)
	restartedAt := clock.Now().Sub(start)
	run(75)
	end := clock.Now().Sub(start)

	slices.Sort(admissions)
	t.Logf("%d admitted in %v of the clock (%.0f/s against %v/s)", len(admissions), end, float64(len(admissions))/end.Seconds(), rate)
	if min := int(0.3 * rate * end.Seconds()); len(admissions) < min {
		t.Errorf("only %d admitted in %v: the fleet should get at least %d", len(admissions), end, min)
	}
	// Every window starting at an admission.
	worst := map[time.Duration]float64{}
	for _, w := range []time.Duration{250 * time.Millisecond, time.Second, 3 * time.Second, end} {
		for i, lo := range admissions {
			hi := lo + w
			n := 0
			for _, at := range admissions[i:] {
				if at > hi {
					break
				}
				n++
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
	// Each process heard both outages begin and end (each is shorter than
	// a second of the clock: no report in between), and every outage it
	// heard begin, end. A call's timeout is real time (go-redis's network
	// deadline), so a machine starved of CPU can make a healthy call time
	// out and start one more outage: reported and ended like the others,
	// and the windows above hold through it.
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
		if on < 2 || on != off {
			t.Errorf("process %d: the error handler heard %d fallback events and %d returns, want the 2 outages (or more), each ended", i, on, off)
		}
	}
}

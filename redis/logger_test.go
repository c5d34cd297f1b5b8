package redis_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// counting counts the lines it is given and passes them on.
type counting struct {
	n    *atomic.Int64
	next sluiceredis.Logging
}

func (c counting) Printf(ctx context.Context, format string, v ...any) {
	c.n.Add(1)
	if c.next != nil {
		c.next.Printf(ctx, format, v...)
	}
}

// With the recommended client options and QuietLogger, an outage logs
// nothing per failure (go-redis itself does), and the error handler hears
// it instead: the entry, then one report per second of the (fake) clock
// with a growing count of failures.
func TestQuietLoggerDuringAnOutage(t *testing.T) {
	srv := startRedis(t)
	if srv.External {
		t.Skip("SLUICE_REDIS_ADDR is set: this test must kill its own server")
	}
	var raw, passed atomic.Int64
	redis.SetLogger(counting{&raw, sluiceredis.QuietLogger(counting{&passed, nil})})
	t.Cleanup(func() { redis.SetLogger(sluiceredis.QuietLogger(nil)) })

	// PoolSize: more than the failed dials, so that go-redis never
	// switches to its own once-a-second redial.
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
		PoolSize: 10000})
	t.Cleanup(func() { client.Close() })
	clock := limitertest.NewClock(limitertest.Start)
	// The counts below are exact on the injected clock only if the one
	// decision before the outage is Redis's. The backend's timeout is real
	// time (go-redis's deadlines): at the default 50 ms, that decision's
	// dial and script load (EVALSHA, NOSCRIPT, EVAL) under -race on a
	// loaded machine can time out, and the backend rightly enters its
	// fallback before the server is stopped, deciding it locally: then
	// 101 and 201 local decisions at 1 s and 2 s are what happened, not a
	// miscount. A timeout far beyond any local round trip takes real time
	// out of the test; the outage's calls fail at once (connection
	// refused), so it bounds none of them.
	b, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix(uniquePrefix("quiet")), sluiceredis.WithClock(clock),
		sluiceredis.WithTimeout(5*time.Second), sluiceredis.WithProbeInterval(20*time.Millisecond),
		sluiceredis.WithLocalFallback(0.5))
	if err != nil {
		t.Fatal(err)
	}
	var ev events
	s, err := stack.New(perCaller10, stack.WithBackend(b), stack.WithClock(clock), stack.WithErrorHandler(ev.handle))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := sluice.NewKeys("caller", "c")
	if _, err := s.Allow(ctx, keys); err != nil {
		t.Fatal(err)
	}
	if fe := fallbacks(ev.take()); len(fe) != 0 {
		t.Fatalf("the decision before the outage was not Redis's (the counts below assume it): %v", fe[0])
	}
	srv.Stop()
	// 2.5 s of the clock in 10 ms steps: a probe (a failed dial) every
	// other step.
	for range 250 {
		if _, err := s.Allow(ctx, keys); err != nil {
			t.Fatal(err)
		}
		clock.Advance(10 * time.Millisecond)
	}
	if raw.Load() == 0 {
		t.Error("go-redis logged nothing while Redis was down: the test no longer shows what QuietLogger drops")
	}
	if passed.Load() != 0 {
		t.Errorf("QuietLogger let %d of go-redis's %d lines through during the outage", passed.Load(), raw.Load())
	}
	fe := fallbacks(ev.take())
	// The entry (one failure), then a report at 1 s and at 2 s: 50 and
	// 100 failed probes more, 100 and 200 local decisions.
	if len(fe) != 3 {
		t.Fatalf("the error handler heard %d fallback events, want the entry and a report at each second: %v", len(fe), fe)
	}
	for i, want := range []struct{ failures, local int64 }{{1, 0}, {51, 100}, {101, 200}} {
		if e := fe[i]; !e.Active || e.Failures != want.failures || e.Local != want.local {
			t.Errorf("fallback event %d: active %v, %d failures, %d local; want active, %d and %d", i, e.Active, e.Failures, e.Local, want.failures, want.local)
		}
	}
	// Other messages pass.
	sluiceredis.QuietLogger(counting{&passed, nil}).Printf(ctx, "redis: something else: %v", 1)
	if passed.Load() != 1 {
		t.Error("QuietLogger dropped a message that is not about dialing")
	}
}

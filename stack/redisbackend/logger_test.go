package redisbackend_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/redisbackend"
)

// counting counts the lines it is given and passes them on.
type counting struct {
	n    *atomic.Int64
	next redisbackend.Logging
}

func (c counting) Printf(ctx context.Context, format string, v ...any) {
	c.n.Add(1)
	if c.next != nil {
		c.next.Printf(ctx, format, v...)
	}
}

// With the recommended client options and QuietLogger, an outage logs
// nothing per failure (go-redis itself does), and the error handler hears
// it instead, at most once a second besides the transitions.
func TestQuietLoggerDuringAnOutage(t *testing.T) {
	srv := startRedis(t)
	if srv.External {
		t.Skip("SLUICE_REDIS_ADDR is set: this test must kill its own server")
	}
	var raw, passed atomic.Int64
	redis.SetLogger(counting{&raw, redisbackend.QuietLogger(counting{&passed, nil})})
	t.Cleanup(func() { redis.SetLogger(redisbackend.QuietLogger(nil)) })

	client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { client.Close() })
	b, err := redisbackend.New(client, redisbackend.WithKeyPrefix(uniquePrefix("quiet")),
		redisbackend.WithProbeInterval(20*time.Millisecond), redisbackend.WithLocalFallback(0.5))
	if err != nil {
		t.Fatal(err)
	}
	var ev events
	s, err := stack.New(perCaller10, stack.WithBackend(b), stack.WithErrorHandler(ev.handle))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := sluice.NewKeys("caller", "c")
	if _, err := s.Allow(ctx, keys); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	const outage = 1500 * time.Millisecond
	for t0 := time.Now(); time.Since(t0) < outage; time.Sleep(2 * time.Millisecond) {
		if _, err := s.Allow(ctx, keys); err != nil {
			t.Fatal(err)
		}
	}
	if raw.Load() == 0 {
		t.Error("go-redis logged nothing while Redis was down: the test no longer shows what QuietLogger drops")
	}
	if passed.Load() != 0 {
		t.Errorf("QuietLogger let %d of go-redis's %d lines through during the outage", passed.Load(), raw.Load())
	}
	fe := fallbacks(ev.take())
	// The entry, then at most one report a second.
	if len(fe) < 2 || len(fe) > 1+int(outage/time.Second)+1 || !fe[0].Active || fe[len(fe)-1].Failures <= fe[0].Failures {
		t.Errorf("the error handler heard %d fallback events, want the entry and one report a second with a growing count: %v", len(fe), fe)
	}
	// Other messages pass.
	redisbackend.QuietLogger(counting{&passed, nil}).Printf(ctx, "redis: something else: %v", 1)
	if passed.Load() != 1 {
		t.Error("QuietLogger dropped a message that is not about dialing")
	}
}

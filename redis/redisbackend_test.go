package redis_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// The engine's conformance suite, unchanged, through Redis.
func TestConformance(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	limitertest.Run(t, func(t *testing.T, cfg stack.Config, clock *limitertest.Clock) sluice.Limiter {
		b, err := sluiceredis.New(client, sluiceredis.WithClock(clock),
			sluiceredis.WithKeyPrefix(uniquePrefix("conformance")), sluiceredis.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// Fail closed so that any Redis error fails the case instead of
		// passing as an admission.
		s, err := stack.New(cfg, stack.WithClock(clock), stack.WithBackend(b), stack.WithFailClosed())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// threeLimits is a stack of three limits that all apply to one request.
var threeLimits = stack.Config{RateLimits: []stack.RateLimit{
	{RateLimitID: "per-target", DimensionKeys: []string{"targetName"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "*"}, Requests: []stack.Rate{{Rate: 1000, Period: stack.Second}}}}},
	{RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 500, Period: stack.Second}}}}},
	{RateLimitID: "per-tool", DimensionKeys: []string{"targetName", "toolName"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"targetName": "*", "toolName": "*"}, Requests: []stack.Rate{{Rate: 100, Period: stack.Second}}}}},
}}

var threeKeys = sluice.NewKeys("targetName", "t", "toolName", "x", "caller", "c")

func TestOneRoundTripPerDecisionAndNoScriptFallback(t *testing.T) {
	srv := startRedis(t)
	client, rt := newClient(t, srv.Addr)
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(uniquePrefix("rt")),
		sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s, err := stack.New(threeLimits, stack.WithClock(clock), stack.WithBackend(b), stack.WithFailClosed())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	allowed := 0
	before := rt.n.Load()
	for i := 0; i < 150; i++ {
		d, err := s.Allow(ctx, threeKeys)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
	}
	if got := rt.n.Load() - before; got != 150 {
		t.Errorf("150 decisions of three limits took %d round trips, want 150", got)
	}
	if allowed != 100 {
		t.Errorf("allowed %d of 150 against the 100/s tool limit, want 100", allowed)
	}

	// The server forgets the script: the next decision is EVALSHA, NOSCRIPT,
	// EVAL (two round trips) and correct; the one after is back to one.
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Millisecond) // one tool token
	before = rt.n.Load()
	d, err := s.Allow(ctx, threeKeys)
	if err != nil || !d.Allowed {
		t.Fatalf("after SCRIPT FLUSH: %+v, %v", d, err)
	}
	if got := rt.n.Load() - before; got != 2 {
		t.Errorf("after SCRIPT FLUSH the decision took %d round trips, want 2 (EVALSHA, EVAL)", got)
	}
	before = rt.n.Load()
	d, err = s.Allow(ctx, threeKeys)
	if err != nil || d.Allowed || d.LimitID != "per-tool" {
		t.Fatalf("next decision: %+v, %v; want a denial by per-tool", d, err)
	}
	if got := rt.n.Load() - before; got != 1 {
		t.Errorf("the decision after reloading took %d round trips, want 1", got)
	}
}

// Key lifetimes: a bucket's key expires a second after it would be full
// again; a bucket never taken from has no key, and one a give-back fills
// keeps its key for that second; a bucket without refill never expires.
func TestKeysExpireWhenFull(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(uniquePrefix("ttl")),
		sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op := stack.Op{Key: "k", Rate: 10, Period: time.Second, Burst: 10, Cost: 5}
	key := b.KeyPrefix() + "k"
	if out, err := b.Take(ctx, clock.Now(), []stack.Op{{Key: "k", Rate: 10, Period: time.Second, Burst: 10}}); err != nil || out.Denied != -1 || out.Remaining[0] != 10 {
		t.Fatalf("cost 0: %+v, %v", out, err)
	}
	if n := client.Exists(ctx, key).Val(); n != 0 {
		t.Errorf("a take of nothing stored a key")
	}
	if out, err := b.Take(ctx, clock.Now(), []stack.Op{op}); err != nil || out.Denied != -1 || out.Remaining[0] != 5 {
		t.Fatalf("take 5: %+v, %v", out, err)
	}
	// Five tokens at 10/s: full in 500 ms, so the key lives 1.5 s.
	if ttl := client.PTTL(ctx, key).Val(); ttl <= 1400*time.Millisecond || ttl > 1500*time.Millisecond {
		t.Errorf("PTTL = %v, want about 1.5s", ttl)
	}
	if err := b.Adjust(ctx, clock.Now(), []stack.Op{{Key: "k", Rate: 10, Period: time.Second, Burst: 10, Cost: -5, TakenAt: clock.Now()}}); err != nil {
		t.Fatal(err)
	}
	// Given back to full, the bucket keeps its key (it is full from this
	// instant on, not before: a caller with an older instant must not find
	// it full) and expires a second later.
	if ttl := client.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Second {
		t.Errorf("a bucket refunded to full: PTTL = %v, want at most 1s", ttl)
	}
	if out, err := b.Take(ctx, clock.Now(), []stack.Op{{Key: "k", Rate: 10, Period: time.Second, Burst: 10}}); err != nil || out.Denied != -1 || out.Remaining[0] != 10 {
		t.Errorf("after the refund to full: %+v, %v, want 10 left", out, err)
	}
	zero := stack.Op{Key: "z", Rate: 0, Period: time.Second, Burst: 3, Cost: 1}
	if out, err := b.Take(ctx, clock.Now(), []stack.Op{zero}); err != nil || out.Denied != -1 {
		t.Fatalf("rate 0 burst 3, first take: %+v, %v", out, err)
	}
	if ttl := client.PTTL(ctx, b.KeyPrefix()+"z").Val(); ttl != -1 {
		t.Errorf("a bucket that never refills has PTTL %v, want none (-1)", ttl)
	}
	// A key that is not a sluice bucket is an error naming it, not a panic.
	client.Set(ctx, b.KeyPrefix()+"junk", "hello", 0)
	_, err = b.Take(ctx, clock.Now(), []stack.Op{{Key: "junk", Rate: 1, Period: time.Second, Burst: 1, Cost: 1}})
	if err == nil || !strings.Contains(err.Error(), "junk") {
		t.Errorf("foreign key: err = %v", err)
	}
	if errors.Is(err, sluiceredis.ErrUnavailable) {
		t.Errorf("a script error was reported as Redis being unavailable: %v", err)
	}
}

func TestOptionsAreValidated(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	// Each error names the option and the value it was given, from New
	// and from NewPaceStore, which takes the same options.
	for name, tc := range map[string]struct {
		o    sluiceredis.Option
		want string
	}{
		"prefix with brace": {sluiceredis.WithKeyPrefix("a{b"), `sluice/redis: WithKeyPrefix("a{b")`},
		"tag with brace":    {sluiceredis.WithHashTag("x}"), `sluice/redis: WithHashTag("x}")`},
		"share above 1":     {sluiceredis.WithLocalFallback(1.5), "sluice/redis: WithLocalFallback(1.5)"},
		"share +Inf":        {sluiceredis.WithLocalFallback(math.Inf(1)), "sluice/redis: WithLocalFallback(+Inf)"},
	} {
		if _, err := sluiceredis.New(c, sluiceredis.WithKeyPrefix("ok"), tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New: err = %v, want it to contain %q", name, err, tc.want)
		}
		if _, err := sluiceredis.NewPaceStore(c, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewPaceStore: err = %v, want it to contain %q", name, err, tc.want)
		}
	}
	// The first invalid option is the one reported.
	if _, err := sluiceredis.New(c, sluiceredis.WithLocalFallback(2), sluiceredis.WithKeyPrefix("{")); err == nil || !strings.Contains(err.Error(), "WithLocalFallback(2)") {
		t.Errorf("two invalid options: err = %v, want the first (WithLocalFallback)", err)
	}
	if _, err := sluiceredis.New(nil); err == nil {
		t.Error("nil client accepted")
	}
	b, err := sluiceredis.New(c, sluiceredis.WithKeyPrefix("app"), sluiceredis.WithHashTag("fleet"))
	if err != nil || b.KeyPrefix() != "app:{fleet}:" {
		t.Errorf("KeyPrefix = %q, %v", b.KeyPrefix(), err)
	}
	// An unrepresentable bucket is a clear error before any network call.
	_, err = b.Take(context.Background(), time.Now(), []stack.Op{{Key: "k", Rate: 1, Period: 1500 * time.Nanosecond, Burst: 1, Cost: 1}})
	if err == nil || !strings.Contains(err.Error(), "microseconds") || errors.Is(err, sluiceredis.ErrUnavailable) {
		t.Errorf("sub-microsecond period: %v", err)
	}
}

package envoyrls_test

import (
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/envoyrls"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/redis/redistest"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func redisBackend(t testing.TB, addr string, clock *limitertest.Clock, prefix string) *sluiceredis.Backend {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(prefix),
		sluiceredis.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// countedRedisBackend is redisBackend counting the Redis calls it makes.
func countedRedisBackend(t testing.TB, addr string, clock *limitertest.Clock, prefix string) (*sluiceredis.Backend, *callCounter) {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	calls := &callCounter{}
	client.AddHook(calls)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(prefix),
		sluiceredis.WithTimeout(2*time.Second), sluiceredis.WithMaxBatch(1))
	if err != nil {
		t.Fatal(err)
	}
	return b, calls
}

// Two rate limit services on one Redis share one limit: a fleet behaves
// like one service, all or nothing across descriptors included.
func TestRedisFleetSharesOneLimit(t *testing.T) {
	srv := redistest.Start(t)
	clock := limitertest.NewClock(limitertest.Start)
	cfg := load(t, "api.yaml", twoLimits)
	var clients []rlsv3.RateLimitServiceClient
	for range 2 {
		s := envoyrls.New(cfg, envoyrls.WithClock(clock), envoyrls.WithBackend(redisBackend(t, srv.Addr, clock, "fleet")))
		clients = append(clients, serve(t, s))
	}
	okCount := 0
	for i := range 20 {
		if ask(t, clients[i%2], "api", desc("tenant", "f")).OverallCode == ok {
			okCount++
		}
	}
	if okCount != 5 {
		t.Fatalf("two services on one Redis admitted %d, want the limit of 5", okCount)
	}
	// All or nothing through Redis: the route limit denies, the tenant
	// keeps its units.
	for i := range 6 {
		ask(t, clients[i%2], "api", desc("tenant", "g"), desc("route", "/g"))
	}
	r := ask(t, clients[0], "api", desc("tenant", "g"))
	if r.Statuses[0].LimitRemaining != 2 {
		t.Fatalf("tenant after 2 admitted and 4 denied requests: %v, want 2 left", r)
	}
	// Exact refill across the fleet: one unit every 12 s.
	clock.Advance(12 * time.Second)
	if got := countOK(t, clients[1], 3, "api", desc("tenant", "f")); got != 1 {
		t.Errorf("12 s later: %d OK, want 1", got)
	}
	r = ask(t, clients[0], "api", desc("tenant", "f"))
	if r.OverallCode != over || r.Statuses[0].DurationUntilReset.AsDuration() != 12*time.Second {
		t.Errorf("spent again: %v, want over for 12s", r)
	}
}

// When Redis is down the service fails open by default (OK, the error in
// the metadata and to the handler) and OVER_LIMIT with WithFailClosed.
func TestBackendDownFailsOpenOrClosed(t *testing.T) {
	srv := redistest.Start(t)
	if srv.External {
		t.Skip("cannot stop an external Redis")
	}
	clock := limitertest.NewClock(limitertest.Start)
	cfg := load(t, "api.yaml", twoLimits)
	var heard []error
	open := envoyrls.New(cfg, envoyrls.WithClock(clock), envoyrls.WithBackend(redisBackend(t, srv.Addr, clock, "down")),
		envoyrls.WithErrorHandler(func(err error) { heard = append(heard, err) }))
	closed := envoyrls.New(cfg, envoyrls.WithClock(clock), envoyrls.WithBackend(redisBackend(t, srv.Addr, clock, "down")), envoyrls.WithFailClosed())
	co, cc := serve(t, open), serve(t, closed)
	if r := ask(t, cc, "api", desc("tenant", "x")); r.OverallCode != ok {
		t.Fatalf("with Redis up: %v", r)
	}
	srv.Stop()
	r := ask(t, co, "api", desc("tenant", "x"))
	if r.OverallCode != ok || meta(r, envoyrls.MetaError) == nil || len(heard) != 1 {
		t.Errorf("fail-open: %v; handler heard %v", r, heard)
	}
	r = ask(t, cc, "api", desc("tenant", "x"), desc("nolimit", "y"))
	if e, _ := meta(r, envoyrls.MetaError).(string); r.OverallCode != over || r.Statuses[0].Code != over || r.Statuses[1].Code != ok || e == "" {
		t.Errorf("fail-closed: %v", r)
	}
	// A request no rule applies to needs no backend: OK either way.
	if r := ask(t, cc, "api", desc("nolimit", "y")); r.OverallCode != ok || r.DynamicMetadata != nil {
		t.Errorf("no rule, backend down: %v", r)
	}
}

// A reload that changes a rule's rate keeps what its buckets hold (capped
// at the new burst), in memory and on Redis: 3 of 5 taken, then 10 a
// minute, leaves 2, not a fresh 10.
func TestReloadWithANewRateKeepsUnits(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			clock := limitertest.NewClock(limitertest.Start)
			opts := []envoyrls.Option{envoyrls.WithClock(clock)}
			if backend == "redis" {
				opts = append(opts, envoyrls.WithBackend(redisBackend(t, redistest.Start(t).Addr, clock, "rate")))
			}
			srv := envoyrls.New(load(t, "api.yaml", twoLimits), opts...)
			c := serve(t, srv)
			if got := countOK(t, c, 3, "api", desc("tenant", "k")); got != 3 {
				t.Fatalf("%d OK", got)
			}
			srv.Reload(load(t, "api.yaml", strings.Replace(twoLimits, "requests_per_unit: 5}", "requests_per_unit: 10}", 1)))
			r := ask(t, c, "api", hits(desc("tenant", "k"), 0))
			if r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 10 || r.Statuses[0].LimitRemaining != 2 {
				t.Fatalf("after the reload: %v, want 2 left of 10", r)
			}
			if got := countOK(t, c, 4, "api", desc("tenant", "k")); got != 2 {
				t.Errorf("after the reload: %d OK, want 2", got)
			}
		})
	}
}

// is_negative_hits gives units back, never above the limit, in memory and
// on Redis. The protocol does not say when the units were taken: the
// give-back is bounded as if they were taken at the request's instant
// (bucket.Grant), which at the latest instant is a plain give-back capped
// at a full bucket.
func TestNegativeHitsGiveBack(t *testing.T) {
	give := func(n uint64) *ratelimitv3.RateLimitDescriptor {
		d := hits(desc("tenant", "n"), n)
		d.IsNegativeHits = true
		return d
	}
	for _, backend := range []string{"redis", "memory"} {
		t.Run(backend, func(t *testing.T) {
			clock := limitertest.NewClock(limitertest.Start)
			opts := []envoyrls.Option{envoyrls.WithClock(clock)}
			if backend == "redis" {
				opts = append(opts, envoyrls.WithBackend(redisBackend(t, redistest.Start(t).Addr, clock, "give")))
			}
			c := serve(t, envoyrls.New(load(t, "api.yaml", twoLimits), opts...))
			if got := countOK(t, c, 7, "api", desc("tenant", "n")); got != 5 {
				t.Fatalf("%d OK, want 5", got)
			}
			if r := ask(t, c, "api", give(2)); r.OverallCode != ok || r.Statuses[0].LimitRemaining != 2 {
				t.Fatalf("give back 2: %v", r)
			}
			if got := countOK(t, c, 5, "api", desc("tenant", "n")); got != 2 {
				t.Errorf("after giving back 2: %d OK, want 2", got)
			}
			if r := ask(t, c, "api", give(50)); r.Statuses[0].LimitRemaining != 5 {
				t.Fatalf("give back 50 to a limit of 5: %v", r)
			}
			if got := countOK(t, c, 8, "api", desc("tenant", "n")); got != 5 {
				t.Errorf("a give-back filled beyond the limit: %d OK, want 5", got)
			}
		})
	}
}

// Command fleet measures seed 003: why a 150/s limit split over six pods
// answers about 6 429s per second to traffic averaging 136 requests per
// second, and what one limit shared through Redis answers instead.
//
// With the defaults (600 simulated seconds, seed 3) it prints 5.98 429s/s
// for the sharded windows (4.81/s on first attempts) and 0.17/s for the
// sharded buckets; seeds 1 to 4 give 5.89 to 6.37 and 0.07 to 0.17. The
// seed observed 7.27/s and its Poisson model predicts 6.85/s
// (examples/shardmodel): the model assumes an immediate retry meets the same
// full window and is denied again, so it counts every denial twice, while
// here the retry goes to another pod, which usually has room left in its
// window (about a quarter of the retries are denied).
//
// The traffic is simulated on a fake clock (nothing sleeps): Poisson
// arrivals at 136.28 requests/s (the seed's observed 129.01 + 7.27),
// each sent to one of six pods at random, as a load balancer does. A request
// denied with 429 is retried once, at once, on another random pod (the
// seed's retry_num = 2); every denied attempt counts as a 429.
//
// Four limiters decide:
//
//   - sharded windows: the seed's limiter. Each pod counts requests per
//     calendar second and admits 26 (150/6 = 25, plus the seed's +1 so that
//     six pods together still admit a little more than 150 rather than less).
//   - sharded buckets: each pod a GCRA bucket of 25/s holding 26
//     (bucket.New(25, 26)): the same split, with sluice's algorithm.
//   - shared: one 150/s limit for the whole fleet, each pod a sluice Stack
//     deciding through Redis (package sluice/redis): six pods behave as one.
//   - shared, overloaded: the same at 170/s, to show the shared limit does
//     deny when the fleet's traffic is above it.
//
// Run it with or without a Redis:
//
//	go run ./examples/fleet                         # the in-memory runs only
//	go run ./examples/fleet -redis 127.0.0.1:6379   # and the shared ones
//
// Flags: -redis ADDR (the shared runs; checked with PING at startup, an
// unreachable Redis is one line naming it and the cause, exit 1),
// -seconds N (simulated seconds per run, 10 to 86400, default 600),
// -seed N (random seed, default 3).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/bucket"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
)

const (
	pods    = 6
	arrival = 136.28 // requests per second
	limit   = 150    // per second, for the fleet
)

// decider decides one attempt on one pod at an instant of the fake clock.
type decider func(pod int, at time.Time) (bool, error)

// Result is one simulated run.
type Result struct {
	Name     string
	Seconds  float64
	Requests int // original requests
	Attempts int // including retries
	Denied   int // 429s, over all attempts
	First    int // 429s on first attempts
}

// PerSecond is the 429s per simulated second.
func (r Result) PerSecond() float64 { return float64(r.Denied) / r.Seconds }

// FirstPerSecond is the 429s on first attempts per simulated second.
func (r Result) FirstPerSecond() float64 { return float64(r.First) / r.Seconds }

// clock is the simulation's time, shared by the pods and the Redis backend.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// Sleep advances the simulated time by d instead of waiting (nothing in
// this program sleeps; it makes clock a sluice.Clock).
func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	if d > 0 {
		c.now = c.now.Add(d)
	}
	return ctx.Err()
}

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// simulate runs Poisson arrivals at lambda per second for seconds on c,
// with one retry per 429 on another pod.
func simulate(name string, seconds, lambda float64, seed uint64, c *clock, decide decider) (Result, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	res := Result{Name: name, Seconds: seconds}
	end := start.Add(time.Duration(seconds * float64(time.Second)))
	c.now = start
	for {
		c.now = c.now.Add(time.Duration(rng.ExpFloat64() / lambda * float64(time.Second)))
		if !c.now.Before(end) {
			return res, nil
		}
		res.Requests++
		pod := rng.IntN(pods)
		for attempt := 0; attempt < 2; attempt++ {
			res.Attempts++
			ok, err := decide(pod, c.now)
			if err != nil {
				return res, err
			}
			if ok {
				break
			}
			res.Denied++
			if attempt == 0 {
				res.First++
			}
			pod = (pod + 1 + rng.IntN(pods-1)) % pods // another pod
		}
	}
}

// shardedWindows is the seed's limiter: per pod, 26 per calendar second.
func shardedWindows() decider {
	var window [pods]int64
	var count [pods]int
	return func(pod int, at time.Time) (bool, error) {
		if w := at.Unix(); w != window[pod] {
			window[pod], count[pod] = w, 0
		}
		if count[pod] >= limit/pods+1 {
			return false, nil
		}
		count[pod]++
		return true, nil
	}
}

// shardedBuckets gives each pod its own GCRA bucket of 25/s holding 26.
func shardedBuckets() decider {
	var bs [pods]*bucket.Bucket
	for i := range bs {
		bs[i] = bucket.New(rate.Limit(limit/pods), limit/pods+1)
	}
	return func(pod int, at time.Time) (bool, error) { return bs[pod].AllowAt(at, 1), nil }
}

// shared gives every pod its own Redis client and Stack on one 150/s limit
// (burst 150, the default) through Redis, reading the simulation's clock.
func shared(addr, prefix string, c *clock) (decider, func(), error) {
	cfg := stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "service", DimensionKeys: []string{"service"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"service": "api"},
			Requests: []stack.Rate{{Rate: limit, Period: stack.Second}}}}}}}
	var stacks [pods]*stack.Stack
	var clients []*redis.Client
	closeAll := func() {
		for _, cl := range clients {
			cl.Close()
		}
	}
	for i := range stacks {
		cl := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		clients = append(clients, cl)
		b, err := sluiceredis.New(cl, sluiceredis.WithClock(c), sluiceredis.WithKeyPrefix(prefix),
			sluiceredis.WithTimeout(time.Second))
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		if stacks[i], err = stack.New(cfg, stack.WithClock(c), stack.WithBackend(b), stack.WithFailClosed()); err != nil {
			closeAll()
			return nil, nil, err
		}
	}
	keys := sluice.NewKeys("service", "api")
	return func(pod int, at time.Time) (bool, error) {
		d, err := stacks[pod].Allow(context.Background(), keys)
		return d.Allowed, err
	}, closeAll, nil
}

// run simulates seconds of traffic with each limiter and prints 429s/s.
// addr == "" skips the Redis runs.
func run(w io.Writer, addr string, seconds float64, seed uint64) ([]Result, error) {
	var results []Result
	c := &clock{}
	add := func(name string, lambda, secs float64, d decider) error {
		r, err := simulate(name, secs, lambda, seed, c, d)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		results = append(results, r)
		fmt.Fprintf(w, "%-22s %6.2f req/s %4.0f s  %7.2f 429/s  (%.2f/s on first attempts)\n",
			r.Name, lambda, r.Seconds, r.PerSecond(), r.FirstPerSecond())
		return nil
	}
	if err := add("sharded windows", arrival, seconds, shardedWindows()); err != nil {
		return nil, err
	}
	if err := add("sharded buckets", arrival, seconds, shardedBuckets()); err != nil {
		return nil, err
	}
	if addr == "" {
		fmt.Fprintln(w, "(no -redis address: shared runs skipped)")
		return results, nil
	}
	prefix := fmt.Sprintf("fleet-%d-%d", os.Getpid(), time.Now().UnixNano())
	d, closeAll, err := shared(addr, prefix, c)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	if err := add("shared through redis", arrival, seconds, d); err != nil {
		return nil, err
	}
	d2, close2, err := shared(addr, prefix+"-over", c)
	if err != nil {
		return nil, err
	}
	defer close2()
	if err := add("shared, overloaded", 170, seconds/10, d2); err != nil {
		return nil, err
	}
	return results, nil
}

// quietLogger drops go-redis's own log lines: a failure is reported once,
// by the example, with its cause.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quietLogger{})
	if err := runArgs(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "fleet:", err)
		}
		os.Exit(1)
	}
}

// runArgs parses args, checks them (and Redis, when named), and runs.
func runArgs(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("redis", "", "Redis address for the shared runs (host:port; empty: skip them)")
	seconds := fs.Float64("seconds", 600, "simulated seconds per run, 10 to 86400")
	seed := fs.Uint64("seed", 3, "random seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q: all input is given by flags", fs.Arg(0))
	case math.IsNaN(*seconds) || *seconds < 10 || *seconds > 86400:
		// 10: the overloaded run simulates a tenth of it.
		return fmt.Errorf("-seconds %v: must be between 10 and 86400", *seconds)
	}
	if *addr != "" {
		if err := pingRedis(*addr); err != nil {
			return err
		}
	}
	_, err := run(stdout, *addr, *seconds, *seed)
	return err
}

// pingRedis says, in one error naming addr, why the Redis server there does
// not answer PING within 2 s.
func pingRedis(addr string) error {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 2 * time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := cl.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot reach Redis at -redis %s: %w", addr, err)
	}
	return nil
}

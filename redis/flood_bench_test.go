package redis_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
)

// BenchmarkFlood is issue #39's flood: 4 backends (4 processes of a fleet,
// each on its own connections) share one redis-server; in each, 64
// goroutines hammer one key at 10 times its limit (the limit is the
// fleet's, 200/s with a burst of 200, so each process offers 2000/s and the
// fleet 8000/s), beside 4 goroutines per process deciding on other keys
// within their limits (500/s per process). It runs for
// SLUICE_FLOOD_SECONDS (default 3) with the near-cache of denials on and
// then off, and reports, per mode: the flooded key's decisions that
// reached Redis per second (fleet-wide), the script calls per second
// (EVALSHA, batched, all keys, from INFO commandstats), Redis CPU (used_cpu
// user+sys per second of the run), p50 and p99 of a denied decision, and a
// ledger: the admissions on the flooded key, against burst + rate × the
// run's length, and the most in any 1 s window of completion times.
//
//	cd redis && go test -run '^$' -bench Flood -benchtime 1x
func BenchmarkFlood(b *testing.B) {
	secs := 3.0
	if s := os.Getenv("SLUICE_FLOOD_SECONDS"); s != "" {
		if v, err := strconv.ParseFloat(s, 64); err == nil && v > 0 {
			secs = v
		}
	}
	srv := startRedis(b)
	for _, mode := range []string{"cache", "nocache"} {
		b.Run(mode, func(b *testing.B) {
			r := runFlood(b, srv.Addr, mode == "cache", time.Duration(secs*float64(time.Second)))
			b.ReportMetric(r.floodCallsPerSec, "flood-calls/s")
			b.ReportMetric(r.evalPerSec, "evalsha/s")
			b.ReportMetric(r.cpu*100, "redis-cpu-%")
			b.ReportMetric(float64(r.p50.Microseconds()), "deny-p50-µs")
			b.ReportMetric(float64(r.p99.Microseconds()), "deny-p99-µs")
			b.ReportMetric(r.decisionsPerSec, "flood-decisions/s")
			b.Logf("%s: %.0f flood decisions/s, %.0f of them to Redis/s, %.0f EVALSHA/s, Redis CPU %.0f%%, denied p50 %v p99 %v; "+
				"ledger: %d admitted on the flooded key in %.2fs (bound %d), at most %d in a 1 s window (limit 200 + burst 200)",
				mode, r.decisionsPerSec, r.floodCallsPerSec, r.evalPerSec, r.cpu*100, r.p50, r.p99,
				r.admitted, r.elapsed.Seconds(), r.bound, r.maxWindow)
			if r.admitted > r.bound {
				b.Errorf("%d admitted, above burst + rate × run (%d)", r.admitted, r.bound)
			}
		})
	}
}

type floodResult struct {
	decisionsPerSec, floodCallsPerSec, evalPerSec, cpu float64
	p50, p99                                           time.Duration
	admitted, bound                                    int64
	maxWindow                                          int
	elapsed                                            time.Duration
}

const (
	floodRate     = 200
	floodBackends = 4
	floodG        = 64
	otherG        = 4
)

func runFlood(b *testing.B, addr string, cache bool, d time.Duration) floodResult {
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	prefix := uniquePrefix("flood")
	floodOp := stack.Op{Key: "flooded", Rate: floodRate, Period: time.Second, Burst: floodRate, Cost: 1}
	var backends []*sluiceredis.Backend
	for range floodBackends {
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 8})
		defer c.Close()
		opts := []sluiceredis.Option{sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithTimeout(time.Second)}
		if !cache {
			opts = append(opts, sluiceredis.WithoutDenialCache())
		}
		be, err := sluiceredis.New(c, opts...)
		if err != nil {
			b.Fatal(err)
		}
		if err := be.Load(ctx); err != nil {
			b.Fatal(err)
		}
		backends = append(backends, be)
	}
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	cpu0 := redisCPU(b, admin)
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		lat       []time.Duration
		admits    []time.Duration // completion instants since start
		decisions atomic.Int64
	)
	start := time.Now()
	stop := start.Add(d)
	perG := time.Duration(int64(time.Second) * floodG / (10 * floodRate)) // 10× the limit per process
	for bi, be := range backends {
		for g := range floodG {
			wg.Go(func() {
				ops := []stack.Op{floodOp}
				var myLat, myAdmits []time.Duration
				next := start.Add(time.Duration(g) * perG / floodG)
				for {
					now := time.Now()
					if now.After(stop) {
						break
					}
					if now.Before(next) {
						time.Sleep(next.Sub(now))
					}
					next = next.Add(perG)
					t0 := time.Now()
					out, err := be.Take(ctx, t0, ops)
					el := time.Since(t0)
					decisions.Add(1)
					if err != nil {
						b.Error(err)
						return
					}
					if out.Denied >= 0 {
						myLat = append(myLat, el)
					} else {
						myAdmits = append(myAdmits, time.Since(start))
					}
				}
				mu.Lock()
				lat = append(lat, myLat...)
				admits = append(admits, myAdmits...)
				mu.Unlock()
			})
		}
		for g := range otherG {
			wg.Go(func() {
				ops := []stack.Op{{Key: fmt.Sprintf("other-%d-%d", bi, g), Rate: 1000, Period: time.Second, Burst: 1000, Cost: 1}}
				every := time.Second / (500 / otherG)
				next := start
				for {
					now := time.Now()
					if now.After(stop) {
						return
					}
					if now.Before(next) {
						time.Sleep(next.Sub(now))
					}
					next = next.Add(every)
					if _, err := be.Take(ctx, now, ops); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1 := redisCPU(b, admin)
	evals := commandCalls(b, admin, "evalsha")
	var hits int64
	for _, be := range backends {
		h, _ := be.DenialCacheStats()
		hits += h
	}
	slices.Sort(lat)
	slices.Sort(admits)
	r := floodResult{elapsed: elapsed, admitted: int64(len(admits)), cpu: (cpu1 - cpu0) / elapsed.Seconds()}
	r.decisionsPerSec = float64(decisions.Load()) / elapsed.Seconds()
	r.floodCallsPerSec = float64(decisions.Load()-hits) / elapsed.Seconds()
	r.evalPerSec = float64(evals) / elapsed.Seconds()
	r.bound = floodRate + int64(floodRate*elapsed.Seconds()+0.999)
	if len(lat) > 0 {
		r.p50, r.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	for i, j := 0, 0; i < len(admits); i++ {
		for admits[i]-admits[j] >= time.Second {
			j++
		}
		r.maxWindow = max(r.maxWindow, i-j+1)
	}
	return r
}

// redisCPU returns the server's used_cpu_user + used_cpu_sys, in seconds.
func redisCPU(b *testing.B, c *redis.Client) float64 {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return sum
}

// commandCalls returns INFO commandstats' calls of cmd since CONFIG RESETSTAT.
func commandCalls(b *testing.B, c *redis.Client, cmd string) int64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

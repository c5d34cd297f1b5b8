package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/examples/shardmodel/model"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/pace"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
)

// Seed 003's fleet: six processes, 150 requests per second, and the
// traffic that met it: 129.01 successes and 7.27 rejections per second,
// 136.28 arrivals per second. The simulation sends all of them as Poisson
// arrivals and retries nothing (a refused request is counted, not sent
// again). The seed's own reading, which examples/shardmodel takes by
// default, is different: each rejection is retried once at once, so the
// original requests are 129.01 + 7.27/2 = 132.645 per second.
const (
	processes = 6
	limit     = 150
	arrivals  = 129.01 + 7.27
	originals = 129.01 + 7.27/2
)

// FleetRun is the outcome of one simulated fleet run.
type FleetRun struct {
	Name string
	// Requests is how many requests the callers made; Rejected how many
	// the pacers refused because their limit had no room (the local 429s);
	// Server429 how many the server throttled; OK how many it served.
	Requests, Rejected, Server429, OK int
	Seconds                           int
}

// RejectedPerSecond is the local refusals per second.
func (r FleetRun) RejectedPerSecond() float64 { return float64(r.Rejected) / float64(r.Seconds) }

// fleetLimits configures one run: what limiter each process's pacer gets.
type fleetLimits struct {
	name    string
	options func(process int) ([]pace.Option, error)
	// failures, when set, counts the errors of the run's limiters.
	failures *limiterFailures
}

// limiterFailures counts a limiter's errors. pace refuses a request its
// limiter could not decide on (RoundTrip returns the error); a
// run whose limiter failed is reported as failed, not as a normal row.
type limiterFailures struct {
	n     atomic.Int64
	first atomic.Pointer[error]
}

// wrap returns l, counting its errors.
func (f *limiterFailures) wrap(l sluice.Limiter) sluice.Limiter {
	return sluice.LimiterFunc(func(ctx context.Context, keys sluice.Keys) (sluice.Decision, error) {
		d, err := l.Allow(ctx, keys)
		if err != nil {
			f.n.Add(1)
			f.first.CompareAndSwap(nil, &err)
		}
		return d, err
	})
}

// err is nil if the limiter never failed.
func (f *limiterFailures) err() error {
	if f == nil || f.n.Load() == 0 {
		return nil
	}
	return fmt.Errorf("the limiter could not decide %d times (requests refused), the first: %w", f.n.Load(), *f.first.Load())
}

// runFleet simulates seconds of seed 003's traffic against a 150/s server
// (httplimit over a stack) on a simulated clock, with each process's pacer
// refusing what its limit has no room for (no waiting, as the seed's
// limiters did). It runs six independent 25/s limits, one 150/s limiter
// shared in memory, and one shared through Redis when addr is set, and
// prints them with the shard model's prediction for the independent ones.
func runFleet(w io.Writer, addr string, seconds int, seed uint64) ([]FleetRun, error) {
	clk := newVClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	sharedCfg := []byte(`{"rateLimits": [{"rateLimitId": "fleet", "dimensionKeys": ["upstream"],
	  "entries": [{"dimensions": {"upstream": "*"}, "requests": [{"rate": 150, "period": "second"}]}]}]}`)
	memShared, err := stack.Load(sharedCfg, stack.WithClock(clk))
	if err != nil {
		return nil, err
	}
	runs := []fleetLimits{
		{name: "six independent 25/s limits", options: func(int) ([]pace.Option, error) {
			return []pace.Option{pace.WithLimit(limit/processes, time.Second)}, nil
		}},
		{name: "one 150/s limit shared in memory", options: func(int) ([]pace.Option, error) {
			return []pace.Option{pace.WithLimiter(memShared, nil)}, nil
		}},
	}
	var clients []*redis.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	if addr != "" {
		prefix := fmt.Sprintf("pace-fleet-%d:", time.Now().UnixNano())
		failures := &limiterFailures{}
		runs = append(runs, fleetLimits{"one 150/s limit shared through Redis", func(int) ([]pace.Option, error) {
			// Each process has its own client and stack: only Redis is shared.
			cl := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
			clients = append(clients, cl)
			b, err := sluiceredis.New(cl, sluiceredis.WithClock(clk), sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithTimeout(time.Second))
			if err != nil {
				return nil, err
			}
			s, err := stack.Load(sharedCfg, stack.WithClock(clk), stack.WithBackend(b), stack.WithFailClosed())
			if err != nil {
				return nil, err
			}
			return []pace.Option{pace.WithLimiter(failures.wrap(s), nil)}, nil
		}, failures})
	}
	var out []FleetRun
	for _, lim := range runs {
		r, err := simulateFleet(clk, lim, seconds, seed)
		if err == nil {
			err = lim.failures.err()
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", lim.name, err)
		}
		out = append(out, r)
	}
	pr, err := model.Predict(model.Scenario{Rate: arrivals, Limit: limit, Shards: processes})
	if err != nil {
		return out, err
	}
	pr1, err := model.Predict(model.Scenario{Rate: originals, Limit: limit, Shards: processes, Retries: 1})
	if err != nil {
		return out, err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "limits (%d simulated s, %.2f req/s Poisson)\trequests\trefused/s\tserver 429/s\tserved/s\n", seconds, arrivals)
	for _, r := range out {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.1f\n", r.Name, r.Requests, r.RejectedPerSecond(),
			float64(r.Server429)/float64(seconds), float64(r.OK)/float64(seconds))
	}
	fmt.Fprintf(tw, "shard model, six 1-s windows of %d, %.2f/s, no retry\t\t%.2f\t\t\n", pr.Border, arrivals, pr.Rejected)
	fmt.Fprintf(tw, "shard model, %.3f/s + one immediate retry (examples/shardmodel)\t\t%.4f\t\t\n", originals, pr1.Rejected)
	if err := tw.Flush(); err != nil {
		return out, err
	}
	_, err = fmt.Fprintf(w, `
The runs send %.2f/s (the seed's successes and rejections together) and
retry nothing; the model row to compare them with is the first: %.2f/s
refused by six fixed 1-s windows. The second is examples/shardmodel's
scenario, the seed read as %.3f/s of original requests with each rejection
retried once at once: %.4f/s, the figure examples/shardmodel prints. (A
retry added on top of the %.2f/s of arrivals would count the retries twice:
%.2f/s.) The independent limits above refuse far fewer than either: a
pacer's limit is a token bucket (burst %d, refilled continuously), not a
window that starts over each second (shardmodel's "sluice bucket" column).
`, arrivals, pr.Rejected, originals, pr1.Rejected, arrivals, mustPredictRetry(), limit/processes)
	return out, err
}

// mustPredictRetry is what the model gives for the arrivals with a retry
// on top, which counts the retries twice (this example printed it as
// "the seed's" before v0.2).
func mustPredictRetry() float64 {
	pr, err := model.Predict(model.Scenario{Rate: arrivals, Limit: limit, Shards: processes, Retries: 1})
	if err != nil {
		return math.NaN()
	}
	return pr.Rejected
}

// simulateFleet runs one fleet: each process gets Poisson arrivals at
// arrivals/processes per second and sends each through its own pacer.
func simulateFleet(clk *vclock, lim fleetLimits, seconds int, seed uint64) (FleetRun, error) {
	r := FleetRun{Name: lim.name, Seconds: seconds}
	server, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "server", "dimensionKeys": ["ip"],
	  "entries": [{"dimensions": {"ip": "*"}, "requests": [{"rate": 150, "period": "second"}]}]}]}`), stack.WithClock(clk))
	if err != nil {
		return r, err
	}
	srv := httptest.NewServer(httplimit.New(server, httplimit.ClientIPKey("ip", nil))(http.HandlerFunc(
		func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })))
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: processes}
	defer base.CloseIdleConnections()

	start := clk.Now()
	end := start.Add(time.Duration(seconds) * time.Second)
	type tally struct{ requests, rejected, throttled, ok int }
	tallies := make([]tally, processes)
	errs := make([]error, processes)
	trs := make([]*pace.Transport, processes)
	for p := range processes {
		opts, err := lim.options(p)
		if err != nil {
			return r, err
		}
		opts = append(opts, pace.WithClock(clk), pace.WithoutWait())
		trs[p] = pace.New(base, opts...)
	}
	// The processes start from one active goroutine, so that simulated
	// time cannot move until all of them are running.
	clk.Go(func() {
		for p := range processes {
			tr := trs[p]
			rng := rand.New(rand.NewPCG(seed, uint64(p)))
			clk.Go(func() {
				ctx := context.Background()
				t := &tallies[p]
				for {
					gap := time.Duration(rng.ExpFloat64() / (arrivals / processes) * float64(time.Second))
					_ = clk.Sleep(ctx, gap)
					if !clk.Now().Before(end) {
						return
					}
					t.requests++
					req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
					res, err := tr.RoundTrip(req)
					switch {
					case errors.Is(err, pace.ErrMaxWait):
						t.rejected++
					case err != nil:
						errs[p] = err
						return
					default:
						_, _ = io.Copy(io.Discard, res.Body)
						res.Body.Close()
						switch res.StatusCode {
						case http.StatusOK:
							t.ok++
						case http.StatusTooManyRequests:
							t.throttled++
						}
					}
				}
			})
		}
	})
	clk.Wait()
	for p, t := range tallies {
		if errs[p] != nil {
			return r, errs[p]
		}
		r.Requests += t.requests
		r.Rejected += t.rejected
		r.Server429 += t.throttled
		r.OK += t.ok
	}
	return r, nil
}

// Command pace shows what pacing outbound calls buys, in two experiments.
//
// The first calls a rate-limited server from a few workers that send as
// fast as they can, once through a plain http.Transport and once through a
// pace.Transport that knows nothing but what the server's headers say, and
// prints the 429s and the throughput of each run side by side. Without
// -url it starts its own upstream on a loopback port: 5 requests per second
// per API key, answering with RateLimit headers and, once over, 429 with
// Retry-After in OpenAI's format (examples/http's /hello):
//
//	go run ./examples/pace
//	go run ./examples/http -addr 127.0.0.1:8080 -format openai &
//	go run ./examples/pace -url http://127.0.0.1:8080/hello
//
// The second (-fleet) reproduces seed 003 from the client side on a
// simulated clock: six processes calling one 150/s server with Poisson
// arrivals at 136.28/s, each with its own 25/s limit, or all sharing one
// 150/s limiter (in memory, and through Redis with -redis), and compares
// the local limits' rejections with the shard model's prediction, both for
// the simulated traffic (136.28/s, no retry: 4.34/s refused by fixed 1-s
// windows) and for examples/shardmodel's reading of the seed (132.645/s of
// original requests, each rejection retried once: 6.8531/s); the output
// says why the pacers' own token buckets refuse fewer than either:
//
//	go run ./examples/pace -fleet
//	go run ./examples/pace -fleet -redis 127.0.0.1:6379
//
// Flags:
//
//	-url URL        rate-limited URL to call (default: an upstream of its own)
//	-workers N      concurrent callers, 1 to 1000 (default 8)
//	-duration D     length of each run, 100ms to 10m (default 2s)
//	-fleet          run the six-process fleet simulation instead
//	-redis ADDR     with -fleet: also share the limit through this Redis
//	-seconds N      with -fleet: simulated seconds, 1 to 3600 (default 60)
//
// An unreachable -url or -redis, or a flag out of range, is reported in one
// line and the exit status is 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/pace"
	"github.com/sluicehq/sluice/stack"
)

// quietLogger drops go-redis's own log lines: a failure is reported once,
// by the example, with its cause.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quietLogger{})
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "pace:", err)
		}
		os.Exit(1)
	}
}

// run parses args and runs the experiment they name, printing on stdout
// (the flag package's usage goes to stderr).
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "rate-limited URL to call (empty: start an upstream of its own on loopback)")
	workers := fs.Int("workers", 8, "concurrent callers, 1 to 1000")
	duration := fs.Duration("duration", 2*time.Second, "length of each run, 100ms to 10m")
	fleet := fs.Bool("fleet", false, "run the six-process fleet simulation instead")
	redisAddr := fs.String("redis", "", "with -fleet: Redis address host:port for a shared limiter (empty: in memory only)")
	seconds := fs.Int("seconds", 60, "with -fleet: simulated seconds, 1 to 3600")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q: all input is given by flags", fs.Arg(0))
	case *workers < 1 || *workers > 1000:
		return fmt.Errorf("-workers %d: must be between 1 and 1000", *workers)
	case *duration < 100*time.Millisecond || *duration > 10*time.Minute:
		return fmt.Errorf("-duration %v: must be between 100ms and 10m", *duration)
	case *seconds < 1 || *seconds > 3600:
		return fmt.Errorf("-seconds %d: must be between 1 and 3600", *seconds)
	case *redisAddr != "" && !*fleet:
		return errors.New("-redis is for the fleet simulation: add -fleet")
	}
	if *fleet {
		if *redisAddr != "" {
			if err := pingRedis(*redisAddr); err != nil {
				return err
			}
		}
		_, err := runFleet(stdout, *redisAddr, *seconds, 1)
		return err
	}
	target := *url
	if target == "" {
		srv, err := startUpstream()
		if err != nil {
			return err
		}
		defer srv.Close()
		target = srv.URL + "/hello"
		fmt.Fprintf(stdout, "upstream of its own on %s: 5 requests/s per API key, 429 with Retry-After beyond\n", target)
	} else if err := checkReachable(target); err != nil {
		return err
	}
	_, err := compare(stdout, target, *workers, *duration)
	return err
}

// startUpstream serves examples/http's /hello on a loopback port: 5
// requests per second per X-API-Key, throttled responses in OpenAI's format
// with Retry-After and RateLimit headers.
func startUpstream() (*httptest.Server, error) {
	limits, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "per-caller", "dimensionKeys": ["caller"],
	  "entries": [{"dimensions": {"caller": "*"}, "requests": [{"rate": 5, "period": "second"}]}]}]}`))
	if err != nil {
		return nil, err
	}
	keys := func(r *http.Request) (sluice.Keys, error) {
		return sluice.NewKeys("caller", r.Header.Get("X-API-Key")), nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /hello", httplimit.New(limits, keys, httplimit.WithFormat(slerrors.OpenAI))(http.HandlerFunc(
		func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"hello":"world"}`) })))
	return httptest.NewServer(mux), nil
}

// checkReachable says, in one error naming rawURL, why its server cannot be
// reached: a bad URL, or a TCP connection that fails within 2 s.
func checkReachable(rawURL string) error {
	u, err := neturl.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("-url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("-url %q: want an http:// or https:// URL with a host", rawURL)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	c, err := net.DialTimeout("tcp", host, 2*time.Second)
	if err != nil {
		return fmt.Errorf("cannot reach -url %s: %w", rawURL, err)
	}
	return c.Close()
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

// outcome is the outcome of one run of workers.
type outcome struct {
	Name                            string
	Requests, OK, Status429, Errors int64
	Elapsed                         time.Duration
	firstErr                        error
}

func (r outcome) throughput() float64 { return float64(r.OK) / r.Elapsed.Seconds() }

// compare runs the workers unpaced and then paced, each run under its own
// API key (so each starts with a full quota), and prints both.
func compare(w io.Writer, url string, workers int, d time.Duration) ([2]outcome, error) {
	base := &http.Transport{MaxIdleConnsPerHost: workers}
	defer base.CloseIdleConnections()
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	var out [2]outcome
	for i, side := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"unpaced", base},
		{"paced", pace.New(base, pace.WithMaxWait(d))},
	} {
		r, err := hammer(side.rt, url, "demo-"+side.name+"-"+stamp, workers, d)
		if err != nil {
			return out, err
		}
		r.Name = side.name
		out[i] = r
		if r.Errors > 0 && r.OK == 0 && r.Status429 == 0 {
			return out, fmt.Errorf("%s run: all %d requests to %s failed, the first with: %v", side.name, r.Errors, url, r.firstErr)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "run\trequests\t200\t429\terrors\tthroughput/s\t\n")
	for _, r := range out {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t\n", r.Name, r.Requests, r.OK, r.Status429, r.Errors, r.throughput())
	}
	return out, tw.Flush()
}

// hammer has workers call url back to back for d.
func hammer(rt http.RoundTripper, url, apiKey string, workers int, d time.Duration) (outcome, error) {
	var r outcome
	var once sync.Once
	fail := func(err error) {
		atomic.AddInt64(&r.Errors, 1)
		once.Do(func() { r.firstErr = err })
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
				if err != nil {
					fail(err)
					return
				}
				req.Header.Set("X-API-Key", apiKey)
				res, err := rt.RoundTrip(req)
				if errors.Is(err, pace.ErrMaxWait) { // the next slot is after the run's end
					return
				}
				if ctx.Err() != nil { // the run is over: not counted
					if err == nil {
						res.Body.Close()
					}
					return
				}
				atomic.AddInt64(&r.Requests, 1)
				if err != nil {
					fail(err)
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				switch res.StatusCode {
				case http.StatusOK:
					atomic.AddInt64(&r.OK, 1)
				case http.StatusTooManyRequests:
					atomic.AddInt64(&r.Status429, 1)
				default:
					fail(fmt.Errorf("status %s", res.Status))
				}
			}
		}()
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	return r, nil
}

// Command pace shows what pacing outbound calls buys, in two experiments.
//
// The first calls a rate-limited server (examples/http, started with
// -format openai) from a few workers that send as fast as they can, once
// through a plain http.Transport and once through a pace.Transport that
// knows nothing but what the server's headers say, and prints the 429s
// and the throughput of each run side by side:
//
//	go run ./examples/http -format openai &
//	go run ./examples/pace -url http://127.0.0.1:8080/hello
//
// The second (-fleet) reproduces seed 003 from the client side on a
// simulated clock: six processes calling one 150/s server with Poisson
// arrivals at 136.28/s, each with its own 25/s limit, or all sharing one
// 150/s limiter (in memory, and through Redis with -redis), and compares
// the local limits' rejections with the shard model's prediction:
//
//	go run ./examples/pace -fleet -redis 127.0.0.1:6379
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/pace"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080/hello", "rate-limited URL to call (examples/http's /hello)")
	workers := flag.Int("workers", 8, "concurrent callers")
	duration := flag.Duration("duration", 3*time.Second, "length of each run")
	fleet := flag.Bool("fleet", false, "run the six-process fleet simulation instead")
	redisAddr := flag.String("redis", "", "Redis address for the fleet simulation's shared limiter (empty: in memory only)")
	seconds := flag.Int("seconds", 60, "simulated seconds of the fleet simulation")
	flag.Parse()
	var err error
	if *fleet {
		_, err = runFleet(os.Stdout, *redisAddr, *seconds, 1)
	} else {
		_, err = compare(os.Stdout, *url, *workers, *duration)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run is the outcome of one run of workers.
type run struct {
	Name                            string
	Requests, OK, Status429, Errors int64
	Elapsed                         time.Duration
}

func (r run) throughput() float64 { return float64(r.OK) / r.Elapsed.Seconds() }

// compare runs the workers unpaced and then paced, each run under its own
// API key (so each starts with a full quota), and prints both.
func compare(w io.Writer, url string, workers int, d time.Duration) ([2]run, error) {
	base := &http.Transport{MaxIdleConnsPerHost: workers}
	defer base.CloseIdleConnections()
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	var out [2]run
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
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "run\trequests\t200\t429\terrors\tthroughput/s\t\n")
	for _, r := range out {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t\n", r.Name, r.Requests, r.OK, r.Status429, r.Errors, r.throughput())
	}
	return out, tw.Flush()
}

// hammer has workers call url back to back for d.
func hammer(rt http.RoundTripper, url, apiKey string, workers int, d time.Duration) (run, error) {
	var r run
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
					atomic.AddInt64(&r.Errors, 1)
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
					atomic.AddInt64(&r.Errors, 1)
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				switch res.StatusCode {
				case http.StatusOK:
					atomic.AddInt64(&r.OK, 1)
				case http.StatusTooManyRequests:
					atomic.AddInt64(&r.Status429, 1)
				}
			}
		}()
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	return r, nil
}

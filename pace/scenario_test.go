package pace_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/pace"
	"github.com/sluicehq/sluice/stack"
)

// scenario is the result of one run of workers against a limited server.
type scenario struct {
	requests, ok, throttled, errs int64
	elapsed                       time.Duration
}

// runScenario runs 64 workers for 10 simulated seconds against a loopback
// server limited by httplimit over a stack to 100 requests per second
// (burst 100), each worker sending a request and then thinking for 500 ms:
// 128 requests per second offered. With paced, the workers share one
// pace.Transport that knows nothing but what the server's headers say.
func runScenario(t testing.TB, paced bool) scenario {
	const (
		workers  = 64
		think    = 500 * time.Millisecond
		duration = 10 * time.Second
	)
	vc := newVSched()
	limits, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "per-ip", "dimensionKeys": ["ip"],
	  "entries": [{"dimensions": {"ip": "*"}, "requests": [{"rate": 100, "period": "second"}]}]}]}`), stack.WithClock(vc))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httplimit.New(limits, httplimit.ClientIPKey("ip", nil))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})))
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: workers}
	defer base.CloseIdleConnections()
	var rt http.RoundTripper = base
	if paced {
		rt = pace.New(base, pace.WithClock(vc), pace.WithMaxWait(time.Minute))
	}
	end := t0.Add(duration)
	var res scenario
	// Workers start from one active goroutine, so that virtual time cannot
	// move until all of them are running.
	vc.Go(func() {
		for i := range workers {
			vc.Go(func() {
				ctx := context.Background()
				_ = vc.Sleep(ctx, time.Duration(i)*think/workers)
				res.work(ctx, vc, rt, srv.URL, end, think)
			})
		}
	})
	vc.Wait()
	res.elapsed = duration
	return res
}

// work is one worker: until end on vc, it sends a request through rt to
// url, counts its outcome in s, and thinks for think.
func (s *scenario) work(ctx context.Context, vc *vsched, rt http.RoundTripper, url string, end time.Time, think time.Duration) {
	for vc.Now().Before(end) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		r, err := rt.RoundTrip(req)
		atomic.AddInt64(&s.requests, 1)
		switch {
		case err != nil:
			atomic.AddInt64(&s.errs, 1)
		default:
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
			if r.StatusCode == http.StatusTooManyRequests {
				atomic.AddInt64(&s.throttled, 1)
			} else if r.StatusCode == http.StatusOK && !vc.Now().After(end) {
				atomic.AddInt64(&s.ok, 1)
			}
		}
		_ = vc.Sleep(ctx, think)
	}
}

func (s scenario) String() string {
	return fmt.Sprintf("%d requests, %d admitted by %v (%.1f/s), %d throttled (%.2f%%), %d errors",
		s.requests, s.ok, s.elapsed, float64(s.ok)/s.elapsed.Seconds(), s.throttled, 100*float64(s.throttled)/float64(s.requests), s.errs)
}

// 64 goroutines against a 100/s limit: unpaced, they run into 429s;
// paced from the server's headers alone, at most 1% of their requests are
// throttled and they get at least 95% of the limit.
func TestScenario64Goroutines(t *testing.T) {
	unpaced := runScenario(t, false)
	paced := runScenario(t, true)
	t.Logf("unpaced: %v", unpaced)
	t.Logf("paced:   %v", paced)
	if unpaced.throttled < 100 {
		t.Errorf("unpaced run saw only %d 429s: the scenario does not overload the server", unpaced.throttled)
	}
	if paced.errs != 0 {
		t.Errorf("paced run: %d errors", paced.errs)
	}
	if paced.throttled*100 > paced.requests {
		t.Errorf("paced run: %d 429s in %d requests, more than 1%%", paced.throttled, paced.requests)
	}
	if limit := 100 * paced.elapsed.Seconds(); float64(paced.ok) < 0.95*limit {
		t.Errorf("paced run admitted %d, less than 95%% of the limit's %.0f", paced.ok, limit)
	}
}

func BenchmarkScenario64Goroutines(b *testing.B) {
	for range b.N {
		for _, paced := range []bool{false, true} { // sides interleaved
			s := runScenario(b, paced)
			name := "unpaced"
			if paced {
				name = "paced"
			}
			b.ReportMetric(100*float64(s.throttled)/float64(s.requests), name+"-429-%")
			b.ReportMetric(float64(s.ok)/s.elapsed.Seconds(), name+"-admitted/s")
		}
	}
}

package pace_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/pace"
)

// script is a RoundTripper that answers with the responses its func builds
// and records what it was sent.
type script struct {
	mu    sync.Mutex
	sent  []*http.Request
	times []time.Time
	clock func() time.Time
	reply func(n int, r *http.Request) *http.Response
	bodys []string
}

func (s *script) RoundTrip(r *http.Request) (*http.Response, error) {
	var body string
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		body = string(b)
	}
	s.mu.Lock()
	n := len(s.sent)
	s.sent = append(s.sent, r)
	s.bodys = append(s.bodys, body)
	if s.clock != nil {
		s.times = append(s.times, s.clock())
	}
	s.mu.Unlock()
	return s.reply(n, r), nil
}

func (s *script) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

func resp(status int, body string, kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

func get(t *testing.T, rt http.RoundTripper, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := rt.RoundTrip(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	return res, err
}

func noJitter(time.Duration) time.Duration { return 0 }

// Learning "10 per second" with none left makes the next request wait
// one interval, 100 ms; the one after it another 100 ms.
func TestLearnsIETFAndPaces(t *testing.T) {
	clk := newStepClock()
	s := &script{reply: func(n int, _ *http.Request) *http.Response {
		return resp(200, "ok", "RateLimit-Policy", `"default";q=10;w=1`, "RateLimit", `"default";r=0;t=1`)
	}}
	tr := pace.New(s, pace.WithClock(clk), pace.WithJitter(noJitter))
	for range 3 {
		if _, err := get(t, tr, "http://api.test/x"); err != nil {
			t.Fatal(err)
		}
	}
	want := []time.Duration{100 * time.Millisecond, 100 * time.Millisecond}
	if got := clk.Slept(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("slept %v, want %v", got, want)
	}
}

// Each vendor format is learned: after a response saying none are left
// out of 60 per minute, the next request waits one second.
func TestLearnsVendorFormats(t *testing.T) {
	reset := t0.Add(30 * time.Second).Format(time.RFC3339)
	cases := map[string][]string{
		"openai":    {"x-ratelimit-limit-requests", "60", "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1s"},
		"anthropic": {"anthropic-ratelimit-requests-limit", "60", "anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", reset},
	}
	for name, kv := range cases {
		t.Run(name, func(t *testing.T) {
			clk := newStepClock()
			s := &script{reply: func(int, *http.Request) *http.Response { return resp(200, "", kv...) }}
			tr := pace.New(s, pace.WithClock(clk), pace.WithJitter(noJitter))
			get(t, tr, "https://api.test/v1")
			get(t, tr, "https://api.test/v1")
			if got := clk.Slept(); len(got) != 1 || got[0] != time.Second {
				t.Fatalf("slept %v, want [1s]", got)
			}
		})
	}
}

// GitHub's window starts over at x-ratelimit-reset: with none left, the
// next request waits until then, not one interval.
func TestGitHubFixedWindow(t *testing.T) {
	clk := newStepClock()
	reset := fmt.Sprint(t0.Add(10 * time.Minute).Unix())
	s := &script{reply: func(int, *http.Request) *http.Response {
		return resp(200, "", "x-ratelimit-limit", "5000", "x-ratelimit-remaining", "0", "x-ratelimit-used", "5000", "x-ratelimit-reset", reset)
	}}
	tr := pace.New(s, pace.WithClock(clk), pace.WithJitter(noJitter), pace.WithMaxWait(time.Hour))
	get(t, tr, "https://api.github.test/")
	get(t, tr, "https://api.github.test/")
	if got := clk.Slept(); len(got) != 1 || got[0] != 10*time.Minute {
		t.Fatalf("slept %v, want [10m0s]", got)
	}
}

// The user's limit is a ceiling: an upstream announcing 1000/s does not
// raise 2/s, and pacing at 2/s starts with the first request.
func TestCeilingIsNeverRaised(t *testing.T) {
	clk := newStepClock()
	s := &script{reply: func(int, *http.Request) *http.Response {
		return resp(200, "", "RateLimit-Policy", `"p";q=1000;w=1`, "RateLimit", `"p";r=999;t=1`)
	}}
	tr := pace.New(s, pace.WithClock(clk), pace.WithLimit(2, time.Second))
	for range 4 {
		get(t, tr, "http://api.test/")
	}
	// Burst 2, then one every 500 ms.
	want := []time.Duration{500 * time.Millisecond, 500 * time.Millisecond}
	if got := clk.Slept(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("slept %v, want %v", got, want)
	}
}

// A lower learned limit does apply under the ceiling.
func TestLearnedLimitBelowCeiling(t *testing.T) {
	clk := newStepClock()
	s := &script{reply: func(int, *http.Request) *http.Response {
		return resp(200, "", "RateLimit-Policy", `"p";q=1;w=4`, "RateLimit", `"p";r=0;t=4`)
	}}
	tr := pace.New(s, pace.WithClock(clk), pace.WithLimit(10, time.Second))
	get(t, tr, "http://api.test/")
	get(t, tr, "http://api.test/")
	if got := clk.Slept(); len(got) != 1 || got[0] != 4*time.Second {
		t.Fatalf("slept %v, want [4s]", got)
	}
}

// A 429 with Retry-After pauses the upstream: the next request, on
// another connection of the same key, waits for it (plus the jitter).
func TestRetryAfterPausesEveryCaller(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        time.Duration
	}{
		{"seconds", "3", 3*time.Second + 7*time.Millisecond},
		{"date", t0.Add(5 * time.Second).Format(http.TimeFormat), 5*time.Second + 7*time.Millisecond},
		{"past date", t0.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"absurd", "1000000000000", time.Second + 7*time.Millisecond}, // ignored: the default pause
		{"negative", "-5", time.Second + 7*time.Millisecond},
		{"garbage", "soon", time.Second + 7*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newStepClock()
			s := &script{reply: func(n int, _ *http.Request) *http.Response {
				if n == 0 {
					return resp(429, "slow down", "Retry-After", tc.value)
				}
				return resp(200, "")
			}}
			jitter := func(d time.Duration) time.Duration {
				if d == 0 {
					return 0
				}
				return 7 * time.Millisecond
			}
			tr := pace.New(s, pace.WithClock(clk), pace.WithJitter(jitter))
			r, _ := get(t, tr, "http://api.test/a")
			if r.StatusCode != 429 {
				t.Fatalf("first response %d, want the 429 delivered", r.StatusCode)
			}
			get(t, tr, "http://api.test/b")
			var total time.Duration
			for _, d := range clk.Slept() {
				total += d
			}
			if total != tc.want {
				t.Fatalf("waited %v, want %v", total, tc.want)
			}
		})
	}
}

// A pause longer than the maximum wait fails at once with a typed error,
// sends nothing, and does not sleep.
func TestMaxWait(t *testing.T) {
	clk := newStepClock()
	s := &script{reply: func(int, *http.Request) *http.Response { return resp(429, "", "Retry-After", "120") }}
	tr := pace.New(s, pace.WithClock(clk), pace.WithMaxWait(10*time.Second), pace.WithJitter(noJitter))
	get(t, tr, "http://api.test/")
	_, err := get(t, tr, "http://api.test/")
	var we *pace.WaitError
	if !errors.As(err, &we) || !errors.Is(err, pace.ErrMaxWait) || !errors.Is(err, slerrors.ErrThrottled) {
		t.Fatalf("err = %v, want a *WaitError matching ErrMaxWait and ErrThrottled", err)
	}
	if we.Wait != 120*time.Second || we.MaxWait != 10*time.Second || we.Host != "http://api.test" {
		t.Fatalf("WaitError %+v", *we)
	}
	if s.count() != 1 || len(clk.Slept()) != 0 {
		t.Fatalf("sent %d, slept %v; want 1 sent and no sleep", s.count(), clk.Slept())
	}
	// The wait is measured from now: two minutes later it is over.
	clk.Advance(2 * time.Minute)
	s.reply = func(int, *http.Request) *http.Response { return resp(200, "") }
	if _, err := get(t, tr, "http://api.test/"); err != nil {
		t.Fatal(err)
	}
}

// A context deadline nearer than the maximum wait bounds the wait too, and
// the error then matches context.DeadlineExceeded.
func TestContextDeadlineBoundsWait(t *testing.T) {
	clk := newStepClock()
	s := &script{reply: func(int, *http.Request) *http.Response { return resp(429, "", "Retry-After", "10") }}
	tr := pace.New(s, pace.WithClock(clk), pace.WithJitter(noJitter))
	get(t, tr, "http://api.test/")
	ctx, cancel := context.WithDeadline(context.Background(), t0.Add(5*time.Second))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/", nil)
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, pace.ErrMaxWait) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

// With retries on, a throttled request is sent again after the pause, with
// its body replayed through GetBody; attempts are capped.
func TestRetryReplaysBody(t *testing.T) {
	clk := newStepClock()
	s := &script{clock: clk.Now, reply: func(n int, _ *http.Request) *http.Response {
		if n < 2 {
			return resp(429, "no", "Retry-After", "2")
		}
		return resp(200, "yes")
	}}
	tr := pace.New(s, pace.WithClock(clk), pace.WithJitter(noJitter), pace.WithRetry(3))
	req, _ := http.NewRequest("POST", "http://api.test/", bytes.NewReader([]byte("payload")))
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || string(body) != "yes" {
		t.Fatalf("got %d %q", res.StatusCode, body)
	}
	if fmt.Sprint(s.bodys) != "[payload payload payload]" {
		t.Fatalf("bodies sent %q", s.bodys)
	}
	if s.times[1].Sub(s.times[0]) != 2*time.Second || s.times[2].Sub(s.times[1]) != 2*time.Second {
		t.Fatalf("sent at %v", s.times)
	}
	for _, r := range s.sent[1:] {
		if r == req {
			t.Fatal("a retry reused the caller's request")
		}
	}

	// Always throttled: three attempts, then the last 429 is returned.
	s2 := &script{reply: func(int, *http.Request) *http.Response { return resp(429, "no", "Retry-After", "1") }}
	tr = pace.New(s2, pace.WithClock(clk), pace.WithJitter(noJitter), pace.WithRetry(3))
	res, err = get(t, tr, "http://api.test/")
	if err != nil || res.StatusCode != 429 || s2.count() != 3 {
		t.Fatalf("got %v %v after %d attempts, want the 429 after 3", res, err, s2.count())
	}
}

// A throttled request whose pause would pass the maximum wait is not
// retried: the caller gets the 429 itself, not a *WaitError.
func TestNoRetryPastMaxWait(t *testing.T) {
	clk := newStepClock()
	s := &script{reply: func(int, *http.Request) *http.Response { return resp(429, "later", "Retry-After", "60") }}
	tr := pace.New(s, pace.WithClock(clk), pace.WithJitter(noJitter),
		pace.WithRetry(3), pace.WithMaxWait(10*time.Second))
	req, _ := http.NewRequest("GET", "http://api.test/", nil)
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 429 || string(body) != "later" || s.count() != 1 || len(clk.Slept()) != 0 {
		t.Fatalf("got %d %q after %d sends and sleeps %v; want the 429 at once", res.StatusCode, body, s.count(), clk.Slept())
	}
}

// CloseIdleConnections reaches the wrapped transport.
func TestCloseIdleConnections(t *testing.T) {
	base := &closeCounter{}
	(&http.Client{Transport: pace.New(base)}).CloseIdleConnections()
	if base.n != 1 {
		t.Fatalf("wrapped transport's CloseIdleConnections called %d times", base.n)
	}
}

type closeCounter struct{ n int }

func (c *closeCounter) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("unused")
}
func (c *closeCounter) CloseIdleConnections() { c.n++ }

// A body that cannot be replayed is not retried.
func TestNoRetryWithoutGetBody(t *testing.T) {
	clk := newStepClock()
	s := &script{reply: func(int, *http.Request) *http.Response { return resp(429, "", "Retry-After", "1") }}
	tr := pace.New(s, pace.WithClock(clk), pace.WithRetry(5))
	req, _ := http.NewRequest("POST", "http://api.test/", io.NopCloser(strings.NewReader("once")))
	res, err := tr.RoundTrip(req)
	if err != nil || res.StatusCode != 429 || s.count() != 1 {
		t.Fatalf("got %v %v, %d sends; want the 429 after 1", res, err, s.count())
	}
}

// An AWS ThrottlingException (HTTP 400) pauses the upstream with the
// default pause, and its body reaches the caller unchanged.
func TestAWSThrottlingBody(t *testing.T) {
	const body = `{"__type":"com.amazonaws.ecs#ThrottlingException","message":"Rate exceeded"}`
	clk := newStepClock()
	s := &script{reply: func(n int, _ *http.Request) *http.Response {
		if n == 0 {
			return resp(400, body, "Content-Type", "application/x-amz-json-1.1")
		}
		return resp(200, "")
	}}
	tr := pace.New(s, pace.WithClock(clk), pace.WithJitter(noJitter), pace.WithDefaultPause(250*time.Millisecond))
	req, _ := http.NewRequest("POST", "https://ecs.test/", nil)
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(got) != body {
		t.Fatalf("body %q, want it unchanged", got)
	}
	get(t, tr, "https://ecs.test/")
	if s := clk.Slept(); len(s) != 1 || s[0] != 250*time.Millisecond {
		t.Fatalf("slept %v, want [250ms]", s)
	}
	// A 400 that is not throttling pauses nothing.
	s.reply = func(int, *http.Request) *http.Response {
		return resp(400, `{"__type":"ValidationException","message":"Throttling is not the issue"}`)
	}
	get(t, tr, "https://ecs.test/")
	get(t, tr, "https://ecs.test/")
	if s := clk.Slept(); len(s) != 1 {
		t.Fatalf("slept %v after a validation error", s)
	}
}

// Callers waiting for one upstream are served in the order they came.
func TestFIFO(t *testing.T) {
	vc := newVSched()
	var (
		mu    sync.Mutex
		order []int
	)
	s := &script{reply: func(int, *http.Request) *http.Response {
		return resp(200, "", "RateLimit-Policy", `"p";q=1;w=1`, "RateLimit", `"p";r=0;t=1`)
	}}
	tr := pace.New(s, pace.WithClock(vc), pace.WithMaxWait(time.Minute))
	// The first request teaches the limit: 1 per second, none left.
	vc.Go(func() { get(t, tr, "http://api.test/") })
	vc.Wait()
	release := make(chan struct{})
	vc.Go(func() { <-release }) // holds time still while the callers queue
	for i := range 8 {
		vc.Go(func() {
			get(t, tr, "http://api.test/")
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
		vc.AwaitSleeping(i + 1) // caller i has taken its slot
	}
	close(release)
	vc.Wait()
	if fmt.Sprint(order) != "[0 1 2 3 4 5 6 7]" {
		t.Fatalf("served in order %v", order)
	}
	if got := vc.Now().Sub(t0); got != 8*time.Second {
		t.Fatalf("8 queued requests at 1/s took %v", got)
	}
}

// A caller whose context ends while it waits gets the context's error,
// sends nothing, and gives its slot back to the next caller.
func TestCancelWhileWaiting(t *testing.T) {
	vc := newVSched()
	s := &script{reply: func(int, *http.Request) *http.Response {
		return resp(200, "", "RateLimit-Policy", `"p";q=1;w=1`, "RateLimit", `"p";r=0;t=1`)
	}}
	tr := pace.New(s, pace.WithClock(vc))
	vc.Go(func() { get(t, tr, "http://api.test/") })
	vc.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	hold := make(chan struct{})
	vc.Go(func() { <-hold })
	vc.Go(func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/", nil)
		_, err := tr.RoundTrip(req)
		errc <- err
	})
	vc.AwaitSleeping(1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	close(hold)
	vc.Wait()
	start := vc.Now()
	vc.Go(func() { get(t, tr, "http://api.test/") })
	vc.Wait()
	if s.count() != 2 || vc.Now().Sub(start) != time.Second {
		t.Fatalf("sent %d, next caller waited %v; want 2 sent and a 1s wait (the given-back slot)", s.count(), vc.Now().Sub(start))
	}
}

// Per-key state is bounded whatever keys callers produce, and keys are
// paced apart: a pause on one does not hold up another.
func TestBoundedKeys(t *testing.T) {
	clk := newStepClock()
	s := &script{reply: func(n int, r *http.Request) *http.Response {
		if r.URL.Host == "slow.test" {
			return resp(429, "", "Retry-After", "30")
		}
		return resp(200, "", "RateLimit-Policy", `"p";q=5;w=1`, "RateLimit", `"p";r=4;t=1`)
	}}
	tr := pace.New(s, pace.WithClock(clk), pace.WithMaxUpstreams(16), pace.WithJitter(noJitter))
	get(t, tr, "http://slow.test/")
	for i := range 5000 {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://h%d.test/", i), nil)
		req.Header.Set("Authorization", fmt.Sprint("Bearer ", i))
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	if n := pace.Upstreams(tr); n > 16 {
		t.Fatalf("%d upstreams kept, bound 16", n)
	}
	if got := clk.Slept(); len(got) != 0 {
		t.Fatalf("other upstreams waited %v", got)
	}
	// slow.test's pause is still in force: it was not evicted.
	if _, err := get(t, tr, "http://slow.test/"); err != nil {
		t.Fatal(err)
	}
	if got := clk.Slept(); len(got) != 1 || got[0] != 30*time.Second {
		t.Fatalf("slow.test waited %v, want its 30s pause", got)
	}
}

// Two credentials on one host are two upstreams.
func TestCredentialsSplitKeys(t *testing.T) {
	clk := newStepClock()
	s := &script{reply: func(n int, r *http.Request) *http.Response {
		if r.Header.Get("Authorization") == "Bearer a" {
			return resp(429, "", "Retry-After", "9")
		}
		return resp(200, "")
	}}
	tr := pace.New(s, pace.WithClock(clk))
	for _, cred := range []string{"Bearer a", "Bearer b", "Bearer b"} {
		req, _ := http.NewRequest("GET", "https://api.test/", nil)
		req.Header.Set("Authorization", cred)
		res, _ := tr.RoundTrip(req)
		res.Body.Close()
	}
	if got := clk.Slept(); len(got) != 0 {
		t.Fatalf("key b waited %v for key a's pause", got)
	}
}

// Hostile headers are ignored: nothing is learned from them, nothing
// waits, nothing panics.
func TestBadHeadersIgnored(t *testing.T) {
	bad := [][]string{
		{"RateLimit-Policy", `"p";q=1000000000000;w=1`, "RateLimit", `"p";r=5;t=1`},
		{"RateLimit-Policy", `"p";q=-5;w=1`, "RateLimit", `"p";r=-1;t=-1`},
		{"RateLimit-Policy", `"p";q=10;w=0`},
		{"RateLimit-Policy", `"p;q=10;w=1`},
		{"x-ratelimit-limit-requests", "abc", "x-ratelimit-remaining-requests", "1e3"},
		{"x-ratelimit-limit-requests", "60", "x-ratelimit-remaining-requests", "61"}, // contradictory
		{"anthropic-ratelimit-requests-limit", "-1", "anthropic-ratelimit-requests-reset", "yesterday"},
		{"x-ratelimit-limit", "5000", "x-ratelimit-remaining", "10", "x-ratelimit-reset", "99999999999999"},
		{"Retry-After", "1000000000000"},
	}
	for i, kv := range bad {
		clk := newStepClock()
		s := &script{reply: func(int, *http.Request) *http.Response { return resp(200, "", kv...) }}
		tr := pace.New(s, pace.WithClock(clk))
		for range 3 {
			if _, err := get(t, tr, "http://api.test/"); err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
		}
		if got := clk.Slept(); len(got) > 0 {
			t.Errorf("case %d %v: slept %v", i, kv, got)
		}
	}
}

// Throttled responses with no delay back off exponentially, capped, and a
// success resets the backoff.
func TestDefaultBackoff(t *testing.T) {
	clk := newStepClock()
	var ok atomic.Bool
	s := &script{reply: func(int, *http.Request) *http.Response {
		if ok.Load() {
			return resp(200, "")
		}
		return resp(429, "")
	}}
	tr := pace.New(s, pace.WithClock(clk), pace.WithJitter(noJitter), pace.WithMaxWait(time.Minute))
	for range 7 {
		get(t, tr, "http://api.test/")
	}
	want := "[1s 2s 4s 8s 16s 20s]"
	if got := fmt.Sprint(clk.Slept()); got != want {
		t.Fatalf("backoff %s, want %s", got, want)
	}
}

// A cold upstream gets one request at a time until it has answered once:
// a crowd does not hit an upstream whose limit is not known yet. A probe
// that fails hands the role on. The test steps through it on events: the
// upstream reports each call, the Transport each caller it holds back, so
// every count is exact whatever the scheduling.
func TestColdStartProbe(t *testing.T) {
	const callers = 8
	var inflight atomic.Int64
	held := make(chan struct{}, 4*callers) // a caller waits for the probe
	arrived := make(chan int64, callers)   // the upstream got call n
	first := make(chan struct{})
	var calls atomic.Int64
	var crowded atomic.Int64 // probes that found another call in flight
	up := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		n := calls.Add(1)
		if inflight.Add(1) != 1 && n <= 2 {
			crowded.Add(1)
		}
		defer inflight.Add(-1)
		arrived <- n
		switch n {
		case 1:
			<-first
			return nil, errors.New("connection refused")
		case 2:
			// Every other caller has been released by the failed probe
			// and is held back again, behind this second probe.
			for heldBack := 0; heldBack < callers-2; {
				select {
				case <-held:
					heldBack++
				case m := <-arrived:
					if m != n {
						t.Errorf("call %d sent while the second probe was in flight", m)
						return nil, errors.New("test failed")
					}
				}
			}
			if c := calls.Load(); c != 2 {
				t.Errorf("%d requests sent while the second probe was in flight", c)
			}
			return resp(200, "", "RateLimit-Policy", `"p";q=100;w=1`, "RateLimit", `"p";r=90;t=1`), nil
		}
		return resp(200, ""), nil
	})
	clk := newStepClock()
	tr := pace.New(up, pace.WithClock(clk), pace.WithMaxWait(time.Hour),
		pace.WithProbeWait(func() { held <- struct{}{} }))
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", "http://cold.test/", nil)
			res, err := tr.RoundTrip(req)
			if err != nil {
				errs <- err
				return
			}
			res.Body.Close()
		}()
	}
	var release sync.Once
	defer release.Do(func() { close(first) }) // if the test fails before
	// The first caller probes; the seven others are held back, and no
	// other call arrives meanwhile.
	<-arrived
	for range callers - 1 {
		select {
		case <-held:
		case n := <-arrived:
			t.Fatalf("call %d sent to a cold upstream before it answered", n)
		}
	}
	if c := calls.Load(); c != 1 {
		t.Fatalf("%d requests sent to a cold upstream before it answered", c)
	}
	release.Do(func() { close(first) })
	wg.Wait()
	close(errs)
	if n := len(errs); n != 1 {
		t.Fatalf("%d errors, want the failed probe's only", n)
	}
	if calls.Load() != callers {
		t.Fatalf("%d requests sent, want %d", calls.Load(), callers)
	}
	if n := len(held); n != 0 {
		t.Fatalf("%d callers held back after the upstream answered", n)
	}
	if c := crowded.Load(); c != 0 {
		t.Fatalf("%d probes were sent beside another call", c)
	}
}

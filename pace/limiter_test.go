package pace_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/pace"
	"github.com/sluicehq/sluice/stack"
)

// Two Transports sharing one limiter share its quota: 2 per second between
// them, whichever sends.
func TestSharedLimiter(t *testing.T) {
	clk := newStepClock()
	shared, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "fleet", "dimensionKeys": ["upstream"],
	  "entries": [{"dimensions": {"upstream": "*"}, "requests": [{"rate": 2, "period": "second"}]}]}]}`), stack.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	up := &script{clock: clk.Now, reply: func(int, *http.Request) *http.Response { return resp(200, "") }}
	a := pace.New(up, pace.WithClock(clk), pace.WithLimiter(shared, nil))
	b := pace.New(up, pace.WithClock(clk), pace.WithLimiter(shared, nil))
	for i := range 6 {
		tr := a
		if i%2 == 1 {
			tr = b
		}
		if _, err := get(t, tr, "https://api.test/"); err != nil {
			t.Fatal(err)
		}
	}
	// Burst 2 at t0, then one every 500 ms: the 6th goes at +2s.
	if got := up.times[5].Sub(t0); got != 2*time.Second {
		t.Fatalf("6th request at +%v, want +2s (sent at %v)", got, up.times)
	}
	// Both processes name the upstream alike.
	r1, _ := http.NewRequest("GET", "https://api.test/x", nil)
	r2, _ := http.NewRequest("GET", "https://api.test/y", nil)
	if k1, k2 := a.DefaultKeys(r1), b.DefaultKeys(r2); k1.String() != k2.String() {
		t.Fatalf("keys differ: %v, %v", k1.String(), k2.String())
	}
}

// A limiter that denies for good fails the request at once; one that
// cannot decide refuses it too, with its error (CONVENTIONS item 5: the
// backend's engine decides whether a failure admits; a Limiter error means
// "refuse").
func TestLimiterPermanentAndError(t *testing.T) {
	clk := newStepClock()
	up := &script{reply: func(int, *http.Request) *http.Response { return resp(200, "") }}
	tr := pace.New(up, pace.WithClock(clk), pace.WithLimiter(sluice.Deny, nil))
	_, err := get(t, tr, "https://api.test/")
	if !errors.Is(err, pace.ErrMaxWait) || up.count() != 0 {
		t.Fatalf("err %v, %d sent", err, up.count())
	}
	failing := sluice.LimiterFunc(func(context.Context, sluice.Keys) (sluice.Decision, error) {
		return sluice.Decision{}, errors.New("redis: connection refused")
	})
	var observed []error // RoundTrip runs on this goroutine
	onError := pace.WithErrorHandler(func(err error) { observed = append(observed, err) })
	tr = pace.New(up, pace.WithClock(clk), pace.WithLimiter(failing, nil), onError)
	if _, err := get(t, tr, "https://api.test/"); err == nil || !strings.Contains(err.Error(), "connection refused") || up.count() != 0 {
		t.Fatalf("err %v, %d sent; want the limiter's error and nothing sent", err, up.count())
	}
	if len(observed) != 1 || !strings.Contains(observed[0].Error(), "connection refused") {
		t.Errorf("the error handler observed %v, want the limiter's error", observed)
	}
	// A key function's error fails the request before it is sent, without
	// asking the limiter, and is observed.
	observed = nil
	noKeys := func(*http.Request) (sluice.Keys, error) { return sluice.Keys{}, errors.New("no tenant") }
	tr = pace.New(up, pace.WithClock(clk), pace.WithLimiter(sluice.Deny, noKeys), onError)
	if _, err := get(t, tr, "https://api.test/"); err == nil || !strings.Contains(err.Error(), "no tenant") || up.count() != 0 {
		t.Fatalf("key error: err %v, %d sent", err, up.count())
	}
	if len(observed) != 1 || !strings.Contains(observed[0].Error(), "no tenant") {
		t.Errorf("key error: the error handler observed %v", observed)
	}
}

package pace

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

type okTransport struct{}

func (okTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}}, nil
}

func sameFunc(a, b any) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }

// checkDefaults reports how tr's configuration differs from New's defaults.
func checkDefaults(t *testing.T, tr *Transport) {
	t.Helper()
	c, d := tr.cfg, defaultConfig()
	switch {
	case !tr.sys || c.clock != nil:
		t.Error("clock: not the default")
	case !sameFunc(c.jitter, defaultJitter):
		t.Error("jitter: not the default")
	case c.maxWait != DefaultMaxWait, tr.ups.max != DefaultMaxUpstreams:
		t.Errorf("max wait %v, max upstreams %d; want the defaults", c.maxWait, tr.ups.max)
	case !slices.Equal(c.credHeaders, d.credHeaders):
		t.Errorf("credential headers %q, want %q", c.credHeaders, d.credHeaders)
	case c.ceilInterval != 0 || c.ceilBurst != 0:
		t.Errorf("ceiling %d/%d, want none", c.ceilBurst, c.ceilInterval)
	case c.retries != 0, c.defaultPause != DefaultPause:
		t.Errorf("retries %d, pause %v; want none and DefaultPause", c.retries, c.defaultPause)
	case c.limiter != nil, c.tokens != nil, c.store != nil, c.upstream != nil, c.onError != nil:
		t.Error("a limiter, reserver, store, upstream func or error handler is set")
	case c.hooks.Paced != nil || c.hooks.Throttled != nil || c.hooks.Learned != nil || c.hooks.StoreFailed != nil:
		t.Error("hooks set")
	}
}

// TestOptionsNotGiven walks every option with the values the option rule
// calls "not given" (zero, negative, nil, no names): none panics, and each
// leaves the documented default. New has no error result: no option can be
// wrong in another way.
func TestOptionsNotGiven(t *testing.T) {
	cases := map[string]Option{
		"nil Option":                  nil,
		"WithClock(nil)":              WithClock(nil),
		"WithJitter(nil)":             WithJitter(nil),
		"WithMaxWait(0)":              WithMaxWait(0),
		"WithMaxWait(-1s)":            WithMaxWait(-time.Second),
		"WithMaxUpstreams(0)":         WithMaxUpstreams(0),
		"WithMaxUpstreams(-1)":        WithMaxUpstreams(-1),
		"WithUpstream(nil)":           WithUpstream(nil),
		"WithErrorHandler(nil)":       WithErrorHandler(nil),
		"WithCredentialHeaders()":     WithCredentialHeaders(),
		"WithCredentialHeaders(\"\")": WithCredentialHeaders(""),
		"WithLimit(0, 0)":             WithLimit(0, 0),
		"WithLimit(-1, time.Second)":  WithLimit(-1, time.Second),
		"WithLimit(10, 0)":            WithLimit(10, 0),
		"WithLimit(10, -1s)":          WithLimit(10, -time.Second),
		"WithRetry(0)":                WithRetry(0),
		"WithRetry(-3)":               WithRetry(-3),
		"WithRetry(1)":                WithRetry(1),
		"WithDefaultPause(0)":         WithDefaultPause(0),
		"WithDefaultPause(-1s)":       WithDefaultPause(-time.Second),
		"WithLimiter(nil, nil)":       WithLimiter(nil, nil),
		"WithTokens(nil, nil)":        WithTokens(nil, nil),
		"WithStore(nil, 0)":           WithStore(nil, 0),
		"WithStore(nil, -1s)":         WithStore(nil, -time.Second),
		"WithHooks(Hooks{})":          WithHooks(Hooks{}),
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			tr := New(okTransport{}, o)
			checkDefaults(t, tr)
			// The default key digests the default credential headers:
			// two API keys on one host are two upstreams.
			r1, _ := http.NewRequest(http.MethodGet, "https://api.example/x", nil)
			r2 := r1.Clone(context.Background())
			r1.Header.Set("X-Api-Key", "a")
			r2.Header.Set("X-Api-Key", "b")
			if tr.key(r1) == tr.key(r2) {
				t.Error("two API keys share an upstream: the default credential headers are not read")
			}
			// A request goes through on the default clock without waiting.
			resp, err := tr.RoundTrip(r1)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
	}
}

// TestOptionsNotGivenKeepEarlier: a "not given" value is not a reset; it
// leaves what an earlier option set.
func TestOptionsNotGivenKeepEarlier(t *testing.T) {
	l := sluice.Unlimited
	tr := New(okTransport{},
		WithMaxWait(time.Minute), WithMaxWait(0),
		WithMaxUpstreams(8), WithMaxUpstreams(0),
		WithCredentialHeaders("x-token"), WithCredentialHeaders(),
		WithLimit(10, time.Second), WithLimit(0, 0),
		WithRetry(3), WithRetry(0),
		WithLimiter(l, nil), WithLimiter(nil, nil),
	)
	c := tr.cfg
	if c.maxWait != time.Minute || tr.ups.max != 8 || !slices.Equal(c.credHeaders, []string{"X-Token"}) ||
		c.ceilBurst != 10 || c.retries != 2 || c.limiter == nil {
		t.Errorf("earlier options undone: %+v", c)
	}
}

// TestWithoutWait: the default maximum wait bounds a request that would
// wait longer, and WithoutWait fails one that would wait at all; both at
// once, without sleeping.
func TestWithoutWait(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
		want time.Duration
	}{
		{"WithMaxWait(0)", []Option{WithMaxWait(0)}, DefaultMaxWait},
		{"WithoutWait()", []Option{WithoutWait()}, 0},
		{"WithoutWait(), then WithMaxWait(1m)", []Option{WithoutWait(), WithMaxWait(time.Minute)}, time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := &spyClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
			tr := New(okTransport{}, append(c.opts, WithLimit(1, time.Hour), WithClock(clk))...)
			req, _ := http.NewRequest(http.MethodGet, "https://api.example/x", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			_, err = tr.RoundTrip(req) // the next slot is an hour away
			var we *WaitError
			if !errors.As(err, &we) || we.MaxWait != c.want || clk.slept {
				t.Fatalf("second request: %v (slept %v); want a *WaitError with MaxWait %v at once", err, clk.slept, c.want)
			}
		})
	}
}

// spyClock is a clock that stands still and records whether Sleep was
// called.
type spyClock struct {
	now   time.Time
	slept bool
}

func (c *spyClock) Now() time.Time { return c.now }
func (c *spyClock) Sleep(context.Context, time.Duration) error {
	c.slept = true
	return nil
}

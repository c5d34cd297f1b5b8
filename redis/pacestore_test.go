package redis_test

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/pace"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// paceT0 is where the pacing tests' clock (a limitertest.Clock, whose
// sleeps advance it at once) starts.
var paceT0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// paceUpstream answers with its reply func and records when it was called.
type paceUpstream struct {
	clock *limitertest.Clock
	reply func() (int, http.Header)
	times []time.Duration
}

func (u *paceUpstream) RoundTrip(*http.Request) (*http.Response, error) {
	u.times = append(u.times, u.clock.Now().Sub(paceT0))
	status, h := u.reply()
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(""))}, nil
}

func paceGet(t *testing.T, tr *pace.Transport) int {
	t.Helper()
	req, _ := http.NewRequest("GET", "https://api.test/v1", nil)
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func newPaceStore(t *testing.T, addr, prefix string, opts ...sluiceredis.Option) *sluiceredis.PaceStore {
	t.Helper()
	client, _ := newClient(t, addr)
	s, err := sluiceredis.NewPaceStore(client, append([]sluiceredis.Option{sluiceredis.WithKeyPrefix(prefix), sluiceredis.WithTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Two processes, each with its own Redis connection and Transport: a sees
// the upstream's headers and then its 429, b is answered without headers.
// b paces by a's quota from its first request, and waits out a's pause.
func TestPaceStoreTwoProcesses(t *testing.T) {
	srv := startRedis(t)
	prefix := uniquePrefix("pace")
	clk := limitertest.NewClock(paceT0)
	throttle := false
	upA := &paceUpstream{clock: clk, reply: func() (int, http.Header) {
		h := http.Header{"Ratelimit-Policy": {`"default";q=2;w=1`}}
		if throttle {
			h.Set("Retry-After", "3")
			return 429, h
		}
		return 200, h
	}}
	upB := &paceUpstream{clock: clk, reply: func() (int, http.Header) { return 200, http.Header{} }}
	process := func(up http.RoundTripper) *pace.Transport {
		return pace.New(up, pace.WithClock(clk),
			pace.WithJitter(func(time.Duration) time.Duration { return 0 }),
			pace.WithStore(newPaceStore(t, srv.Addr, prefix), time.Second))
	}
	a, b := process(upA), process(upB)

	paceGet(t, a)
	for range 3 {
		paceGet(t, b)
	}
	if got, want := upB.times, []time.Duration{0, 0, 500 * time.Millisecond}; !paceEqualDurations(got, want) {
		t.Fatalf("b sent at %v, want %v (a's quota: 2/s)", got, want)
	}
	// a is throttled at +1s for 3 s; b reads the store at its next
	// refresh, +1s, waits until +4s, then goes on at 2/s.
	clk.Advance(500 * time.Millisecond) // +1s
	throttle = true
	if st := paceGet(t, a); st != 429 {
		t.Fatalf("a got %d", st)
	}
	paceGet(t, b)
	paceGet(t, b)
	if got, want := upB.times[3:], []time.Duration{4 * time.Second, 4500 * time.Millisecond}; !paceEqualDurations(got, want) {
		t.Fatalf("after a's 429 b sent at %v, want %v", got, want)
	}
}

func paceEqualDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Redis merges as pace.Learned.Merge does, whatever the order of the
// writes (times are kept to the microsecond).
func TestPaceStoreMergesLikeLearned(t *testing.T) {
	srv := startRedis(t)
	s := newPaceStore(t, srv.Addr, uniquePrefix("merge"))
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	var want pace.Learned
	for i := range 200 {
		var l pace.Learned
		if rng.IntN(3) > 0 {
			l.Limit = 1 + rng.Int64N(1000)
			l.Window = time.Duration(1+rng.IntN(3600)) * time.Second
			l.At = paceT0.Add(time.Duration(rng.Int64N(int64(time.Hour)))).Truncate(time.Microsecond)
		}
		if rng.IntN(2) == 0 {
			l.PausedUntil = paceT0.Add(time.Duration(rng.Int64N(int64(time.Hour)))).Truncate(time.Microsecond)
		}
		want = want.Merge(l)
		got, err := s.Merge(ctx, "https://api.test#1", l)
		if err != nil {
			t.Fatal(err)
		}
		if got.Limit != want.Limit || got.Window != want.Window || !got.At.Equal(want.At) || !got.PausedUntil.Equal(want.PausedUntil) {
			t.Fatalf("merge %d: Redis holds %+v, want %+v", i, got, want)
		}
	}
	if got, err := s.Load(ctx, "https://api.test#1"); err != nil || got.Limit != want.Limit || !got.PausedUntil.Equal(want.PausedUntil) {
		t.Fatalf("Load: %+v %v, want %+v", got, err, want)
	}
	if got, err := s.Load(ctx, "https://other.test#1"); err != nil || got != (pace.Learned{}) {
		t.Fatalf("Load of nothing: %+v %v", got, err)
	}
}

// Every record expires: PaceStoreTTL after its last write, or after the
// pause it holds, bounded by a day more.
func TestPaceStoreExpiry(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	now := paceT0
	s := newPaceStore(t, srv.Addr, uniquePrefix("ttl"), sluiceredis.WithClock(sluice.ClockFunc(func() time.Time { return now })))
	ctx := context.Background()
	ttl := func(key string) time.Duration {
		d, err := client.PTTL(ctx, sluiceredis.PaceStoreKey(s, key)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	s.Merge(ctx, "quota", pace.Learned{Limit: 5, Window: time.Second, At: now})
	if d := ttl("quota"); d < sluiceredis.PaceStoreTTL-10*time.Second || d > sluiceredis.PaceStoreTTL {
		t.Fatalf("quota record TTL %v, want about %v", d, sluiceredis.PaceStoreTTL)
	}
	s.Merge(ctx, "paused", pace.Learned{PausedUntil: now.Add(time.Hour)})
	if d := ttl("paused"); d <= time.Hour || d > time.Hour+2*time.Second {
		t.Fatalf("paused record TTL %v, want the hour of its pause", d)
	}
	// A later, shorter write does not cut the pause's expiry short.
	s.Merge(ctx, "paused", pace.Learned{Limit: 5, Window: time.Second, At: now})
	if d := ttl("paused"); d <= time.Hour-time.Minute {
		t.Fatalf("paused record TTL %v after a quota write, want the pause's", d)
	}
	s.Merge(ctx, "far", pace.Learned{PausedUntil: now.Add(1000 * time.Hour)})
	if d := ttl("far"); d > sluiceredis.PaceStoreTTL+24*time.Hour {
		t.Fatalf("absurd pause: TTL %v, want at most a day more than %v", d, sluiceredis.PaceStoreTTL)
	}
	if _, err := s.Merge(ctx, "empty", pace.Learned{}); err != nil {
		t.Fatal(err)
	}
	if n, _ := client.Exists(ctx, sluiceredis.PaceStoreKey(s, "empty")).Result(); n != 0 {
		t.Fatal("an empty merge created a record")
	}
}

// Garbage in Redis (another type at the key, fields that are not numbers)
// is not a record: Load fails or leaves the fields out, and the Transport
// goes on pacing by what it learns itself.
func TestPaceStoreGarbage(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	s := newPaceStore(t, srv.Addr, uniquePrefix("garbage"))
	ctx := context.Background()
	client.Set(ctx, sluiceredis.PaceStoreKey(s, "string"), "not a hash", 0)
	if _, err := s.Load(ctx, "string"); err == nil {
		t.Fatal("Load of a string key: no error")
	}
	if _, err := s.Merge(ctx, "string", pace.Learned{Limit: 1, Window: time.Second, At: paceT0}); err == nil {
		t.Fatal("Merge into a string key: no error")
	}
	client.HSet(ctx, sluiceredis.PaceStoreKey(s, "hash"), "l", "-3", "w", "1e9", "a", "yesterday", "p", "99999999999999999999999")
	got, err := s.Load(ctx, "hash")
	if err != nil || got != (pace.Learned{}) {
		t.Fatalf("garbage fields read as %+v, %v", got, err)
	}
	// Merging over garbage writes a clean record.
	got, err = s.Merge(ctx, "hash", pace.Learned{Limit: 7, Window: time.Second, At: paceT0, PausedUntil: paceT0.Add(time.Second)})
	if err != nil || got.Limit != 7 || !got.PausedUntil.Equal(paceT0.Add(time.Second)) {
		t.Fatalf("merge over garbage: %+v, %v", got, err)
	}
}

// A store that cannot be reached fails fast, is reported, and leaves the
// Transport pacing by what it learns itself.
func TestPaceStoreUnavailable(t *testing.T) {
	srv := startRedis(t)
	if srv.External {
		t.Skip("needs a server the test can stop")
	}
	s := newPaceStore(t, srv.Addr, uniquePrefix("down"), sluiceredis.WithTimeout(200*time.Millisecond))
	srv.Stop()
	clk := limitertest.NewClock(paceT0)
	up := &paceUpstream{clock: clk, reply: func() (int, http.Header) {
		return 200, http.Header{"Ratelimit-Policy": {`"default";q=2;w=1`}}
	}}
	var failures []error
	tr := pace.New(up, pace.WithClock(clk),
		pace.WithJitter(func(time.Duration) time.Duration { return 0 }), pace.WithStore(s, time.Second),
		pace.WithHooks(pace.Hooks{StoreFailed: func(_ context.Context, err error) { failures = append(failures, err) }}))
	for range 4 {
		paceGet(t, tr)
	}
	if want := []time.Duration{0, 0, 0, 500 * time.Millisecond}; !paceEqualDurations(up.times, want) {
		t.Fatalf("sent at %v, want %v: local pacing", up.times, want)
	}
	if len(failures) != 2 { // the first read and the new quota; none per request
		t.Fatalf("%d failures reported, want 2: %v", len(failures), failures)
	}
	if _, err := s.Load(context.Background(), "x"); err == nil {
		t.Fatalf("Load on a stopped server: %v", err)
	}
}

func TestNewPaceStoreErrors(t *testing.T) {
	if _, err := sluiceredis.NewPaceStore(nil); err == nil {
		t.Fatal("nil client accepted")
	}
	client, _ := newClient(t, "127.0.0.1:1")
	if _, err := sluiceredis.NewPaceStore(client, sluiceredis.WithLocalFallback(2)); err == nil {
		t.Fatal("share above 1 accepted")
	}
	if _, err := sluiceredis.NewPaceStore(client, sluiceredis.WithKeyPrefix("{x}")); err == nil {
		t.Fatal("prefix with braces accepted")
	}
	s, err := sluiceredis.NewPaceStore(client, nil, sluiceredis.WithKeyPrefix("p"))
	if err != nil {
		t.Fatal(err)
	}
	if k := sluiceredis.PaceStoreKey(s, "https://api.openai.com#abc"); !strings.HasPrefix(k, "p:pace:") || len(k) != len("p:pace:")+32 {
		t.Fatalf("key %q", k)
	}
}

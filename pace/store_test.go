package pace_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/pace"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// countingStore counts the calls that reach the store it wraps, and can
// be made to fail.
type countingStore struct {
	pace.Store
	mu           sync.Mutex
	loads, merge int
	fail         error
}

func (s *countingStore) Load(ctx context.Context, key string) (pace.Learned, error) {
	s.mu.Lock()
	s.loads++
	err := s.fail
	s.mu.Unlock()
	if err != nil {
		return pace.Learned{}, err
	}
	return s.Store.Load(ctx, key)
}

func (s *countingStore) Merge(ctx context.Context, key string, l pace.Learned) (pace.Learned, error) {
	s.mu.Lock()
	s.merge++
	err := s.fail
	s.mu.Unlock()
	if err != nil {
		return pace.Learned{}, err
	}
	return s.Store.Merge(ctx, key, l)
}

func (s *countingStore) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads + s.merge
}

func TestLearnedMerge(t *testing.T) {
	q := func(n int64, at time.Duration) pace.Learned {
		return pace.Learned{Limit: n, Window: time.Second, At: t0.Add(at)}
	}
	p := func(until time.Duration) pace.Learned { return pace.Learned{PausedUntil: t0.Add(until)} }
	for _, tc := range []struct {
		name      string
		old, n    pace.Learned
		wantLimit int64
		wantPause time.Duration // from t0; -1: none
	}{
		{"into nothing", pace.Learned{}, q(5, 0), 5, -1},
		{"newer quota wins", q(5, 0), q(7, time.Second), 7, -1},
		{"older quota loses", q(5, time.Second), q(7, 0), 5, -1},
		{"quota without At is no quota", q(5, 0), pace.Learned{Limit: 9, Window: time.Second}, 5, -1},
		{"pause keeps the quota", q(5, 0), p(3 * time.Second), 5, 3 * time.Second},
		{"later pause wins", p(3 * time.Second), p(5 * time.Second), 0, 5 * time.Second},
		{"earlier pause loses", p(5 * time.Second), p(3 * time.Second), 0, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.old.Merge(tc.n)
			if got.Limit != tc.wantLimit {
				t.Errorf("limit %d, want %d", got.Limit, tc.wantLimit)
			}
			if tc.wantPause < 0 {
				if !got.PausedUntil.IsZero() {
					t.Errorf("paused until %v, want none", got.PausedUntil)
				}
			} else if !got.PausedUntil.Equal(t0.Add(tc.wantPause)) {
				t.Errorf("paused until %v, want t0+%v", got.PausedUntil, tc.wantPause)
			}
		})
	}
}

// The memory store is bounded: the least recently used upstream goes.
func TestMemoryStoreBounded(t *testing.T) {
	ctx := context.Background()
	s := pace.NewMemoryStore(2)
	rec := pace.Learned{Limit: 1, Window: time.Second, At: t0}
	s.Merge(ctx, "a", rec)
	s.Merge(ctx, "b", rec)
	s.Load(ctx, "a") // a is now the most recently used
	s.Merge(ctx, "c", rec)
	if pace.StoreLen(s) != 2 {
		t.Fatalf("%d records, want 2", pace.StoreLen(s))
	}
	if l, _ := s.Load(ctx, "b"); l.Limit != 0 {
		t.Fatalf("b survived: %+v", l)
	}
	for _, k := range []string{"a", "c"} {
		if l, _ := s.Load(ctx, k); l.Limit != 1 {
			t.Fatalf("%s was forgotten", k)
		}
	}
	if l, _ := s.Merge(ctx, "d", pace.Learned{}); l != (pace.Learned{}) || pace.StoreLen(s) != 2 {
		t.Fatalf("an empty merge made a record: %+v, %d records", l, pace.StoreLen(s))
	}
	if pace.NewMemoryStore(0) == nil {
		t.Fatal("nil store")
	}
}

// Two Transports and many goroutines sharing one store, with 429s now and
// then: no race, no deadlock, no error but a bounded wait.
func TestStoreConcurrent(t *testing.T) {
	clk := newStepClock()
	store := pace.NewMemoryStore(0)
	var mu sync.Mutex
	n := 0
	up := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		if i%10 == 0 {
			return resp(429, "", "Retry-After", "1", "RateLimit-Policy", `"p";q=100;w=1`), nil
		}
		return resp(200, "", "RateLimit-Policy", `"p";q=100;w=1`), nil
	})
	var wg sync.WaitGroup
	for range 2 {
		tr := pace.New(up, pace.WithClock(clk), pace.WithStore(store, 10*time.Millisecond),
			pace.WithMaxWait(5*time.Second))
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					req, _ := http.NewRequest("GET", "https://api.test/", nil)
					res, err := tr.RoundTrip(req)
					if err != nil {
						if !errors.Is(err, pace.ErrMaxWait) {
							t.Error(err)
						}
						continue
					}
					res.Body.Close()
				}
			}()
		}
	}
	wg.Wait()
	if pace.StoreLen(store) != 1 {
		t.Fatalf("%d records, want 1", pace.StoreLen(store))
	}
}

// fleet is two "processes" calling one upstream: a sees its RateLimit
// headers, b is answered without any.
func fleet(t *testing.T, store pace.Store, clk *limitertest.Clock, bOpts ...pace.Option) (a, b *pace.Transport, sa, sb *script) {
	t.Helper()
	sa = &script{clock: clk.Now, reply: func(int, *http.Request) *http.Response {
		return resp(200, "", "RateLimit-Policy", `"default";q=2;w=1`)
	}}
	sb = &script{clock: clk.Now, reply: func(int, *http.Request) *http.Response { return resp(200, "") }}
	opts := []pace.Option{pace.WithClock(clk), pace.WithJitter(noJitter), pace.WithStore(store, time.Second)}
	a = pace.New(sa, opts...)
	b = pace.New(sb, append(opts, bOpts...)...)
	return a, b, sa, sb
}

// A process that never sees the upstream's headers paces by the quota
// another process read from them: 2 per second, burst 2.
func TestStoreSharesTheQuota(t *testing.T) {
	clk := newStepClock()
	var learned []string
	hooks := pace.Hooks{Learned: func(_ context.Context, n int64, w time.Duration) { learned = append(learned, fmt.Sprint(n, "/", w)) }}
	a, b, _, sb := fleet(t, pace.NewMemoryStore(0), clk, pace.WithHooks(hooks))
	if _, err := get(t, a, "https://api.test/v1"); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := get(t, b, "https://api.test/v1"); err != nil {
			t.Fatal(err)
		}
	}
	want := []time.Duration{0, 0, 500 * time.Millisecond, time.Second}
	for i, at := range sb.times {
		if got := at.Sub(t0); got != want[i] {
			t.Fatalf("b sent at %v, want %v", offsets(sb.times), want)
		}
	}
	if fmt.Sprint(learned) != "[2/1s]" {
		t.Fatalf("b's Learned hook saw %v, want the fleet's quota once", learned)
	}
}

// The fleet's quota never raises a process's own ceiling, and does lower
// it.
func TestStoreNeverRaisesTheCeiling(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ceiling   int
		wantSleep []time.Duration
	}{
		{"ceiling below the fleet's quota", 1, []time.Duration{time.Second, time.Second}},
		{"ceiling above it", 10, []time.Duration{500 * time.Millisecond, 500 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newStepClock()
			a, b, _, _ := fleet(t, pace.NewMemoryStore(0), clk, pace.WithLimit(tc.ceiling, time.Second))
			get(t, a, "https://api.test/v1")
			for range min(tc.ceiling, 2) + 2 {
				get(t, b, "https://api.test/v1")
			}
			if got := clk.Slept(); fmt.Sprint(got) != fmt.Sprint(tc.wantSleep) {
				t.Fatalf("b slept %v, want %v", got, tc.wantSleep)
			}
		})
	}
}

// A 429 seen by one process pauses the other from its next refresh: b,
// which has never been throttled, waits out a's Retry-After.
func TestStoreSharesThePause(t *testing.T) {
	clk := newStepClock()
	store := &countingStore{Store: pace.NewMemoryStore(0)}
	a, b, sa, sb := fleet(t, store, clk)
	get(t, b, "https://api.test/v1") // b has read the (empty) store at t0
	sa.reply = func(int, *http.Request) *http.Response { return resp(429, "", "Retry-After", "3") }
	if r, _ := get(t, a, "https://api.test/v1"); r.StatusCode != 429 {
		t.Fatalf("a got %d", r.StatusCode)
	}
	clk.Advance(time.Second) // b's next refresh is due
	get(t, b, "https://api.test/v1")
	if got := sb.times[1].Sub(t0); got != 3*time.Second {
		t.Fatalf("b's second request went at +%v, want +3s (the end of a's pause)", got)
	}
}

// A pause adopted from the store gets this process's own jitter, so that
// the fleet does not restart at one instant.
func TestStorePauseJittered(t *testing.T) {
	clk := newStepClock()
	store := pace.NewMemoryStore(0)
	ctx := context.Background()
	store.Merge(ctx, "name:svc", pace.Learned{Limit: 10, Window: time.Second, At: t0, PausedUntil: t0.Add(4 * time.Second)})
	jitter := func(d time.Duration) time.Duration { return d / 4 }
	b := pace.New(nil, pace.WithClock(clk), pace.WithJitter(jitter), pace.WithStore(store, time.Second))
	if err := b.Wait(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	if got := clk.Slept(); len(got) != 1 || got[0] != 5*time.Second {
		t.Fatalf("slept %v, want [5s]: the 4 s pause plus a quarter", got)
	}
}

// The store is read once per refresh interval and upstream, not per
// request, whatever the traffic.
func TestStoreReadOncePerInterval(t *testing.T) {
	clk := newStepClock()
	store := &countingStore{Store: pace.NewMemoryStore(0)}
	up := &script{reply: func(int, *http.Request) *http.Response { return resp(200, "") }}
	tr := pace.New(up, pace.WithClock(clk), pace.WithStore(store, 2*time.Second))
	for range 100 {
		get(t, tr, "https://api.test/")
	}
	if n := store.calls(); n != 1 {
		t.Fatalf("%d store calls for 100 requests in one interval, want 1", n)
	}
	clk.Advance(1999 * time.Millisecond)
	get(t, tr, "https://api.test/")
	clk.Advance(time.Millisecond)
	for range 100 {
		get(t, tr, "https://api.test/")
	}
	if n := store.calls(); n != 2 {
		t.Fatalf("%d store calls after the interval, want 2", n)
	}
}

// A quota read from the upstream is written at once the first time and
// when it changes; repeated, it rides on the refresh.
func TestStoreWritesNewQuotaAtOnce(t *testing.T) {
	clk := newStepClock()
	store := &countingStore{Store: pace.NewMemoryStore(0)}
	q := "100"
	up := &script{reply: func(int, *http.Request) *http.Response {
		return resp(200, "", "RateLimit-Policy", `"default";q=`+q+`;w=1`)
	}}
	tr := pace.New(up, pace.WithClock(clk), pace.WithStore(store, time.Second))
	get(t, tr, "https://api.test/") // load at the start, merge the new quota
	get(t, tr, "https://api.test/") // same quota: nothing
	if store.loads != 1 || store.merge != 1 {
		t.Fatalf("%d loads, %d merges, want 1 and 1", store.loads, store.merge)
	}
	rec, _ := store.Load(context.Background(), pace.StoreKey(tr, up.sent[0]))
	if rec.Limit != 100 || rec.Window != time.Second || !rec.At.Equal(t0) {
		t.Fatalf("stored %+v", rec)
	}
	clk.Advance(time.Second)
	q = "50"
	get(t, tr, "https://api.test/") // refresh (a merge: it has news), then a new quota
	if store.merge != 3 {
		t.Fatalf("%d merges, want 3", store.merge)
	}
}

// When the store fails, requests go ahead paced by local learning, the
// failure is reported, and the store is tried again at the next refresh,
// not on every request; what was not written is written then.
func TestStoreFailsOpen(t *testing.T) {
	clk := newStepClock()
	store := &countingStore{Store: pace.NewMemoryStore(0), fail: errors.New("redis: connection refused")}
	var failures int
	hooks := pace.Hooks{StoreFailed: func(_ context.Context, err error) { failures++ }}
	up := &script{clock: clk.Now, reply: func(int, *http.Request) *http.Response {
		return resp(200, "", "RateLimit-Policy", `"default";q=2;w=1`)
	}}
	tr := pace.New(up, pace.WithClock(clk), pace.WithJitter(noJitter),
		pace.WithStore(store, 10*time.Second), pace.WithHooks(hooks))
	for range 4 {
		if _, err := get(t, tr, "https://api.test/"); err != nil {
			t.Fatal(err)
		}
	}
	if got := offsets(up.times); fmt.Sprint(got) != "[0s 0s 0s 500ms]" {
		t.Fatalf("sent at %v: local pacing should go on", got)
	}
	if n := store.calls(); n != 2 || failures != 2 { // the first load, the new quota
		t.Fatalf("%d store calls, %d failures reported; want 2 and 2", n, failures)
	}
	store.mu.Lock()
	store.fail = nil
	store.mu.Unlock()
	clk.Advance(10 * time.Second)
	get(t, tr, "https://api.test/")
	rec, _ := store.Store.Load(context.Background(), pace.StoreKey(tr, up.sent[0]))
	if rec.Limit != 2 {
		t.Fatalf("after recovery the store holds %+v, want the quota written", rec)
	}
}

// fixedStore always answers with one record.
type fixedStore struct{ rec pace.Learned }

func (s fixedStore) Load(context.Context, string) (pace.Learned, error) { return s.rec, nil }
func (s fixedStore) Merge(context.Context, string, pace.Learned) (pace.Learned, error) {
	return s.rec, nil
}

// Records that cannot be trusted are ignored as bad headers are: the
// requests go at once.
func TestStoreBadRecordsIgnored(t *testing.T) {
	for name, rec := range map[string]pace.Learned{
		"absurd limit":    {Limit: 1e12, Window: time.Second, At: t0},
		"negative limit":  {Limit: -5, Window: time.Second, At: t0},
		"zero window":     {Limit: 1, Window: 0, At: t0},
		"negative window": {Limit: 1, Window: -time.Second, At: t0},
		"tiny window":     {Limit: 1, Window: time.Microsecond, At: t0},
		"huge window":     {Limit: 1, Window: 1000 * time.Hour, At: t0},
		"no At":           {Limit: 1, Window: time.Hour},
		"from the future": {Limit: 1, Window: time.Hour, At: t0.Add(time.Hour)},
		"pause of a year": {PausedUntil: t0.Add(365 * 24 * time.Hour)},
		"pause far away":  {PausedUntil: time.Unix(1<<62, 0)},
		"pause in past":   {PausedUntil: t0.Add(-time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			clk := newStepClock()
			up := &script{reply: func(int, *http.Request) *http.Response { return resp(200, "") }}
			tr := pace.New(up, pace.WithClock(clk), pace.WithStore(fixedStore{rec}, time.Second))
			for range 3 {
				if _, err := get(t, tr, "https://api.test/"); err != nil {
					t.Fatal(err)
				}
			}
			if got := clk.Slept(); len(got) != 0 {
				t.Fatalf("slept %v for a record to ignore", got)
			}
		})
	}
}

// Whatever a store answers, a Transport neither panics nor waits longer
// than its maximum wait.
func FuzzStoreRecord(f *testing.F) {
	f.Add(int64(2), int64(time.Second), int64(0), int64(3*time.Second))
	f.Add(int64(1e12), int64(-1), int64(-1<<62), int64(1<<62))
	f.Add(int64(1), int64(time.Millisecond), int64(time.Minute), int64(0))
	f.Fuzz(func(t *testing.T, limit, window, at, paused int64) {
		rec := pace.Learned{Limit: limit, Window: time.Duration(window), At: t0.Add(time.Duration(at)), PausedUntil: t0.Add(time.Duration(paused))}
		clk := newStepClock()
		up := &script{reply: func(int, *http.Request) *http.Response { return resp(200, "") }}
		tr := pace.New(up, pace.WithClock(clk), pace.WithMaxWait(10*time.Second),
			pace.WithStore(fixedStore{rec}, time.Second))
		for range 3 {
			start := clk.Now()
			req, _ := http.NewRequest("GET", "https://api.test/", nil)
			res, err := tr.RoundTrip(req)
			if err == nil {
				res.Body.Close()
			} else if !errors.Is(err, pace.ErrMaxWait) {
				t.Fatalf("err %v", err)
			}
			if waited := clk.Now().Sub(start); waited > 10*time.Second {
				t.Fatalf("waited %v, more than the maximum wait", waited)
			}
		}
	})
}

func offsets(ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, at := range ts {
		out[i] = at.Sub(t0)
	}
	return out
}

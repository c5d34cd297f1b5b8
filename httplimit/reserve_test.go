package httplimit_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/racecheck"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// connStack is a real Stack: slots in-flight requests per caller, and
// requests with X-Op: blocked denied by a requests limit (rate 0).
func connStack(t *testing.T, slots int64) *stack.Stack {
	t.Helper()
	cfg := stack.Config{RateLimits: []stack.RateLimit{
		{RateLimitID: "in-flight", DimensionKeys: []string{"caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Connections: []stack.Rate{{Rate: slots, Period: "second"}}}}},
		{RateLimitID: "blocked-op", DimensionKeys: []string{"op", "caller"},
			Entries: []stack.Entry{{Dimensions: map[string]string{"op": "blocked", "caller": "*"}, Requests: []stack.Rate{{Rate: 0, Period: "second"}}}}},
	}}
	s, err := stack.New(cfg, stack.WithClock(limitertest.NewClock(limitertest.Start)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func callerOpKey(r *http.Request) (sluice.Keys, error) {
	k := sluice.NewKeys("caller", r.Header.Get("X-Caller"))
	if op := r.Header.Get("X-Op"); op != "" {
		k.Set("op", op)
	}
	return k, nil
}

// connServer serves, behind the middleware: /block (reports on started,
// then waits for a value on release or for the request context to end),
// /panic (panics) and anything else (answers "ok"). An outer handler
// recovers panics (answering 500) and reports every request that has left
// the middleware on done, so tests know its slot was released.
type connServer struct {
	*httptest.Server
	started chan struct{}
	release chan struct{}
	quit    chan struct{} // closed at cleanup, so a failed test never hangs
	done    chan string
	panics  atomic.Int32
}

func newConnServer(t *testing.T, l sluice.Limiter, opts ...httplimit.Option) *connServer {
	t.Helper()
	cs := &connServer{started: make(chan struct{}, 100), release: make(chan struct{}), quit: make(chan struct{}), done: make(chan string, 100)}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/block":
			cs.started <- struct{}{}
			select {
			case <-cs.release:
			case <-cs.quit:
			case <-r.Context().Done():
				return
			}
		case "/panic":
			panic("handler failed")
		}
		_, _ = io.WriteString(w, "ok")
	})
	mw := httplimit.New(l, callerOpKey, opts...)(inner)
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				cs.panics.Add(1)
				w.WriteHeader(http.StatusInternalServerError)
			}
			cs.done <- r.URL.Path
		}()
		mw.ServeHTTP(w, r)
	}))
	t.Cleanup(cs.Close)
	t.Cleanup(func() { close(cs.quit) }) // runs before Close
	return cs
}

// do sends a request and returns the status and, on a 429, the metric.
func (cs *connServer) do(t *testing.T, ctx context.Context, path, op string) (int, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cs.URL+path, nil)
	req.Header.Set("X-Caller", "alice")
	if op != "" {
		req.Header.Set("X-Op", op)
	}
	res, err := cs.Client().Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	var b struct{ Metric string }
	if res.StatusCode == http.StatusTooManyRequests {
		if jerr := json.Unmarshal(body, &b); jerr != nil {
			t.Errorf("429 body %q: %v", body, jerr)
		}
	}
	return res.StatusCode, b.Metric, err
}

// blockAsync starts a /block request and waits until its handler runs; the
// returned channel gets its status once it finishes.
func (cs *connServer) blockAsync(t *testing.T, ctx context.Context) <-chan int {
	t.Helper()
	ch := make(chan int, 1)
	go func() {
		code, _, _ := cs.do(t, ctx, "/block", "")
		ch <- code
	}()
	select {
	case <-cs.started:
	case code := <-ch:
		t.Fatalf("/block not admitted: status %d", code)
	}
	return ch
}

func (cs *connServer) wantDenied(t *testing.T, what string) {
	t.Helper()
	code, metric, err := cs.do(t, context.Background(), "/", "")
	if err != nil || code != http.StatusTooManyRequests || metric != "connections" {
		t.Fatalf("%s: status %d metric %q err %v, want 429 connections", what, code, metric, err)
	}
	<-cs.done
}

func TestConnectionsAcquireRelease(t *testing.T) {
	cs := newConnServer(t, connStack(t, 2))
	ctx := context.Background()

	// Denied by the requests limit: no slot is held, so both slots stay free.
	for range 5 {
		if code, metric, err := cs.do(t, ctx, "/", "blocked"); err != nil || code != 429 || metric != "requests" {
			t.Fatalf("blocked op: %d %q %v", code, metric, err)
		}
		<-cs.done
	}
	first := cs.blockAsync(t, ctx)
	second := cs.blockAsync(t, ctx)
	cs.wantDenied(t, "third concurrent request")

	// One finishes (either: both wait on the same channel), and exactly one
	// more is admitted.
	cs.release <- struct{}{}
	var code int
	select {
	case code = <-first:
	case code = <-second:
		second = first
	}
	if code != 200 {
		t.Fatalf("released request: %d", code)
	}
	<-cs.done
	third := cs.blockAsync(t, ctx)
	cs.wantDenied(t, "after one slot was reused")

	cs.release <- struct{}{}
	cs.release <- struct{}{}
	if a, b := <-second, <-third; a != 200 || b != 200 {
		t.Fatalf("statuses %d %d", a, b)
	}
	<-cs.done
	<-cs.done
}

func TestConnectionsReleasedOnPanic(t *testing.T) {
	cs := newConnServer(t, connStack(t, 2))
	ctx := context.Background()
	held := cs.blockAsync(t, ctx)
	for i := range 3 { // each panic takes the second slot and must give it back
		if code, _, err := cs.do(t, ctx, "/panic", ""); err != nil || code != 500 {
			t.Fatalf("panic %d: status %d err %v", i, code, err)
		}
		<-cs.done
	}
	if cs.panics.Load() != 3 {
		t.Fatalf("the panic did not reach the outer handler: %d", cs.panics.Load())
	}
	second := cs.blockAsync(t, ctx) // admitted: the panics released their slot
	cs.wantDenied(t, "both slots held")
	cs.release <- struct{}{}
	cs.release <- struct{}{}
	<-held
	<-second
	<-cs.done
	<-cs.done
}

func TestConnectionsReleasedOnClientDisconnect(t *testing.T) {
	cs := newConnServer(t, connStack(t, 1))
	ctx, cancel := context.WithCancel(context.Background())
	gone := cs.blockAsync(t, ctx)
	cs.wantDenied(t, "slot held by the connected client")
	cancel() // the client goes away mid-request
	<-gone
	if path := <-cs.done; path != "/block" {
		t.Fatalf("done %q", path)
	}
	held := cs.blockAsync(t, context.Background())
	cs.wantDenied(t, "slot retaken")
	cs.release <- struct{}{}
	if code := <-held; code != 200 {
		t.Fatalf("status %d", code)
	}
	<-cs.done
}

// TestWithoutReserve: with the opt-out, Allow decides and connections limits
// take no slot, so more than the slots run at once.
func TestWithoutReserve(t *testing.T) {
	cs := newConnServer(t, connStack(t, 1), httplimit.WithoutReserve())
	ctx := context.Background()
	a := cs.blockAsync(t, ctx)
	b := cs.blockAsync(t, ctx)
	cs.release <- struct{}{}
	cs.release <- struct{}{}
	if x, y := <-a, <-b; x != 200 || y != 200 {
		t.Fatalf("statuses %d %d", x, y)
	}
}

// TestConnectionsBoundUnderLoad: many clients at once; the handler counts
// how many run concurrently and the count never exceeds the slots, while
// every request is either served or told 429 connections.
func TestConnectionsBoundUnderLoad(t *testing.T) {
	const slots = 3
	var inFlight, peak, served atomic.Int32
	h := httplimit.New(connStack(t, slots), callerOpKey)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		served.Add(1)
		inFlight.Add(-1)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	var wg sync.WaitGroup
	var denied atomic.Int32
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				req.Header.Set("X-Caller", "shared")
				res, err := srv.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				switch res.StatusCode {
				case 200:
				case 429:
					var b struct{ Metric string }
					if json.Unmarshal(body, &b) != nil || b.Metric != "connections" {
						t.Errorf("429 body %q", body)
					}
					denied.Add(1)
				default:
					t.Errorf("status %d", res.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	if peak.Load() > slots || peak.Load() < 1 {
		t.Errorf("peak in flight %d, want 1..%d", peak.Load(), slots)
	}
	if served.Load() <= slots { // slots are given back and reused
		t.Errorf("served %d, want more than the %d slots", served.Load(), slots)
	}
	if served.Load()+denied.Load() != 16*25 {
		t.Errorf("served %d + denied %d != %d", served.Load(), denied.Load(), 16*25)
	}
}

// TestReserveAddsNoAllocation: through the middleware, a reserved request
// allocates what its KeyFunc and Reserve+Reconcile allocate, nothing more.
func TestReserveAddsNoAllocation(t *testing.T) {
	if racecheck.Enabled || testing.CoverMode() != "" {
		t.Skip("allocation counts differ under -race and coverage")
	}
	s := benchStack(t)
	keys := httplimit.ClientIPKey("ip", nil)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	var served int
	h := httplimit.New(s, keys)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	w := discard{h: http.Header{}}
	viaMiddleware := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, req) })
	direct := testing.AllocsPerRun(1000, func() {
		k, _ := keys(req)
		r, d, err := s.Reserve(context.Background(), k, 0)
		if err != nil || !d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
		_ = r.Reconcile(0)
	})
	if served < 1000 {
		t.Fatalf("handler ran %d times", served)
	}
	if viaMiddleware > direct {
		t.Errorf("middleware allocates %.1f per request, Reserve+Reconcile alone %.1f", viaMiddleware, direct)
	}
}

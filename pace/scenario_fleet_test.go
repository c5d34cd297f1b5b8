package pace_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/pace"
)

// runFleetScenario runs eight processes, each with its own Transport and
// two workers, for 60 simulated seconds against one loopback server that
// gives a fixed window of 50 requests per 5 seconds and sends no limit
// headers: past the window's 50, it answers 429 with a Retry-After until
// the window ends. Each worker sends a request a second: 16/s offered,
// 10/s allowed. With store, the Transports share a MemoryStore.
func runFleetScenario(t testing.TB, store bool) scenario {
	const (
		processes = 8
		workers   = 2 // per process
		think     = time.Second
		duration  = 60 * time.Second
		window    = 5 * time.Second
		quota     = 50
	)
	vc := newVSched()
	var (
		mu          sync.Mutex
		windowStart = t0
		used        int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		now := vc.Now()
		for !now.Before(windowStart.Add(window)) {
			windowStart, used = windowStart.Add(window), 0
		}
		used++
		over, left := used > quota, windowStart.Add(window).Sub(now)
		mu.Unlock()
		if over {
			w.Header().Set("Retry-After", strconv.Itoa(int((left+time.Second-1)/time.Second)))
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	shared := pace.NewMemoryStore(0)
	end := t0.Add(duration)
	var res scenario
	vc.Go(func() {
		for p := range processes {
			base := &http.Transport{MaxIdleConnsPerHost: workers}
			defer base.CloseIdleConnections()
			opts := []pace.Option{pace.WithClock(vc), pace.WithMaxWait(time.Minute)}
			if store {
				opts = append(opts, pace.WithStore(shared, time.Second))
			}
			rt := pace.New(base, opts...)
			for i := range workers {
				vc.Go(func() {
					ctx := context.Background()
					_ = vc.Sleep(ctx, time.Duration(p*workers+i)*think/(processes*workers))
					res.work(ctx, vc, rt, srv.URL, end, think)
				})
			}
		}
	})
	vc.Wait()
	res.elapsed = duration
	return res
}

// Alone, each process meets the end of every window with a 429 of its
// own; sharing a store, the first 429 pauses the others from their next
// refresh: at most half as many 429s, for as many requests served.
func TestScenarioFleetStore(t *testing.T) {
	alone := runFleetScenario(t, false)
	shared := runFleetScenario(t, true)
	t.Logf("eight processes, each learning alone: %v", alone)
	t.Logf("eight processes sharing a store:      %v", shared)
	if alone.errs != 0 || shared.errs != 0 {
		t.Errorf("errors: %d alone, %d shared", alone.errs, shared.errs)
	}
	if shared.throttled*2 > alone.throttled {
		t.Errorf("sharing a store: %d 429s, not at most half of the %d alone", shared.throttled, alone.throttled)
	}
	if float64(shared.ok) < 0.95*float64(alone.ok) {
		t.Errorf("sharing a store served %d, alone %d", shared.ok, alone.ok)
	}
}

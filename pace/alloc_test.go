package pace_test

import (
	"io"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/cputime"
	"github.com/sluicehq/sluice/pace"
)

// cannedUpstream answers every request with the same response: an
// upstream with quota to spare, announced in the IETF fields, so the
// pacer parses them on every response but never waits.
type cannedUpstream struct{ res *http.Response }

func newCannedUpstream() *cannedUpstream {
	h := http.Header{}
	h.Set("RateLimit-Policy", `"default";q=1000000000;w=1`)
	h.Set("RateLimit", `"default";r=999999999;t=1`)
	h.Set("Content-Type", "application/json")
	return &cannedUpstream{res: &http.Response{StatusCode: 200, Header: h, Body: http.NoBody}}
}

func (c *cannedUpstream) RoundTrip(*http.Request) (*http.Response, error) { return c.res, nil }

func benchRequest() *http.Request {
	req, _ := http.NewRequest("POST", "https://api.openai.test/v1/chat/completions", strings.NewReader(""))
	req.Body = http.NoBody
	req.Header.Set("Authorization", "Bearer sk-0123456789abcdef0123456789abcdef")
	return req
}

// Pacing a request that needs no wait allocates at most 2 objects more
// than sending it directly (it allocates none today).
func TestNoWaitAllocs(t *testing.T) {
	up := newCannedUpstream()
	tr := pace.New(up)
	req := benchRequest()
	direct := testing.AllocsPerRun(1000, func() { _, _ = up.RoundTrip(req) })
	paced := testing.AllocsPerRun(1000, func() { _, _ = tr.RoundTrip(req) })
	if paced-direct > 2 {
		t.Fatalf("pacing adds %.1f allocations per request, want ≤ 2", paced-direct)
	}
	t.Logf("allocations per request: direct %.0f, paced %.0f", direct, paced)
}

// With a Store, a request that needs no wait still allocates at most 2
// objects more than sending it directly: the store is read once per
// refresh interval, not per request.
func TestNoWaitAllocsWithStore(t *testing.T) {
	up := newCannedUpstream()
	store := pace.NewMemoryStore(0)
	tr := pace.New(up, pace.WithStore(store, 0))
	req := benchRequest()
	direct := testing.AllocsPerRun(1000, func() { _, _ = up.RoundTrip(req) })
	paced := testing.AllocsPerRun(1000, func() { _, _ = tr.RoundTrip(req) })
	if paced-direct > 2 {
		t.Fatalf("pacing with a store adds %.1f allocations per request, want ≤ 2", paced-direct)
	}
	if pace.StoreLen(store) != 1 {
		t.Fatalf("the store holds %d upstreams, want 1", pace.StoreLen(store))
	}
	t.Logf("allocations per request: direct %.0f, paced with a store %.0f", direct, paced)
}

// BenchmarkNoWait measures what pacing adds to a request that needs no
// wait: the same canned upstream called directly and through a Transport,
// sides interleaved by sub-benchmark order; compare with
// go test -bench NoWait -benchmem -count 10 and benchstat-style medians.
func BenchmarkNoWait(b *testing.B) {
	up := newCannedUpstream()
	for _, side := range []string{"direct", "paced", "paced-store"} {
		var rt http.RoundTripper = up
		switch side {
		case "paced":
			rt = pace.New(up)
		case "paced-store":
			rt = pace.New(up, pace.WithStore(pace.NewMemoryStore(0), 0))
		}
		b.Run(side, func(b *testing.B) {
			req := benchRequest()
			b.ReportAllocs()
			for b.Loop() {
				res, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
			}
		})
		b.Run(side+"-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := benchRequest()
				for pb.Next() {
					if _, err := rt.RoundTrip(req); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkNoWaitCPU interleaves blocks of direct and paced requests on one
// locked OS thread and reports the median CPU time per request of each
// side and their difference, the overhead of pacing: on two shared,
// noisy cores, CPU time is what a side used, where ns/op also counts
// waiting for a core.
func BenchmarkNoWaitCPU(b *testing.B) {
	if cputime.Thread() < 0 {
		b.Skip("no thread CPU clock on this platform")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	up := newCannedUpstream()
	tr := pace.New(up)
	req := benchRequest()
	const block = 2000
	var direct, paced []float64
	measure := func(rt http.RoundTripper) float64 {
		start := cputime.Thread()
		for range block {
			if _, err := rt.RoundTrip(req); err != nil {
				b.Fatal(err)
			}
		}
		return float64(cputime.Thread()-start) / block
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 { // alternate which side goes first
			direct = append(direct, measure(up))
			paced = append(paced, measure(tr))
		} else {
			paced = append(paced, measure(tr))
			direct = append(direct, measure(up))
		}
	}
	md, mp := median(direct), median(paced)
	b.ReportMetric(md, "direct-cpu-ns/req")
	b.ReportMetric(mp, "paced-cpu-ns/req")
	b.ReportMetric(mp-md, "overhead-cpu-ns/req")
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

package envoyrls_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/stack/limitertest"
)

const twoLimits = `domain: api
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: route
    rate_limit: {name: per-route, unit: minute, requests_per_unit: 2}
  - key: ten
    rate_limit: {unit: minute, requests_per_unit: 10}
`

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

// The descriptors of a request are ANDed, all or nothing: the request the
// route limit denies takes nothing from the tenant's bucket, and the status
// of each descriptor says which one is over.
func TestDescriptorsAreAllOrNothing(t *testing.T) {
	_, c, _ := newServer(t, load(t, "api.yaml", twoLimits))
	for i := range 2 {
		if r := ask(t, c, "api", desc("tenant", "a"), desc("route", "/x")); r.OverallCode != ok {
			t.Fatalf("request %d: %v", i, r)
		}
	}
	for i := range 5 {
		r := ask(t, c, "api", desc("tenant", "a"), desc("route", "/x"))
		if r.OverallCode != over || r.Statuses[0].Code != ok || r.Statuses[1].Code != over {
			t.Fatalf("denied request %d: %v", i, r)
		}
		if r.Statuses[0].LimitRemaining != 3 {
			t.Fatalf("denied request %d: tenant remaining %d, want 3 (nothing taken)", i, r.Statuses[0].LimitRemaining)
		}
		if meta(r, envoyrls.MetaDeniedBy) != "per-route" || meta(r, envoyrls.MetaDescriptor) != float64(1) {
			t.Fatalf("metadata %v", r.DynamicMetadata)
		}
	}
	if got := countOK(t, c, 5, "api", desc("tenant", "a")); got != 3 {
		t.Errorf("tenant alone afterwards: %d OK, want 3", got)
	}
	// Both over: both statuses say so, and the first one is named.
	r := ask(t, c, "api", desc("tenant", "a"), desc("route", "/x"))
	if r.Statuses[0].Code != over || r.Statuses[1].Code != over || meta(r, envoyrls.MetaDeniedBy) != "api.tenant" {
		t.Errorf("both over: %v", r)
	}
}

// hits_addend: the request's (0 means 1), overridden by a descriptor's own,
// where an explicit 0 checks without consuming; a cost above the limit is
// over whatever the wait.
func TestHitsAddend(t *testing.T) {
	_, c, _ := newServer(t, load(t, "api.yaml", twoLimits))
	r := askReq(t, c, &rlsv3.RateLimitRequest{Domain: "api", HitsAddend: 4, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("ten", "t")}})
	if r.OverallCode != ok || r.Statuses[0].LimitRemaining != 6 {
		t.Fatalf("request hits 4: %v", r)
	}
	r = askReq(t, c, &rlsv3.RateLimitRequest{Domain: "api", HitsAddend: 4, Descriptors: []*ratelimitv3.RateLimitDescriptor{hits(desc("ten", "t"), 5)}})
	if r.OverallCode != ok || r.Statuses[0].LimitRemaining != 1 {
		t.Fatalf("descriptor hits 5 over request hits 4: %v", r)
	}
	for range 3 {
		r = ask(t, c, "api", hits(desc("ten", "t"), 0))
		if r.OverallCode != ok || r.Statuses[0].LimitRemaining != 1 {
			t.Fatalf("explicit 0 consumed or denied: %v", r)
		}
	}
	r = ask(t, c, "api", hits(desc("ten", "t"), 2))
	if r.OverallCode != over || r.Statuses[0].LimitRemaining != 1 {
		t.Fatalf("2 with 1 left: %v", r)
	}
	r = askReq(t, c, &rlsv3.RateLimitRequest{Domain: "api", HitsAddend: 11, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("ten", "other")}})
	if r.OverallCode != over {
		t.Fatalf("11 against a limit of 10: %v", r)
	}
	if r := ask(t, c, "api", desc("ten", "other")); r.Statuses[0].LimitRemaining != 9 {
		t.Fatalf("the refused 11 took something: %v", r)
	}
}

// duration_until_reset is exact on a manual clock and never early: the time
// to refill to full while allowed, the wait until the request passes when
// over.
func TestDurationUntilResetIsExact(t *testing.T) {
	_, c, clock := newServer(t, load(t, "api.yaml", twoLimits))
	var r *rlsv3.RateLimitResponse
	for range 4 {
		r = ask(t, c, "api", desc("ten", "d"))
	}
	if st := r.Statuses[0]; st.LimitRemaining != 6 || st.DurationUntilReset.AsDuration() != 24*time.Second {
		t.Fatalf("4 of 10 a minute taken: %v, want 6 left, full in 24s", st)
	}
	clock.Advance(6 * time.Second)
	r = ask(t, c, "api", hits(desc("ten", "d"), 0))
	if st := r.Statuses[0]; st.LimitRemaining != 7 || st.DurationUntilReset.AsDuration() != 18*time.Second {
		t.Fatalf("6 s later: %v, want 7 left, full in 18s", st)
	}
	for range 7 {
		ask(t, c, "api", desc("ten", "d"))
	}
	r = ask(t, c, "api", desc("ten", "d"))
	st := r.Statuses[0]
	if r.OverallCode != over || st.DurationUntilReset.AsDuration() != 6*time.Second || meta(r, envoyrls.MetaRetryAfterMs) != float64(6000) {
		t.Fatalf("spent: %v", r)
	}
	clock.Advance(6*time.Second - time.Microsecond)
	if r := ask(t, c, "api", desc("ten", "d")); r.OverallCode != over {
		t.Fatalf("1 µs before duration_until_reset: %v", r)
	}
	clock.Advance(time.Microsecond)
	if r := ask(t, c, "api", desc("ten", "d")); r.OverallCode != ok {
		t.Fatalf("at duration_until_reset: %v", r)
	}
}

// A descriptor's limit override is honoured, unit_multiplier included: 3
// per 30 seconds is one every 10 s. The same with unit_multiplier in YAML.
func TestLimitOverrideAndUnitMultiplier(t *testing.T) {
	_, c, clock := newServer(t, load(t, "api.yaml", twoLimits))
	d := desc("tenant", "o")
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_SECOND, UnitMultiplier: wrapperspb.UInt32(30)}
	for range 3 {
		if r := ask(t, c, "api", d); r.OverallCode != ok {
			t.Fatalf("override: %v", r)
		}
	}
	r := ask(t, c, "api", d)
	cl := r.Statuses[0].CurrentLimit
	if r.OverallCode != over || cl.RequestsPerUnit != 3 || cl.Unit != rlsv3.RateLimitResponse_RateLimit_SECOND || cl.UnitMultiplier.GetValue() != 30 ||
		r.Statuses[0].DurationUntilReset.AsDuration() != 10*time.Second {
		t.Fatalf("override spent: %v", r)
	}
	clock.Advance(10 * time.Second)
	if r := ask(t, c, "api", d); r.OverallCode != ok {
		t.Fatalf("10 s later: %v", r)
	}

	cfg, err := envoyrls.Load("testdata/edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, c2, _ := newServer(t, cfg)
	if got := countOK(t, c2, 5, "edge", desc("burst", "b")); got != 3 {
		t.Fatalf("3 per 30 s from YAML: %d OK", got)
	}
	if r := ask(t, c2, "edge", desc("burst", "b")); r.Statuses[0].DurationUntilReset.AsDuration() != 10*time.Second ||
		r.Statuses[0].CurrentLimit.UnitMultiplier.GetValue() != 30 {
		t.Fatalf("YAML unit_multiplier: %v", r)
	}
}

// IETF RateLimit-Policy and RateLimit name every descriptor that limits.
func TestRateLimitHeadersForEveryDescriptor(t *testing.T) {
	_, c, _ := newServer(t, load(t, "api.yaml", twoLimits))
	r := ask(t, c, "api", desc("tenant", "h"), desc("other", "x"), desc("route", "/h"))
	if got, want := header(r, "RateLimit-Policy"), `"api.tenant";q=5;w=60, "per-route";q=2;w=60`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	if got, want := header(r, "RateLimit"), `"api.tenant";r=4;t=12, "per-route";r=1;t=30`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	ask(t, c, "api", desc("route", "/h"))
	r = ask(t, c, "api", desc("tenant", "h"), desc("route", "/h"))
	if got, want := header(r, "RateLimit"), `"api.tenant";r=4;t=12, "per-route";r=0;t=30`; got != want {
		t.Errorf("denied: RateLimit %q, want %q", got, want)
	}
}

// Bad requests get InvalidArgument saying what and where, and consume
// nothing; an unknown domain is OK with no limit.
func TestBadRequestsAreInvalidArgument(t *testing.T) {
	_, c, _ := newServer(t, load(t, "api.yaml", twoLimits))
	many := make([]*ratelimitv3.RateLimitDescriptor, 10_000)
	for i := range many {
		many[i] = desc("tenant", "b")
	}
	deep := desc()
	for range 20 {
		deep.Entries = append(deep.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "tenant", Value: "b"})
	}
	badUnit := desc("tenant", "b")
	badUnit.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}
	zeroMult := desc("tenant", "b")
	zeroMult.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_SECOND, UnitMultiplier: wrapperspb.UInt32(0)}
	longPeriod := desc("tenant", "b")
	longPeriod.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_YEAR, UnitMultiplier: wrapperspb.UInt32(5)}
	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{"empty domain", &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "b")}}, "domain: empty"},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "api"}, "descriptors: none"},
		{"descriptor without entries", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "b"), desc()}}, "descriptors[1]: no entries"},
		{"empty key", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "b", "", "v")}}, "descriptors[0].entries[1].key: empty"},
		{"64 KB value", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", strings.Repeat("x", 64<<10))}}, "descriptors[0].entries[0].value: 65536 bytes, at most 1024"},
		{"10,000 descriptors", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: many}, "descriptors: 10000, at most 64"},
		{"20 entries", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{deep}}, "descriptors[0].entries: 20, at most 16"},
		{"override without a unit", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{badUnit}}, "descriptors[0].limit.unit: UNKNOWN"},
		{"unit_multiplier 0", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{zeroMult}}, "descriptors[0].limit.unit_multiplier: 0"},
		{"period of 5 years", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{longPeriod}}, "descriptors[0].limit: period of 5 years"},
		{"huge hits_addend", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{hits(desc("tenant", "b"), 1<<62)}}, "descriptors[0].hits_addend"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.ShouldRateLimit(context.Background(), tc.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want InvalidArgument containing %q", err, tc.want)
			}
		})
	}
	if r := ask(t, c, "api", desc("tenant", "b")); r.Statuses[0].LimitRemaining != 4 {
		t.Errorf("a bad request consumed: %v", r)
	}
	if r := ask(t, c, "nowhere", desc("tenant", "b")); r.OverallCode != ok || r.Statuses[0].CurrentLimit != nil {
		t.Errorf("unknown domain: %v", r)
	}
}

// A reload keeps bucket state for the rules it keeps; a bad file keeps the
// last good configuration.
func TestReloadKeepsStateAndTheLastGoodConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("api.yaml", twoLimits)
	cfg, err := envoyrls.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, c, _ := newServer(t, cfg)
	var reported []error
	w := envoyrls.NewWatcher(srv, dir, func(err error) { reported = append(reported, err) })
	if reloaded, err := w.Check(); reloaded || err != nil {
		t.Fatalf("unchanged files: %v %v", reloaded, err)
	}
	if got := countOK(t, c, 3, "api", desc("tenant", "r")); got != 3 {
		t.Fatalf("%d OK", got)
	}
	// A new file and a changed rule elsewhere: the tenant bucket keeps its 2.
	write("more.yaml", "domain: more\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	write("api.yaml", strings.Replace(twoLimits, "requests_per_unit: 2}", "requests_per_unit: 4}", 1))
	if reloaded, err := w.Check(); !reloaded || err != nil {
		t.Fatalf("changed files: %v %v", reloaded, err)
	}
	if got := countOK(t, c, 5, "api", desc("tenant", "r")); got != 2 {
		t.Errorf("after reload: %d OK, want the 2 left before it", got)
	}
	if got := countOK(t, c, 6, "api", desc("route", "r")); got != 4 {
		t.Errorf("changed rule: %d OK, want 4", got)
	}
	// A bad file: refused, reported once, the last good configuration stays.
	write("more.yaml", "domain: more\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	if reloaded, err := w.Check(); reloaded || err == nil || !strings.Contains(err.Error(), "more.yaml:4: descriptors[0].rate_limit.unit") {
		t.Fatalf("bad file: %v %v", reloaded, err)
	}
	if reloaded, err := w.Check(); reloaded || err != nil {
		t.Fatalf("the same bad file again: %v %v", reloaded, err)
	}
	if len(reported) != 1 {
		t.Errorf("error handler heard %d errors, want 1", len(reported))
	}
	if r := ask(t, c, "more", desc("k", "v")); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 1 {
		t.Errorf("the last good configuration is gone: %v", r)
	}
	if r := ask(t, c, "api", desc("tenant", "r")); r.OverallCode != over {
		t.Errorf("a refused reload reset the buckets: %v", r)
	}
}

// Start checks on its own goroutine at every tick; Close stops it, stops
// its ticker and waits. The ticks are the test's: each step is an event,
// and an unbuffered tick is taken only when the previous Check is done.
func TestWatcherStartAndClose(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.yaml")
	if err := os.WriteFile(path, []byte(twoLimits), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := envoyrls.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := envoyrls.New(cfg)
	var reported []error // written by the watcher's goroutine, read after a tick is taken
	w := envoyrls.NewWatcher(srv, path, func(err error) { reported = append(reported, err) })
	ticks, stopped, checked := make(chan time.Time), make(chan struct{}), make(chan struct{})
	envoyrls.TickWith(w, ticks, stopped)
	envoyrls.AfterCheck(w, func() { checked <- struct{}{} })
	w.Start(time.Hour)
	// Each tick waits for its Check to end, so the test never writes the
	// file while its own watcher reads it.
	tick := func() { ticks <- time.Time{}; <-checked }
	// A tick with nothing changed reloads nothing.
	tick()
	if got := srv.Config().Domains(); len(got) != 1 || got[0] != "api" {
		t.Fatalf("domains %v before any change, want [api]", got)
	}
	if err := os.WriteFile(path, []byte("domain: moved\ndescriptors: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tick()
	if got := srv.Config().Domains(); len(got) != 1 || got[0] != "moved" {
		t.Fatalf("domains %v after one tick on a changed file, want [moved]", got)
	}
	if len(reported) != 0 {
		t.Fatalf("errors reported: %v", reported)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("Close returned with the ticker still running")
	}
	select {
	case ticks <- time.Time{}:
		t.Fatal("a tick was taken after Close")
	default:
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Every denial says when to retry or that no wait helps: a rule of 0
// requests, or a request of more hits than the limit, is permanent and has
// no retry_after_ms; a denial of a rule that refills has retry_after_ms and
// is not permanent.
func TestDenialSaysWhenOrNever(t *testing.T) {
	srv := envoyrls.New(load(t, "api.yaml", `domain: api
descriptors:
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: route
    rate_limit: {unit: minute, requests_per_unit: 2}
`), envoyrls.WithClock(limitertest.NewClock(limitertest.Start)))
	call := func(hits uint32, d *ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
		t.Helper()
		r, err := srv.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "api", HitsAddend: hits, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for name, r := range map[string]*rlsv3.RateLimitResponse{
		"rate 0":          call(1, desc("blocked", "x")),
		"hits over limit": call(3, desc("route", "/a")),
	} {
		if r.OverallCode != over || meta(r, envoyrls.MetaPermanent) != true || meta(r, envoyrls.MetaRetryAfterMs) != nil {
			t.Errorf("%s: %v permanent=%v retry_after_ms=%v, want OVER_LIMIT, permanent, no wait", name, r.OverallCode,
				meta(r, envoyrls.MetaPermanent), meta(r, envoyrls.MetaRetryAfterMs))
		}
	}
	call(2, desc("route", "/b"))
	r := call(1, desc("route", "/b"))
	if r.OverallCode != over || meta(r, envoyrls.MetaPermanent) != nil || meta(r, envoyrls.MetaRetryAfterMs) != float64(30000) {
		t.Errorf("refilling rule: %v permanent=%v retry_after_ms=%v, want OVER_LIMIT, a 30000 ms wait", r.OverallCode,
			meta(r, envoyrls.MetaPermanent), meta(r, envoyrls.MetaRetryAfterMs))
	}
}

// A file read empty (truncated by a writer) or changing under the read is
// refused silently once: not reported when the next read is good, reported
// when the next read is the same. The last good configuration stays.
func TestWatcherMidWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(twoLimits)
	cfg, err := envoyrls.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := envoyrls.New(cfg)
	var reported []error
	w := envoyrls.NewWatcher(srv, path, func(err error) { reported = append(reported, err) })
	check := func(wantReloaded, wantErr bool) {
		t.Helper()
		reloaded, err := w.Check()
		if reloaded != wantReloaded || (err != nil) != wantErr {
			t.Fatalf("Check: %v %v, want reloaded %v, error %v", reloaded, err, wantReloaded, wantErr)
		}
	}
	write("") // truncated, not yet written
	check(false, false)
	write("domain: moved\ndescriptors: []\n")
	check(true, false)
	if len(reported) != 0 {
		t.Fatalf("reported %v for a file read mid-write", reported)
	}
	// Half-written, and finished between the two reads.
	write("domain: half\ndescriptors:\n  - key")
	envoyrls.BetweenReads(w, func() { write("domain: half\ndescriptors: []\n") })
	check(false, false)
	envoyrls.BetweenReads(w, nil)
	check(true, false)
	if got := srv.Config().Domains(); len(got) != 1 || got[0] != "half" || len(reported) != 0 {
		t.Fatalf("domains %v, reported %v", got, reported)
	}
	// Empty and staying empty: reported at the second read, once.
	write("")
	check(false, false)
	check(false, true)
	check(false, false)
	if len(reported) != 1 || srv.Config().Domains()[0] != "half" {
		t.Fatalf("reported %v, domains %v", reported, srv.Config().Domains())
	}
}

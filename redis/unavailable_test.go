package redis_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// events records what a Stack's error handler hears.
type events struct {
	mu   sync.Mutex
	errs []error
}

func (e *events) handle(err error) {
	e.mu.Lock()
	e.errs = append(e.errs, err)
	e.mu.Unlock()
}

// take returns and clears what was heard.
func (e *events) take() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.errs
	e.errs = nil
	return out
}

// fallbacks returns the FallbackErrors among errs.
func fallbacks(errs []error) []*stack.FallbackError {
	var out []*stack.FallbackError
	for _, err := range errs {
		var fe *stack.FallbackError
		if errors.As(err, &fe) {
			out = append(out, fe)
		}
	}
	return out
}

var perCaller10 = stack.Config{RateLimits: []stack.RateLimit{{RateLimitID: "rl", DimensionKeys: []string{"caller"},
	Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 10, Period: stack.Second}}}}}}}

// policyStacks are three Stacks on one server, one per failure policy.
type policyStacks struct {
	open, closed, local *stack.Stack
	openEv, localEv     events
	clock               *limitertest.Clock
}

func newPolicyStacks(t *testing.T, client redis.UniversalClient) *policyStacks {
	t.Helper()
	p := &policyStacks{clock: limitertest.NewClock(time.Now())}
	mk := func(name string, extra ...sluiceredis.Option) *sluiceredis.Backend {
		b, err := sluiceredis.New(client, append([]sluiceredis.Option{sluiceredis.WithKeyPrefix(uniquePrefix(name)),
			sluiceredis.WithClock(p.clock), sluiceredis.WithTimeout(200 * time.Millisecond),
			sluiceredis.WithProbeInterval(policyProbe)}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var err error
	if p.open, err = stack.New(perCaller10, stack.WithBackend(mk("open")), stack.WithClock(p.clock),
		stack.WithErrorHandler(p.openEv.handle)); err != nil {
		t.Fatal(err)
	}
	if p.closed, err = stack.New(perCaller10, stack.WithBackend(mk("closed")), stack.WithClock(p.clock),
		stack.WithFailClosed()); err != nil {
		t.Fatal(err)
	}
	if p.local, err = stack.New(perCaller10, stack.WithBackend(mk("local", sluiceredis.WithLocalFallback(0.5))),
		stack.WithClock(p.clock), stack.WithFailClosed(), stack.WithErrorHandler(p.localEv.handle)); err != nil {
		t.Fatal(err)
	}
	return p
}

// policyProbe is the probe interval of policyStacks, on their clock.
const policyProbe = 300 * time.Millisecond

// check asserts that each policy is followed while Redis cannot decide:
// fail-open admits and reports, fail-closed errs, the local fallback
// decides at its share (half of 10/s, from an empty bucket) and reports
// entering it; then, once Redis is restored, that the first decision a
// probe interval later (on the clock) reports leaving it, with the
// failures (the entry and a failed probe every 300 ms of the 0.9 s) and
// the 40 local decisions, and that fail-closed decides again.
func (p *policyStacks) check(t *testing.T, what, why string, restore func()) {
	t.Helper()
	ctx := context.Background()
	keys := sluice.NewKeys("caller", "c")
	for i := 0; i < 3; i++ {
		if d, err := p.open.Allow(ctx, keys); err != nil || !d.Allowed {
			t.Errorf("%s: fail-open: %+v, %v", what, d, err)
		}
		if _, err := p.closed.Allow(ctx, keys); !errors.Is(err, sluiceredis.ErrUnavailable) {
			t.Errorf("%s: fail-closed: err = %v, want ErrUnavailable", what, err)
		}
	}
	if errs := p.openEv.take(); len(errs) != 3 || !errors.Is(errs[0], sluiceredis.ErrUnavailable) {
		t.Errorf("%s: fail-open handler heard %v, want 3 ErrUnavailable", what, errs)
	}
	// Local: the bucket starts empty, then gets 5/s.
	admitted := 0
	for step := 0; step < 10; step++ {
		for i := 0; i < 4; i++ {
			d, err := p.local.Allow(ctx, keys)
			if err != nil {
				t.Fatalf("%s: local fallback: %v", what, err)
			}
			if d.Allowed {
				admitted++
			}
		}
		p.clock.Advance(100 * time.Millisecond)
	}
	if admitted != 4 { // 5/s for 0.9 s of the fake clock
		t.Errorf("%s: local fallback admitted %d in 0.9 s at 5/s from empty, want 4", what, admitted)
	}
	fe := fallbacks(p.localEv.take())
	if len(fe) == 0 || !fe[0].Active || fe[0].Failures < 1 || !errors.Is(fe[0].Err, sluiceredis.ErrUnavailable) {
		t.Errorf("%s: entering the fallback: handler heard %+v", what, fe)
	} else if !strings.Contains(fe[0].Err.Error(), why) {
		t.Errorf("%s: the fallback event's error %q does not say why", what, fe[0].Err)
	}
	restore()
	p.clock.Advance(policyProbe)
	if _, err := p.local.Allow(ctx, keys); err != nil {
		t.Fatalf("%s: after restore: %v", what, err)
	}
	var back *stack.FallbackError
	for _, e := range fallbacks(p.localEv.take()) {
		if !e.Active {
			back = e
		}
	}
	if back == nil || back.Failures != 4 || back.Local != 40 {
		t.Errorf("%s: leaving the fallback at the first probe after the restore: %+v, want 4 failures and 40 local decisions", what, back)
	}
	if _, err := p.closed.Allow(ctx, keys); err != nil {
		t.Errorf("%s: fail-closed after restore: %v", what, err)
	}
}

// Every reply by which Redis says it cannot decide now follows the
// configured policy, not only connection failures.
func TestRepliesThatCannotDecideFollowThePolicy(t *testing.T) {
	srv := startRedis(t, "--busy-reply-threshold", "100")
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer admin.Close()
	ctx := context.Background()
	must := func(cmd redis.Cmder) {
		t.Helper()
		if err := cmd.Err(); err != nil {
			t.Fatal(err)
		}
	}
	// expect checks that the server now gives code to a write, so that the
	// condition under test really holds.
	expect := func(code string) {
		t.Helper()
		err := admin.Set(ctx, "probe", "x", 0).Err()
		if code == "MASTERDOWN" { // a write is READONLY first
			err = admin.Get(ctx, "probe").Err()
		}
		if err == nil || !strings.HasPrefix(err.Error(), code) {
			t.Fatalf("provoking %s: a SET got %v", code, err)
		}
	}
	cases := []struct {
		code             string
		provoke, restore func()
	}{
		{"OOM", func() {
			must(admin.ConfigSet(ctx, "maxmemory-policy", "noeviction"))
			must(admin.ConfigSet(ctx, "maxmemory", "1"))
		}, func() { must(admin.ConfigSet(ctx, "maxmemory", "0")) }},
		{"READONLY", func() {
			must(admin.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(deadPort(t))))
		}, func() { must(admin.ReplicaOf(ctx, "NO", "ONE")) }},
		{"MASTERDOWN", func() {
			must(admin.ConfigSet(ctx, "replica-serve-stale-data", "no"))
			must(admin.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(deadPort(t))))
		}, func() {
			must(admin.ReplicaOf(ctx, "NO", "ONE"))
			must(admin.ConfigSet(ctx, "replica-serve-stale-data", "yes"))
		}},
		{"BUSY", func() {
			busy := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
			t.Cleanup(func() { busy.Close() })
			go busy.Eval(context.Background(), "local i = 0 while true do i = i + 1 end", nil)
			// The server says BUSY once the script has run for the
			// threshold (100 ms): ask until it does.
			eventually(t, "the long script made the server BUSY", func() bool {
				err := admin.Ping(ctx).Err()
				return err != nil && strings.HasPrefix(err.Error(), "BUSY")
			})
		}, func() {
			eventually(t, "SCRIPT KILL succeeded", func() bool { return admin.ScriptKill(ctx).Err() == nil })
			// The killed script's client may still be reading its error:
			// the server answers again once PING does.
			eventually(t, "the server answers after SCRIPT KILL", func() bool { return admin.Ping(ctx).Err() == nil })
		}},
	}
	for _, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			client, _ := newClient(t, srv.Addr)
			p := newPolicyStacks(t, client)
			keys := sluice.NewKeys("caller", "c")
			if _, err := p.closed.Allow(ctx, keys); err != nil {
				t.Fatalf("before: %v", err)
			}
			c.provoke()
			if c.code != "BUSY" {
				expect(c.code)
			}
			p.check(t, c.code, c.code, c.restore)
		})
	}
}

// The server stopped (SIGSTOP: timeouts) and killed (connection refused):
// the same policies, and the handler hears both transitions.
func TestStoppedAndKilledFollowThePolicy(t *testing.T) {
	srv := startRedis(t)
	if srv.External {
		t.Skip("SLUICE_REDIS_ADDR is set: this test must stop its own server")
	}
	ctx := context.Background()
	keys := sluice.NewKeys("caller", "c")
	t.Run("SIGSTOP", func(t *testing.T) {
		client, _ := newClient(t, srv.Addr)
		p := newPolicyStacks(t, client)
		if _, err := p.closed.Allow(ctx, keys); err != nil {
			t.Fatal(err)
		}
		srv.Pause(t)
		p.check(t, "SIGSTOP", "", func() { srv.Resume(t) })
	})
	t.Run("kill", func(t *testing.T) {
		client, _ := newClient(t, srv.Addr)
		p := newPolicyStacks(t, client)
		if _, err := p.closed.Allow(ctx, keys); err != nil {
			t.Fatal(err)
		}
		srv.Stop()
		p.check(t, "kill", "", func() { srv.Restart(t) })
	})
}

// deadPort returns a port of 127.0.0.1 nothing listens on.
func deadPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

package redis

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redis/redistest"
	"github.com/sluicehq/sluice/stack"
)

// admitted is units a bucket handed out (a take or a forced charge) at an
// instant, for the window oracle.
type admitted struct {
	at time.Duration
	n  int64
}

// checkWindows fails t if, over some window [a.at, b.at] of the admissions
// in order, more than burst + rate·Δt units were handed out: the one
// promise of a limit.
func checkWindows(t *testing.T, what string, adm []admitted, burst int64, perSecond float64) {
	t.Helper()
	for i := range adm {
		var n int64
		for j := i; j < len(adm); j++ {
			n += adm[j].n
			dt := adm[j].at - adm[i].at
			if bound := float64(burst) + perSecond*dt.Seconds(); float64(n) > bound+1e-9 {
				t.Errorf("%s: %d units handed out in [%v, %v], a limit of %d burst at %v/s allows %.0f",
					what, n, adm[i].at, adm[j].at, burst, perSecond, bound)
				return
			}
		}
	}
}

// The interleaving of issue #21 against a real redis-server: burst 3 at
// 500/s (a token every 2 ms). Caller A takes 1 at 78 ms; caller B, at
// 80 ms, finds the bucket refilled and takes (or is charged, or pays) the
// whole burst; then A's unit is given back. The bucket started over at
// B's instant, so the unit A gives back has already been refilled and
// handed to B: giving it back would let a fourth unit through where
// burst + r·Δt allows 3 + 1. Every way B can take is checked (the one-
// bucket fast path, the several-bucket fast path, the general path, a
// batch, a forced charge, a fallback's payment), and each is also checked
// with A's give-back made promptly, before B's take, where all of it comes
// back.
func TestGiveBackAfterLaterTakeAddsNothing(t *testing.T) {
	srv := redistest.Start(t)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const burst, perSecond = 3, 500
	bucket := func(key string, cost int64) stack.Op {
		return stack.Op{Key: key, Rate: perSecond, Period: time.Second, Burst: burst, Cost: cost}
	}
	other := stack.Op{Key: "other", Rate: 1, Period: time.Second, Burst: 100, Cost: 1}

	// How B hands out the whole burst at its instant (b's clock reads it).
	ways := []struct {
		name string
		take func(t *testing.T, b *Backend) // hands out burst units of "k"
	}{
		{"fast path, one bucket", func(t *testing.T, b *Backend) {
			mustTake(t, b, bucket("k", burst))
		}},
		{"fast path, two buckets", func(t *testing.T, b *Backend) {
			mustTake(t, b, bucket("k", burst), other)
		}},
		{"general path", func(t *testing.T, b *Backend) {
			// a connections slot in the decision sends it the general way
			mustTake(t, b, bucket("k", burst), stack.Op{Key: "slot", Burst: 5, Cost: 1, Conn: true, Lease: "l", TTL: time.Minute})
		}},
		{"batch", func(t *testing.T, b *Backend) {
			var calls []*batchCall
			for _, ops := range [][]stack.Op{{other}, {bucket("k", burst)}} {
				keys, args, err := b.request(nil, "t", ops, time.Time{})
				if err != nil {
					t.Fatal(err)
				}
				calls = append(calls, &batchCall{ctx: ctx, keys: keys, args: args, nops: len(ops), done: make(chan struct{}, 1)})
			}
			b.runBatch(&b.batch, calls)
			if c := calls[1]; c.err != nil || c.out.Denied != -1 {
				t.Fatalf("batched take of the burst: %+v, %v", c.out, c.err)
			}
		}},
		{"forced charge", func(t *testing.T, b *Backend) {
			if err := b.Adjust(ctx, b.clock(), []stack.Op{bucket("k", burst)}); err != nil {
				t.Fatal(err)
			}
		}},
		{"fallback payment", func(t *testing.T, b *Backend) {
			if err := b.pay(ctx, []stack.Op{bucket("k", burst)}, false); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for i, way := range ways {
		for _, prompt := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/prompt=%v", way.name, prompt), func(t *testing.T) {
				now := base.Add(78 * time.Millisecond)
				b, err := New(client, WithKeyPrefix(fmt.Sprintf("giveback%d-%v-%d", i, prompt, time.Now().UnixNano())),
					WithClock(sluice.ClockFunc(func() time.Time { return now })), WithTimeout(5*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				var adm []admitted
				at := func() time.Duration { return now.Sub(base) }
				// A takes 1 at 78 ms.
				takenAt := now
				mustTake(t, b, bucket("k", 1))
				adm = append(adm, admitted{at(), 1})
				giveBack := func() {
					back := bucket("k", -1)
					back.TakenAt = takenAt
					if err := b.Adjust(ctx, now, []stack.Op{back}); err != nil {
						t.Fatal(err)
					}
				}
				if prompt {
					// Given back at once, no take since: all of it comes
					// back, and the full burst is there for B.
					giveBack()
					adm[0].n = 0
				}
				now = base.Add(80 * time.Millisecond)
				way.take(t, b)
				adm = append(adm, admitted{at(), burst})
				if !prompt {
					giveBack()
				}
				// Whatever is left now is handed out.
				for {
					out, err := b.Take(ctx, now, []stack.Op{bucket("k", 1)})
					if err != nil {
						t.Fatal(err)
					}
					if out.Denied >= 0 {
						break
					}
					adm = append(adm, admitted{at(), 1})
					if len(adm) > 10 {
						t.Fatal("the bucket never runs dry")
					}
				}
				checkWindows(t, way.name, adm, burst, perSecond)
				if prompt && len(adm) != 2 {
					t.Errorf("prompt give-back: admissions %v, want exactly A's unit back and B's burst", adm)
				}
			})
		}
	}
}

// A give-back after a later take returns what the rule allows, no more
// and no less: c·T less the refill between the take it undoes and the
// latest take. A takes 2 of burst 3 at 10/s (100 ms a token) at t0; B
// takes 1 at t0+100ms (the bucket refilled one token: 2 held, 1 left);
// A's 2 come back at t0+100ms less the one token refilled in between: 1.
// Then 2 are there; a third must wait. A give-back without the take's
// instant gives nothing back; a give-back of a take with no refill (rate
// 0) is exact, whatever came after.
func TestGiveBackBound(t *testing.T) {
	srv := redistest.Start(t)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b, err := New(client, WithKeyPrefix(fmt.Sprintf("bound-%d", time.Now().UnixNano())),
		WithClock(sluice.ClockFunc(func() time.Time { return now })), WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	op := func(key string, rate, cost int64, takenAt time.Time) stack.Op {
		return stack.Op{Key: key, Rate: rate, Period: time.Second, Burst: 3, Cost: cost, TakenAt: takenAt}
	}
	t0 := now
	mustTake(t, b, op("k", 10, 2, time.Time{}))
	now = t0.Add(100 * time.Millisecond)
	if out := mustTake(t, b, op("k", 10, 1, time.Time{})); out.Remaining[0] != 1 {
		t.Fatalf("B's take: %+v, want 1 left", out)
	}
	// Without the take's instant: nothing back.
	if err := b.Adjust(ctx, now, []stack.Op{op("k", 10, -2, time.Time{})}); err != nil {
		t.Fatal(err)
	}
	if out := mustTake(t, b, op("k", 10, 0, time.Time{})); out.Remaining[0] != 1 {
		t.Fatalf("after a give-back with no TakenAt: %+v, want 1 left (nothing back)", out)
	}
	if err := b.Adjust(ctx, now, []stack.Op{op("k", 10, -2, t0)}); err != nil {
		t.Fatal(err)
	}
	if out := mustTake(t, b, op("k", 10, 0, time.Time{})); out.Remaining[0] != 2 {
		t.Fatalf("after A's give-back: %+v, want 2 (1 left + 2 back - 1 refilled in between)", out)
	}

	// Rate 0: nothing refills, so no take can start over; all comes back.
	mustTake(t, b, op("z", 0, 2, time.Time{}))
	now = now.Add(time.Hour)
	mustTake(t, b, op("z", 0, 1, time.Time{}))
	if err := b.Adjust(ctx, now, []stack.Op{op("z", 0, -2, t0)}); err != nil {
		t.Fatal(err)
	}
	if out := mustTake(t, b, op("z", 0, 0, time.Time{})); out.Remaining[0] != 2 {
		t.Fatalf("rate 0 after the give-back: %+v, want 2", out)
	}
}

// A bucket stored by an earlier version (the 49-byte form, which has no
// latest take) is read with its last write as the latest take: a
// give-back of a take before that write is bounded, never exact.
func TestGiveBackOnEarlierForm(t *testing.T) {
	srv := redistest.Start(t)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b, err := New(client, WithKeyPrefix(fmt.Sprintf("early-%d", time.Now().UnixNano())),
		WithClock(sluice.ClockFunc(func() time.Time { return now })), WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// 10/s burst 3: T = 100000 ticks, R = 1, U = 1. Written 100 ms ago
	// with nothing held (three takes then, say): one token refilled now.
	w := now.Add(-100 * time.Millisecond).UnixMicro()
	v := packEarlier(100000, 1, 1, 3, float64(w), 0)
	if err := client.Set(ctx, b.KeyPrefix()+"k", v, 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A take 200 ms ago gives back 1: the refill between it and the
	// last write (100 ms, one token) may have been handed out already.
	back := stack.Op{Key: "k", Rate: 10, Period: time.Second, Burst: 3, Cost: -1, TakenAt: now.Add(-200 * time.Millisecond)}
	if err := b.Adjust(ctx, now, []stack.Op{back}); err != nil {
		t.Fatal(err)
	}
	if out := mustTake(t, b, stack.Op{Key: "k", Rate: 10, Period: time.Second, Burst: 3}); out.Remaining[0] != 1 {
		t.Fatalf("after a give-back on the earlier form: %+v, want 1 (refill only)", out)
	}
	// A take at the last write gives back all of it.
	back.TakenAt = time.UnixMicro(w)
	if err := b.Adjust(ctx, now, []stack.Op{back}); err != nil {
		t.Fatal(err)
	}
	if out := mustTake(t, b, stack.Op{Key: "k", Rate: 10, Period: time.Second, Burst: 3}); out.Remaining[0] != 2 {
		t.Fatalf("after a give-back of a take at the last write: %+v, want 2", out)
	}
}

// On the server's time the give-back's field is an age: the time since
// the take on the caller's clock plus the timeout (never placing the take
// later than it ran); with WithClock it is the take's instant.
func TestGiveBackInstant(t *testing.T) {
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	server, err := New(client, WithTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if v, ok := server.giveBackInstant(at.Add(-time.Second), at); !ok || v != 1_050_000 {
		t.Errorf("server time, a take 1s ago: %d %v, want age 1050000 µs", v, ok)
	}
	if v, ok := server.giveBackInstant(at.Add(time.Second), at); !ok || v != 50_000 {
		t.Errorf("server time, a take on a clock ahead: %d %v, want age 50000 µs (the timeout)", v, ok)
	}
	if _, ok := server.giveBackInstant(time.Time{}, at); ok {
		t.Error("server time, a zero TakenAt gives back")
	}
	clocked, err := New(client, WithClock(sluice.ClockFunc(func() time.Time { return at })))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := clocked.giveBackInstant(at.Add(-time.Second), at); !ok || v != at.Add(-time.Second).UnixMicro() {
		t.Errorf("WithClock: %d %v, want the take's instant", v, ok)
	}
}

func mustTake(t *testing.T, b *Backend, ops ...stack.Op) stack.Outcome {
	t.Helper()
	out, err := b.Take(context.Background(), b.clock(), ops)
	if err != nil {
		t.Fatal(err)
	}
	if out.Denied != -1 {
		t.Fatalf("Take(%+v): %+v, want admitted", ops, out)
	}
	return out
}

// packEarlier is the 49-byte form earlier versions stored: the byte 1,
// then T R U n w held as little-endian doubles.
func packEarlier(f ...float64) string {
	v := []byte{1}
	for _, x := range f {
		v = binary.LittleEndian.AppendUint64(v, math.Float64bits(x))
	}
	return string(v)
}

// A seeded interleaving against a real redis-server: callers take from one
// bucket (burst 3 at 500/s) at instants that move forward by whole
// milliseconds, and give back earlier takes, whole, in any order, late or
// promptly, with other callers' takes in between. Each give-back's effect
// is read from the stored bucket; every take then keeps its cost less what
// its give-back returned, and over every window of take instants the kept
// units are at most burst + r·Δt. A failing seed replays exactly.
func TestGiveBackInterleavings(t *testing.T) {
	srv := redistest.Start(t)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	ctx := context.Background()
	const (
		burst, perSecond = 3, 500
		T, tau           = 2000, burst * 2000 // ticks per token (R = 1 tick/µs)
	)
	for seed := uint64(1); seed <= 150; seed++ {
		rng := rand.New(rand.NewPCG(seed, 21))
		base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		now := base
		b, err := New(client, WithKeyPrefix(fmt.Sprintf("interleave%d-%d", seed, time.Now().UnixNano())),
			WithClock(sluice.ClockFunc(func() time.Time { return now })), WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		key := b.KeyPrefix() + "k"
		held := func() int64 { // ticks held at now
			v, err := client.Get(ctx, key).Result()
			if err == goredis.Nil {
				return tau
			}
			if err != nil || len(v) != 57 && len(v) != 49 { // 49: the form before H, to run this on it
				t.Fatalf("seed %d: stored %q, %v", seed, v, err)
			}
			f := make([]float64, 6) // T R U n w held, in both forms
			for i := range f {
				f[i] = math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[1+8*i : 9+8*i])))
			}
			return min(int64(f[5])+(now.UnixMicro()-int64(f[4])), tau)
		}
		type take struct {
			at       time.Time
			cost     int64
			returned int64 // ticks its give-back added
			back     bool
		}
		var takes []*take
		var log []string
		for step := 0; step < 40; step++ {
			now = now.Add(time.Duration(rng.IntN(4)) * time.Millisecond)
			var open []*take
			for _, tk := range takes {
				if !tk.back {
					open = append(open, tk)
				}
			}
			if len(open) > 0 && rng.IntN(3) == 0 {
				tk := open[rng.IntN(len(open))]
				before := held()
				op := stack.Op{Key: "k", Rate: perSecond, Period: time.Second, Burst: burst, Cost: -tk.cost, TakenAt: tk.at}
				if err := b.Adjust(ctx, now, []stack.Op{op}); err != nil {
					t.Fatal(err)
				}
				tk.back, tk.returned = true, held()-before
				log = append(log, fmt.Sprintf("%v give back %d taken at %v: %d ticks", now.Sub(base), tk.cost, tk.at.Sub(base), tk.returned))
				if tk.returned < 0 || tk.returned > tk.cost*T {
					t.Fatalf("seed %d: a give-back of %d tokens added %d ticks\n%s", seed, tk.cost, tk.returned, strings.Join(log, "\n"))
				}
				continue
			}
			cost := int64(1 + rng.IntN(3))
			out, err := b.Take(ctx, now, []stack.Op{{Key: "k", Rate: perSecond, Period: time.Second, Burst: burst, Cost: cost}})
			if err != nil {
				t.Fatal(err)
			}
			if out.Denied < 0 {
				takes = append(takes, &take{at: now, cost: cost})
				log = append(log, fmt.Sprintf("%v take %d", now.Sub(base), cost))
			}
		}
		// The window oracle over the kept units (in ticks, exact).
		for i, a := range takes {
			var kept int64
			for _, c := range takes[i:] {
				kept += c.cost*T - c.returned
				if bound := int64(burst*T) + c.at.Sub(a.at).Microseconds(); kept > bound {
					t.Fatalf("seed %d: %d ticks kept in [%v, %v], the limit allows %d\n%s",
						seed, kept, a.at.Sub(base), c.at.Sub(base), bound, strings.Join(log, "\n"))
				}
			}
		}
	}
}

// A part of a take given back after a later take (a reservation reconciled
// below its estimate) is bounded by what is left of the whole take once the
// refill in between is counted, min(g, c − refill), not by g − refill: a
// reservation of 4 at 0 ms (burst 10, a token a millisecond), a take of 1
// at 1 ms, then 2 of the 4 given back. The ideal state, the take of 2 kept
// and the take of 1, leaves 8; bounded by its own part (the script before
// Op.Taken) it left 7. Redis and the MemoryBackend must agree, and a third
// unit back would be one never refilled.
func TestPartGiveBackAfterLaterTake(t *testing.T) {
	srv := redistest.Start(t)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	rb, err := New(client, WithKeyPrefix(fmt.Sprintf("part-%d", time.Now().UnixNano())),
		WithClock(sluice.ClockFunc(func() time.Time { return now })), WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	backends := []struct {
		name string
		b    stack.Backend
	}{{"redis", rb}, {"memory", stack.NewMemoryBackend()}}
	op := func(cost int64) stack.Op {
		return stack.Op{Key: "k", Rate: 1000, Period: time.Second, Burst: 10, Cost: cost}
	}
	for _, taken := range []int64{0, 4} { // in time order: a MemoryBackend bounds by its shard's latest take
		for _, be := range backends {
			now = t0.Add(time.Duration(taken) * time.Hour) // a fresh bucket each round
			start := now
			key := fmt.Sprintf("k%d", taken)
			o := func(cost int64) stack.Op { x := op(cost); x.Key = key; return x }
			if out, err := be.b.Take(ctx, now, []stack.Op{o(4)}); err != nil || out.Denied != -1 {
				t.Fatalf("%s: the reservation: %+v %v", be.name, out, err)
			}
			now = start.Add(time.Millisecond)
			if out, err := be.b.Take(ctx, now, []stack.Op{o(1)}); err != nil || out.Denied != -1 {
				t.Fatalf("%s: the later take: %+v %v", be.name, out, err)
			}
			back := o(-2)
			back.TakenAt, back.Taken = start, taken
			if err := be.b.Adjust(ctx, now, []stack.Op{back}); err != nil {
				t.Fatal(err)
			}
			// Taken 4: all 2 come back (8 left). Taken 0 (unknown: the
			// part is the whole take): the part less the refill, 1 (7
			// left); the MemoryBackend's bucket keeps the latest take's
			// instant a fraction of a token coarser and may return that
			// much less, which floors to 6.
			lo, hi := int64(8), int64(8)
			if taken == 0 {
				lo, hi = 7, 7
				if be.name == "memory" {
					lo = 6
				}
			}
			out, err := be.b.Take(ctx, now, []stack.Op{o(0)})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Remaining) == 0 || out.Remaining[0] < lo || out.Remaining[0] > hi {
				t.Errorf("%s, Taken %d: %+v after the give-back, want %d to %d left", be.name, taken, out, lo, hi)
			}
		}
	}
}

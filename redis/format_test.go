package redis_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// storedBucket decodes the stored form the script writes: the byte 2, then
// T R U n w held H as little-endian doubles (H, the latest take, is left
// out: see storedLatest).
func storedBucket(t *testing.T, v string) [6]float64 {
	t.Helper()
	if len(v) != 57 || v[0] != 2 {
		t.Fatalf("stored bucket %q: want 57 bytes starting with 2", v)
	}
	var f [6]float64
	for i := range f {
		f[i] = math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[1+8*i : 9+8*i])))
	}
	return f
}

// storedLatest decodes H, the latest take in microseconds, from the stored
// form the script writes.
func storedLatest(t *testing.T, v string) float64 {
	t.Helper()
	if len(v) != 57 || v[0] != 2 {
		t.Fatalf("stored bucket %q: want 57 bytes starting with 2", v)
	}
	return math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[49:57])))
}

// Buckets written by earlier versions, as the text "T R U n w held", are
// read exactly (never as fuller than they were) and rewritten in the
// binary form at their next write, on the one-bucket path and on the
// general path (where a batch sends a bucket it cannot read in this form).
func TestEarlierTextFormIsRead(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	ctx := context.Background()
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(uniquePrefix("format")),
		sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// 10/s, burst 10: T = 100000 ticks per token, R = 1 tick per µs, U = 1.
	op := func(key string) stack.Op {
		return stack.Op{Key: key, Rate: 10, Period: time.Second, Burst: 10, Cost: 1}
	}
	now := clock.Now().UnixMicro()
	// 3 tokens held 200 ms ago: 5 tokens now.
	old := "100000 1 1 10 " + strconv.FormatInt(now-200_000, 10) + " 300000"
	for _, k := range []string{"one", "a", "b"} {
		if err := client.Set(ctx, b.KeyPrefix()+k, old, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	// One bucket: 5 tokens, so 5 takes pass (4 left after the first) and
	// the sixth waits 100 ms.
	for i := range 6 {
		out, err := b.Take(ctx, clock.Now(), []stack.Op{op("one")})
		if err != nil {
			t.Fatal(err)
		}
		if i < 5 && (out.Denied != -1 || out.Remaining[0] != int64(4-i)) {
			t.Fatalf("take %d: %+v, want admitted with %d left", i, out, 4-i)
		}
		if i == 5 && (out.Denied != 0 || out.RetryAfter != 100*time.Millisecond) {
			t.Fatalf("take %d: %+v, want denied for 100ms", i, out)
		}
		if i == 0 {
			f := storedBucket(t, client.Get(ctx, b.KeyPrefix()+"one").Val())
			if f != [6]float64{100000, 1, 1, 10, float64(now), 400000} {
				t.Errorf("stored after the first take: %v", f)
			}
			if h := storedLatest(t, client.Get(ctx, b.KeyPrefix()+"one").Val()); h != float64(now) {
				t.Errorf("latest take stored after the first take: %v, want %d", h, now)
			}
		}
	}

	// Two buckets in one decision (the general path): 5 tokens each.
	for i := range 6 {
		out, err := b.Take(ctx, clock.Now(), []stack.Op{op("a"), op("b")})
		if err != nil {
			t.Fatal(err)
		}
		if want := i < 5; (out.Denied == -1) != want {
			t.Fatalf("two buckets, take %d: %+v, want admitted %v", i, out, want)
		}
	}
	for _, k := range []string{"a", "b"} {
		if f := storedBucket(t, client.Get(ctx, b.KeyPrefix()+k).Val()); f[5] != 0 {
			t.Errorf("%s: stored %v, want 0 ticks held", k, f)
		}
	}
}

// A decision naming one bucket twice takes from it twice, as the memory
// backend does (the fast path leaves it to the general path).
func TestSameBucketTwiceInOneDecision(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	ctx := context.Background()
	clock := limitertest.NewClock(limitertest.Start)
	rb, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(uniquePrefix("twice")),
		sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	mem := stack.NewMemoryBackend()
	k := stack.Op{Key: "k", Rate: 10, Period: time.Second, Burst: 5, Cost: 2}
	other := stack.Op{Key: "o", Rate: 10, Period: time.Second, Burst: 5, Cost: 1}
	for i, ops := range [][]stack.Op{{k, k}, {k, other, k}, {other, k}, {k, k}} {
		got, err := rb.Take(ctx, clock.Now(), ops)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := mem.Take(ctx, clock.Now(), ops)
		if got.Denied != want.Denied || got.RetryAfter != want.RetryAfter || fmt.Sprint(got.Remaining) != fmt.Sprint(want.Remaining) {
			t.Fatalf("decision %d: redis %+v, memory %+v", i, got, want)
		}
		if i == 0 && (got.Denied != -1 || got.Remaining[1] != 1) {
			t.Fatalf("first decision: %+v, want both takes from one bucket (1 left)", got)
		}
		clock.Advance(150 * time.Millisecond)
	}
}

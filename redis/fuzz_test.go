package redis_test

import (
	"context"
	"slices"
	"testing"
	"time"

	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// fuzzRates are rates whose token interval is a whole number of
// microseconds, so that package bucket's ticks are exact too and the two
// backends must agree to the nanosecond.
var fuzzRates = []struct {
	rate   int64
	period time.Duration
	burst  int64
}{
	{10, time.Second, 10}, {20, time.Second, 50}, {1, time.Second, 1}, {120, time.Minute, 5},
	{600, time.Minute, 600}, {0, time.Second, 3}, {5, time.Second, 0}, {4, time.Second, 2},
	{100, time.Second, 100}, {25, time.Second, 26},
}

var fuzzSteps = []time.Duration{0, time.Millisecond, 7 * time.Millisecond, 50 * time.Millisecond,
	333 * time.Millisecond, time.Second, 10 * time.Second, 0}

// FuzzMatchesMemoryBackend drives the Redis script and stack.MemoryBackend
// (the reference: package bucket's arithmetic) with the same sequence of
// takes and adjustments at the same instants, and requires the same
// outcomes: the script's arithmetic core against package bucket's.
func FuzzMatchesMemoryBackend(f *testing.F) {
	f.Add([]byte{0, 0x13, 0x00, 5, 0, 0x13, 0x00, 6, 4, 0x13, 0x00, 1})
	f.Add([]byte{0, 0x31, 0x21, 3, 0, 0x31, 0x21, 3, 0, 0x31, 0x21, 3, 0x14, 0x31, 0x21, 3})
	f.Add([]byte{3, 0x02, 0x10, 200, 0, 0x02, 0x10, 1, 0x18, 0x02, 0x10, 1, 0x0c, 0x02, 0x10, 1})
	f.Add([]byte{0, 0x53, 0x65, 2, 0, 0x53, 0x65, 2, 0, 0x53, 0x65, 9, 0x1c, 0x53, 0x65, 1})
	f.Add([]byte{0, 0x03, 0x82, 1, 0, 0x03, 0x92, 1, 0, 0x03, 0xa2, 30, 0x10, 0x03, 0x82, 7})
	f.Add([]byte{3, 0x01, 0x00, 250, 0x08, 0x01, 0x00, 1, 0x1c, 0x01, 0x00, 1, 3, 0x01, 0x00, 0x85})
	srv := startRedis(f)
	client, _ := newClient(f, srv.Addr)
	f.Fuzz(func(t *testing.T, data []byte) {
		clock := limitertest.NewClock(limitertest.Start)
		rb, err := sluiceredis.New(client, sluiceredis.WithClock(clock),
			sluiceredis.WithKeyPrefix(uniquePrefix("fuzz")), sluiceredis.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		mem := stack.NewMemoryBackend()
		ctx := context.Background()
		for step := 0; len(data) >= 4 && step < 64; step++ {
			b0, b1, b2, b3 := data[0], data[1], data[2], data[3]
			data = data[4:]
			clock.Advance(fuzzSteps[b0>>2&7])
			n := int(b1&3) + 1
			if n == 4 {
				n = 3
			}
			ops := make([]stack.Op, n)
			for i := range ops {
				r := fuzzRates[int(b2>>4+byte(i)*3)%len(fuzzRates)]
				ops[i] = stack.Op{Key: string(rune('a' + (int(b2)+i)%4)), Rate: r.rate, Period: r.period, Burst: r.burst,
					Cost: int64(b3 & 0x3f), Shadow: b1>>(2+i)&1 == 1}
				if i > 0 {
					ops[i].Cost = int64(b3>>(i+3)) & 3
				}
			}
			at := clock.Now()
			if b0&3 == 3 { // adjust: b3's top bit makes it a refund
				for i := range ops {
					if b3&0x80 != 0 {
						// a give-back of a take at this instant: no take
						// can be later, so both give it all back
						ops[i].Cost = -ops[i].Cost
						ops[i].TakenAt = at
					}
				}
				t.Logf("step %d at +%v Adjust(%+v)", step, at.Sub(limitertest.Start), ops)
				errR := rb.Adjust(ctx, at, ops)
				errM := mem.Adjust(ctx, at, ops)
				if errR != nil || errM != nil {
					t.Fatalf("step %d Adjust(%+v): redis %v, memory %v", step, ops, errR, errM)
				}
				continue
			}
			t.Logf("step %d at +%v Take(%+v)", step, at.Sub(limitertest.Start), ops)
			got, err := rb.Take(ctx, at, ops)
			if err != nil {
				t.Fatalf("step %d Take(%+v): %v", step, ops, err)
			}
			want, _ := mem.Take(ctx, at, ops)
			if got.Denied >= 0 {
				got.Remaining, want.Remaining = nil, nil // reported on a denial by the script's fast paths only
			}
			if got.Denied != want.Denied || got.Permanent != want.Permanent || got.OverBurst != want.OverBurst ||
				got.RetryAfter != want.RetryAfter || !slices.Equal(got.Remaining, want.Remaining) ||
				!slices.Equal(got.ShadowDenied, want.ShadowDenied) {
				t.Fatalf("step %d at +%v Take(%+v):\nredis  %+v\nmemory %+v", step, at.Sub(limitertest.Start), ops, got, want)
			}
		}
	})
}

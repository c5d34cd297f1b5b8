package redis_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// FuzzStoredForm: whatever a bucket's key holds (the forms this and
// earlier versions wrote, damaged, or anything else), a take, a forced
// charge and a give-back on it never panic and never fail as if Redis were
// unavailable, and a decision that passes never reports more than the
// burst: the script's reading of the stored forms, H included, is checked.
func FuzzStoredForm(f *testing.F) {
	const (
		T, R, U, n = 100000, 1, 1, 10 // 10/s, burst 10
	)
	now := float64(limitertest.Start.UnixMicro())
	pack := func(form byte, v ...float64) []byte {
		b := []byte{form}
		for _, x := range v {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
		return b
	}
	f.Add(pack(2, T, R, U, n, now-100000, 300000, now-100000))
	f.Add(pack(2, T, R, U, n, now, 0, now+5e6))      // a latest take ahead of now
	f.Add(pack(2, T, R, U, n, now, -2e6, 0))         // in debt, no take kept
	f.Add(pack(2, T, R, U, n, now, math.NaN(), now)) // damaged
	f.Add(pack(2, T, R, U, n, now, 0, math.Inf(1)))
	f.Add(pack(2, T, R, U, n, now, 0))            // truncated
	f.Add(pack(1, T, R, U, n, now-50000, 900000)) // the 49-byte form
	f.Add(pack(1, 3, 2, 1, 5, now, 7))            // other parameters
	f.Add([]byte("100000 1 1 10 1 300000"))       // the text form
	f.Add([]byte("garbage"))
	srv := startRedis(f)
	client, _ := newClient(f, srv.Addr)
	f.Fuzz(func(t *testing.T, stored []byte) {
		clock := limitertest.NewClock(limitertest.Start)
		b, err := sluiceredis.New(client, sluiceredis.WithClock(clock),
			sluiceredis.WithKeyPrefix(uniquePrefix("stored")), sluiceredis.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		op := stack.Op{Key: "k", Rate: 10, Period: time.Second, Burst: n, Cost: 1}
		back := op
		back.Cost, back.TakenAt = -3, clock.Now().Add(-time.Second)
		charge := op
		charge.Cost = 2
		for _, step := range []func() (stack.Outcome, error){
			func() (stack.Outcome, error) { return b.Take(ctx, clock.Now(), []stack.Op{op}) },
			func() (stack.Outcome, error) {
				return b.Take(ctx, clock.Now(), []stack.Op{op, {Key: "o", Rate: 1, Period: time.Second, Burst: 1}})
			},
			func() (stack.Outcome, error) {
				return stack.Outcome{Denied: -2}, b.Adjust(ctx, clock.Now(), []stack.Op{back})
			},
			func() (stack.Outcome, error) {
				return stack.Outcome{Denied: -2}, b.Adjust(ctx, clock.Now(), []stack.Op{charge})
			},
		} {
			if err := client.Set(ctx, b.KeyPrefix()+"k", stored, 0).Err(); err != nil {
				t.Fatal(err)
			}
			out, err := step()
			if err != nil {
				if errors.Is(err, sluiceredis.ErrUnavailable) {
					t.Fatalf("stored %q: %v, taken for an outage", stored, err)
				}
				continue
			}
			if out.Denied == -1 && out.Remaining[0] > n {
				t.Fatalf("stored %q: %+v, more than the burst", stored, out)
			}
			// Whatever was written is read back as a bucket, within the burst.
			probe := op
			probe.Cost = 0
			if out, err := b.Take(ctx, clock.Now(), []stack.Op{probe}); err == nil && out.Denied == -1 && out.Remaining[0] > n {
				t.Fatalf("stored %q, then %+v: more than the burst", stored, out)
			}
		}
	})
}

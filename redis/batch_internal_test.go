package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redis/redistest"
	"github.com/sluicehq/sluice/stack"
)

// A batch decides exactly as the same decisions made one by one: random
// decisions on a few buckets (hot keys, changed parameters, shadow ops,
// costs above the burst, connections slots), each sequence sent once call
// by call and once as one batch, on separate key prefixes at the same
// instants, give the same outcomes.
func TestBatchMatchesOneByOne(t *testing.T) {
	srv := redistest.Start(t)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	rng := rand.New(rand.NewPCG(11, 7))
	rates := []struct{ rate, burst int64 }{{10, 5}, {10, 10}, {3, 2}, {0, 0}}
	for round := 0; round < 40; round++ {
		one, err := New(client, WithKeyPrefix(fmt.Sprintf("one%d", round)), WithClock(sluice.ClockFunc(clock)), WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		bat, err := New(client, WithKeyPrefix(fmt.Sprintf("bat%d", round)), WithClock(sluice.ClockFunc(clock)), WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var calls []*batchCall
		var want []stack.Outcome
		n := 2 + rng.IntN(12)
		for d := 0; d < n; d++ {
			nops := 1 + rng.IntN(3)
			perm := rng.Perm(4)
			ops := make([]stack.Op, nops)
			for i := range ops {
				if rng.IntN(8) == 0 {
					ops[i] = stack.Op{Key: fmt.Sprintf("c%d", perm[i]), Burst: 2, Cost: 1, Conn: true,
						Lease: fmt.Sprintf("l%d-%d", d, i), TTL: time.Minute}
					continue
				}
				r := rates[rng.IntN(len(rates))]
				if rng.IntN(3) > 0 {
					r = rates[0] // mostly stable parameters: the fast path
				}
				ops[i] = stack.Op{Key: fmt.Sprintf("k%d", perm[i]), Rate: r.rate, Period: time.Second, Burst: r.burst,
					Cost: int64(rng.IntN(4)), Shadow: rng.IntN(6) == 0}
			}
			out, err := one.Take(ctx, now, ops)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, out)
			keys, args, err := bat.request(nil, "t", ops, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			calls = append(calls, &batchCall{ctx: ctx, keys: keys, args: args, nops: nops, done: make(chan struct{}, 1)})
		}
		bat.runBatch(&bat.batch, calls)
		for d, c := range calls {
			if c.err != nil {
				t.Fatalf("round %d decision %d: %v", round, d, c.err)
			}
			if c.out.ShadowDenied == nil {
				c.out.ShadowDenied = []int{}
			}
			if want[d].ShadowDenied == nil {
				want[d].ShadowDenied = []int{}
			}
			if c.out.Denied >= 0 {
				c.out.Remaining, want[d].Remaining = nil, nil // reported on a denial by the fast paths only
			}
			if !reflect.DeepEqual(c.out, want[d]) {
				t.Fatalf("round %d decision %d of %d:\nbatch    %+v\none by one %+v", round, d, n, c.out, want[d])
			}
		}
		now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
	}
}

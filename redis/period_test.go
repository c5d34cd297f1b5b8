package redis_test

import (
	"context"
	"testing"
	"time"

	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// Hour and day periods reach the script as a period in microseconds like the
// others; its integer ticks keep them exact: 250 a day is one request every
// 345.6 s to the microsecond, a day's burst at a slow rate is scaled to
// coarser time units without ever admitting early, and the key of a
// drained bucket outlives the day it takes to refill.
func TestHourAndDayPeriodsAreExact(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	clock := limitertest.NewClock(limitertest.Start)
	// 5 s: the first call dials and loads the script, which under -race on a
	// loaded machine can outlast the default 50 ms (real time).
	rb, err := sluiceredis.New(client, sluiceredis.WithClock(clock), sluiceredis.WithKeyPrefix(uniquePrefix("period")),
		sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	take := func(op stack.Op) stack.Outcome {
		t.Helper()
		out, err := rb.Take(ctx, clock.Now(), []stack.Op{op})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	day := stack.Op{Key: "day", Rate: 250, Period: stack.Day.Duration(), Burst: 250, Cost: 250}
	if out := take(day); out.Denied != -1 || out.Remaining[0] != 0 {
		t.Fatalf("the day's burst: %+v", out)
	}
	day.Cost = 1
	out := take(day)
	if out.Denied != 0 || out.RetryAfter != 345600*time.Millisecond {
		t.Fatalf("after the burst: %+v, want RetryAfter 5m45.6s exactly", out)
	}
	if ttl := client.PTTL(ctx, rb.KeyPrefix()+"day").Val(); ttl < 24*time.Hour {
		t.Errorf("a drained day bucket expires in %v, before it is full again", ttl)
	}
	clock.Advance(out.RetryAfter - time.Microsecond)
	if out := take(day); out.Denied != 0 || out.RetryAfter != time.Microsecond {
		t.Fatalf("1 µs early: %+v", out)
	}
	clock.Advance(time.Microsecond)
	if out := take(day); out.Denied != -1 {
		t.Fatalf("at RetryAfter: %+v", out)
	}

	hour := stack.Op{Key: "hour", Rate: 3, Period: stack.Hour.Duration(), Burst: 3, Cost: 3}
	if out := take(hour); out.Denied != -1 {
		t.Fatalf("the hour's burst: %+v", out)
	}
	hour.Cost = 1
	if out := take(hour); out.Denied != 0 || out.RetryAfter != 20*time.Minute {
		t.Fatalf("after the hour's burst: %+v, want RetryAfter 20m", out)
	}

	// 7 a day with a burst of 600,000,000: too many ticks for
	// microseconds, so the script counts in coarser units; the first
	// token after the burst must still not come before 86400/7 s.
	slow := stack.Op{Key: "slow", Rate: 7, Period: stack.Day.Duration(), Burst: 600_000_000, Cost: 600_000_000}
	if out := take(slow); out.Denied != -1 {
		t.Fatalf("slow burst: %+v", out)
	}
	slow.Cost = 1
	out = take(slow)
	interval := stack.Day.Duration() / 7
	if out.Denied != 0 || out.RetryAfter < interval {
		t.Fatalf("slow: %+v, want RetryAfter at least %v", out, interval)
	}
	clock.Advance(out.RetryAfter)
	if out := take(slow); out.Denied != -1 {
		t.Fatalf("slow at RetryAfter: %+v", out)
	}
}

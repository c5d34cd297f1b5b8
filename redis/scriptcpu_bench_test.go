package redis_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/redis/redistest"
	"github.com/sluicehq/sluice/stack"
)

// commandUsec returns, from INFO commandstats, the calls and server
// microseconds of the named commands since the last CONFIG RESETSTAT.
func commandUsec(b *testing.B, c *redis.Client, names ...string) (calls, usec float64) {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		want := false
		for _, n := range names {
			want = want || name == "cmdstat_"+n
		}
		if !want {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			x, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls += x
			case "usec":
				usec += x
			}
		}
	}
	return calls, usec
}

// BenchmarkScriptCPU measures what a decision costs Redis itself, in
// server microseconds per descriptor (INFO commandstats, usec), on one
// redis-server the benchmark starts: sluice's script (one EVALSHA per
// decision, every bucket of it read and written, all or nothing) beside
// envoyproxy/ratelimit's pipeline (INCRBY and EXPIRE per descriptor), for
// 1 and 3 descriptors, values cycling over 1,000 per descriptor, every
// decision allowed ("allowed") or every decision denied by its last
// descriptor ("denied"; the pipeline has no denial of its own: it counts
// every hit). Read redis-µs/desc side by side; the ratio is script/pipeline.
//
//	cd redis && go test -run '^$' -bench ScriptCPU -benchtime 20000x
func BenchmarkScriptCPU(b *testing.B) {
	srv := redistest.Start(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { client.Close() })
	ctx := context.Background()
	for _, n := range []int{1, 3} {
		for _, outcome := range []string{"allowed", "denied"} {
			b.Run("script/descriptors="+strconv.Itoa(n)+"/"+outcome, func(b *testing.B) {
				be, err := sluiceredis.New(client, sluiceredis.WithKeyPrefix("cpu"+strconv.Itoa(n)+outcome),
					sluiceredis.WithTimeout(5*time.Second), sluiceredis.WithMaxBatch(1))
				if err != nil {
					b.Fatal(err)
				}
				ops := make([]stack.Op, n)
				keys := make([][]string, n)
				for i := range ops {
					ops[i] = stack.Op{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000, Cost: 1}
					keys[i] = make([]string, 1000)
					for v := range keys[i] {
						keys[i][v] = "d" + strconv.Itoa(i) + "|" + strconv.Itoa(v)
					}
				}
				if outcome == "denied" {
					ops[n-1].Rate, ops[n-1].Burst = 0, 0 // rate 0: every decision denied by the last
				}
				at := time.Unix(1_800_000_000, 0)
				client.ConfigResetStat(ctx)
				b.ResetTimer()
				for i := range b.N {
					for j := range ops {
						ops[j].Key = keys[j][i%1000]
					}
					out, err := be.Take(ctx, at.Add(time.Duration(i)*time.Microsecond), ops)
					if err != nil || (outcome == "denied") != (out.Denied >= 0) {
						b.Fatalf("%+v, %v", out, err)
					}
				}
				b.StopTimer()
				calls, usec := commandUsec(b, client, "evalsha", "eval")
				b.ReportMetric(usec/calls, "redis-µs/call")
				b.ReportMetric(usec/calls/float64(n), "redis-µs/desc")
			})
			if outcome == "denied" {
				continue // the pipeline counts every hit: no denial of its own
			}
			b.Run("incrby+expire/descriptors="+strconv.Itoa(n), func(b *testing.B) {
				keys := make([][]string, n)
				for i := range keys {
					keys[i] = make([]string, 1000)
					for v := range keys[i] {
						keys[i][v] = "ie" + outcome + "_d" + strconv.Itoa(i) + "_" + strconv.Itoa(v) + "_1800000000"
					}
				}
				client.ConfigResetStat(ctx)
				b.ResetTimer()
				for i := range b.N {
					p := client.Pipeline()
					for j := range n {
						p.IncrBy(ctx, keys[j][i%1000], 1)
						p.Expire(ctx, keys[j][i%1000], time.Second)
					}
					if _, err := p.Exec(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				_, usec := commandUsec(b, client, "incrby", "expire")
				b.ReportMetric(usec/float64(b.N), "redis-µs/call")
				b.ReportMetric(usec/float64(b.N)/float64(n), "redis-µs/desc")
			})
		}
	}
}

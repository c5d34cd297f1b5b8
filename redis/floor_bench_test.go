package redis_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisstat"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/redis/redistest"
	"github.com/sluicehq/sluice/stack"
)

// floorConcurrency is how many goroutines call Redis at once in
// BenchmarkRedisFloor, as Envoy's concurrent calls would.
const floorConcurrency = 16

// BenchmarkRedisFloor measures what one decision costs the redis-server
// process, on one server the benchmark starts, from 16 goroutines: the
// process's CPU time (/proc/<pid>/stat, utime + stime: the commands and
// the network, parsing and event loop around them) and INFO commandstats
// (the commands alone), per call and per descriptor, for
//
//   - evalsha-return1: an EVALSHA of "return 1" with 1 or 3 keys, the
//     floor of any script;
//   - evalsha-getset: an EVALSHA that only GETs and SETs (PX) each key, a
//     57-byte value as sluice's bucket, the floor of a script that reads
//     and writes every bucket;
//   - script: sluice's script through the backend, one EVALSHA per
//     decision (WithMaxBatch(1)), every descriptor allowed;
//   - script-batched: the same with the backend's default batching, which
//     puts the decisions in flight together into one EVALSHA;
//   - incrby+expire: envoyproxy/ratelimit's pipeline, INCRBY key hits and
//     EXPIRE key ttl per descriptor, in one round trip.
//
// Values cycle over 1,000 per descriptor. If evalsha-return1 costs the
// process more than incrby+expire, no script can cost less per descriptor
// than that pipeline.
//
//	cd redis && go test -run '^$' -bench RedisFloor -benchtime 40000x
func BenchmarkRedisFloor(b *testing.B) {
	srv := redistest.Start(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 2 * floorConcurrency})
	b.Cleanup(func() { client.Close() })
	cpu, ok := serverCPU(b, srv, client)
	if !ok {
		b.Skip("the redis-server's CPU time cannot be read (an external server, or no /proc)")
	}
	ctx := context.Background()
	sha, err := client.ScriptLoad(ctx, "return 1").Result()
	if err != nil {
		b.Fatal(err)
	}
	// a GET and a SET ... PX of a 57-byte value per key, as sluice's
	// stored bucket, and no arithmetic: the floor of a script that reads
	// and writes each bucket
	getset, err := client.ScriptLoad(ctx, `for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  redis.call('SET', KEYS[i], ARGV[1], 'PX', '2000')
end
return 1`).Result()
	if err != nil {
		b.Fatal(err)
	}
	value := string(make([]byte, 57))
	keysOf := func(prefix string, n int) [][]string {
		keys := make([][]string, n)
		for i := range keys {
			keys[i] = make([]string, 1000)
			for v := range keys[i] {
				keys[i][v] = prefix + "_d" + strconv.Itoa(i) + "_" + strconv.Itoa(v)
			}
		}
		return keys
	}
	for _, n := range []int{1, 3} {
		ns := "/descriptors=" + strconv.Itoa(n)
		b.Run("evalsha-return1"+ns, func(b *testing.B) {
			keys := keysOf("t", n)
			floorRun(b, cpu, client, n, func(i int) error {
				ks := make([]string, n)
				for j := range ks {
					ks[j] = keys[j][i%1000]
				}
				return client.EvalSha(ctx, sha, ks).Err()
			})
		})
		b.Run("evalsha-getset"+ns, func(b *testing.B) {
			keys := keysOf("g", n)
			floorRun(b, cpu, client, n, func(i int) error {
				ks := make([]string, n)
				for j := range ks {
					ks[j] = keys[j][i%1000]
				}
				return client.EvalSha(ctx, getset, ks, value).Err()
			})
		})
		for _, batched := range []bool{false, true} {
			name := "script"
			opts := []sluiceredis.Option{sluiceredis.WithKeyPrefix("floor" + strconv.Itoa(n) + strconv.FormatBool(batched)),
				sluiceredis.WithTimeout(10 * time.Second)}
			if batched {
				name = "script-batched"
			} else {
				opts = append(opts, sluiceredis.WithMaxBatch(1))
			}
			b.Run(name+ns, func(b *testing.B) {
				be, err := sluiceredis.New(client, opts...)
				if err != nil {
					b.Fatal(err)
				}
				keys := keysOf("s", n)
				at := time.Unix(1_800_000_000, 0)
				floorRun(b, cpu, client, n, func(i int) error {
					ops := make([]stack.Op, n)
					for j := range ops {
						ops[j] = stack.Op{Key: keys[j][i%1000], Rate: 1_000_000, Period: time.Second, Burst: 1_000_000, Cost: 1}
					}
					out, err := be.Take(ctx, at.Add(time.Duration(i)*time.Microsecond), ops)
					if err == nil && out.Denied >= 0 {
						b.Errorf("denied: %+v", out)
					}
					return err
				})
			})
		}
		b.Run("incrby+expire"+ns, func(b *testing.B) {
			keys := keysOf("ie", n)
			floorRun(b, cpu, client, n, func(i int) error {
				p := client.Pipeline()
				for j := range n {
					p.IncrBy(ctx, keys[j][i%1000], 1)
					p.Expire(ctx, keys[j][i%1000], time.Second)
				}
				_, err := p.Exec(ctx)
				return err
			})
		})
	}
}

// floorRun makes b.N calls of call from floorConcurrency goroutines and
// reports the redis-server's process CPU and commandstats time per call and
// per descriptor, the commands the client sent per call and those the
// scripts ran (redis.call) per call.
func floorRun(b *testing.B, cpu func() time.Duration, client *redis.Client, descriptors int, call func(i int) error) {
	ctx := context.Background()
	for i := range 200 { // warm the connections and the script cache
		if err := call(i); err != nil {
			b.Fatal(err)
		}
	}
	if err := client.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	cpu0 := cpu()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range floorConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if err := call(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	cpu1 := cpu()
	stats, err := commandStats(ctx, client)
	if err != nil {
		b.Fatal(err)
	}
	// The commands the client sent; a script's own redis.call commands are
	// counted apart (their time is in the EVALSHA's already).
	var calls, inner, usec int64
	for name, st := range stats {
		switch name {
		case "evalsha", "eval", "incrby", "expire":
			calls += st.Calls
			usec += st.Usec
		case "config|resetstat", "info", "config":
		default:
			if testing.Verbose() {
				b.Logf("in scripts: %s %+v", name, st)
			}
			inner += st.Calls
		}
	}
	n := float64(b.N)
	proc := float64((cpu1 - cpu0).Microseconds()) / n
	b.ReportMetric(proc, "proc-µs/call")
	b.ReportMetric(proc/float64(descriptors), "proc-µs/desc")
	b.ReportMetric(float64(usec)/n, "cmd-µs/call")
	b.ReportMetric(float64(usec)/n/float64(descriptors), "cmd-µs/desc")
	b.ReportMetric(float64(calls)/n, "cmds/call")
	b.ReportMetric(float64(inner)/n, "script-cmds/call")
}

// serverCPU returns a function reading the CPU time the redis-server at
// c's address has used so far (its process, named by INFO server, read from
// /proc), and false when it cannot be read: an external server
// (SLUICE_REDIS_ADDR), or a system without /proc.
func serverCPU(tb testing.TB, srv *redistest.Server, c redis.UniversalClient) (func() time.Duration, bool) {
	tb.Helper()
	if srv.External {
		return nil, false
	}
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		tb.Fatal(err)
	}
	pid, ok := redisstat.PID(info)
	if _, read := redisstat.ProcessCPUTime(pid); !ok || !read {
		return nil, false
	}
	return func() time.Duration { d, _ := redisstat.ProcessCPUTime(pid); return d }, true
}

// commandStats reads INFO commandstats through c.
func commandStats(ctx context.Context, c redis.UniversalClient) (map[string]redisstat.CommandStat, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	return redisstat.CommandStats(info), nil
}

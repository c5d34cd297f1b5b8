package redis_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/redis/redistest"
)

func startRedis(t testing.TB, extra ...string) *redistest.Server { return redistest.Start(t, extra...) }

// newClient returns a client of addr closed when the test ends, with
// context deadlines honoured (the backend's timeout relies on it), and a
// counter of round trips.
func newClient(t testing.TB, addr string) (*redis.Client, *roundTrips) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	rt := &roundTrips{}
	c.AddHook(rt)
	t.Cleanup(func() { c.Close() })
	return c, rt
}

// roundTrips counts commands and pipelines sent: each is one round trip.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

var prefixes atomic.Int64

// uniquePrefix keeps tests sharing an external server apart.
func uniquePrefix(name string) string {
	return fmt.Sprintf("t%d-%d-%s", os.Getpid(), prefixes.Add(1), name)
}

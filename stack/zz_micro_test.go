package stack_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/bucket"
	"github.com/sluicehq/sluice/stack"
	"golang.org/x/time/rate"
)

func BenchmarkZZMicro(b *testing.B) {
	now := time.Now
	s, _ := stack.New(gatewayConfig(), stack.WithNow(now))
	var l sluice.Limiter = s
	ctx := context.Background()
	lim := rate.Limit(10_000_000.0 / 60)
	exact, targets, callers := bucket.New(lim, 10_000_000), bucket.NewTable(lim, 10_000_000), bucket.NewTable(lim, 10_000_000)
	keys := sluice.NewKeys("targetName", "target-7", "toolName", "tool-3", "caller", "caller-1")
	b.Run("x", func(b *testing.B) {
		interleave(b, 15,
			side{"sluice", func(i int) { l.Allow(ctx, keys) }},
			side{"floor", func(i int) {
				t := now()
				exact.TakeN(t, 1)
				targets.TakeN("target-7", t, 1)
				callers.TakeN("caller-1", t, 1)
			}},
		)
	})
}

func BenchmarkZZHot(b *testing.B) {
	s, _ := stack.New(gatewayConfig(), stack.WithNow(time.Now))
	var l sluice.Limiter = s
	ctx := context.Background()
	keys := sluice.NewKeys("targetName", "target-7", "toolName", "tool-3", "caller", "caller-1")
	for i := 0; i < b.N; i++ {
		l.Allow(ctx, keys)
	}
}

package bench

import (
	"context"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/sluicehq/sluice/bucket"
)

func BenchmarkHotKey(b *testing.B) {
	for range *rounds {
		b.Run("sluice", func(b *testing.B) {
			t := bucket.NewTable(1, 1<<30)
			for b.Loop() {
				t.Allow("tenant-42-key")
			}
		})
		b.Run("golimiter", func(b *testing.B) {
			st, _ := memorystore.New(&memorystore.Config{Tokens: 1 << 30, Interval: time.Hour})
			ctx := context.Background()
			for b.Loop() {
				st.Take(ctx, "tenant-42-key")
			}
		})
	}
}

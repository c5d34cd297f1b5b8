package redistest_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/redis/redistest"
)

// A test gets its own server; it is killed when the test ends. (Start needs
// a *testing.T, so this example is compiled but not run.)
func ExampleStart() {
	var t *testing.T // the test's
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	_ = client.Set(context.Background(), "k", "v", 0).Err()
}

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

// A test puts a proxy between its client and the server, and switches the
// fault at the step it chooses: here a hung server, whose held request
// reaches it once released. (NewProxy needs a *testing.T, so this example
// is compiled but not run.)
func ExampleNewProxy() {
	var t *testing.T // the test's
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr)
	client := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer client.Close()
	p.SetMode(redistest.Stall)
	done := make(chan error)
	go func() { done <- client.Set(context.Background(), "k", "v", 0).Err() }()
	p.WaitHeld(1) // the SET is held: the server has not seen it
	p.Release()   // now it has
	<-done
}

package envoyrls_test

// Serving Envoy's rate limit service (the README's Envoy section until
// v0.2; the package documentation says the rest).

import (
	"fmt"
	"log"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/envoyrls" // nested module: go-control-plane stays out of the root
)

func Example_envoy() {
	cfg, err := envoyrls.Load("testdata/edge.yaml") // envoyproxy/ratelimit's YAML (a file or a directory), unchanged
	if err != nil {
		log.Fatal(err) // every problem, with its file, line and path
	}
	rls := envoyrls.New(cfg) // in memory; envoyrls.WithBackend(redisBackend) for a fleet
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, rls) // your server: serve it where Envoy's cluster points

	w := envoyrls.NewWatcher(rls, "testdata/edge.yaml", func(err error) { log.Print(err) })
	w.Start(2 * time.Second) // reload on change; bucket state and, on a bad file, the last good config stay
	defer w.Close()
	fmt.Println(cfg.Domains())
	// Output:
	// [edge]
}

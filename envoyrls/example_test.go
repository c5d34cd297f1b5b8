package envoyrls_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// Serve envoyproxy/ratelimit's YAML, unchanged, on your own gRPC server,
// and ask it what Envoy asks.
func Example() {
	cfg, err := envoyrls.Parse(map[string][]byte{"ratelimit.yaml": []byte(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 2
`)})
	if err != nil {
		log.Fatal(err) // every problem, with its file, line and path
	}
	clock := limitertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // a still clock: the output never varies
	rls := envoyrls.New(cfg, envoyrls.WithClock(clock))                        // in memory

	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, rls)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go gs.Serve(lis)
	defer gs.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}}}}
	for range 3 {
		resp, err := client.ShouldRateLimit(context.Background(), req)
		if err != nil {
			log.Fatal(err)
		}
		st := resp.Statuses[0]
		fmt.Println(resp.OverallCode, st.LimitRemaining, st.DurationUntilReset.AsDuration(), resp.ResponseHeadersToAdd[1].Value)
	}
	// Output:
	// OK 1 30s "edge.remote_address";r=1;t=30
	// OK 0 1m0s "edge.remote_address";r=0;t=60
	// OVER_LIMIT 0 30s "edge.remote_address";r=0;t=30
}

// A configuration error names the file, the line and the path.
func ExampleParse() {
	_, err := envoyrls.Parse(map[string][]byte{"config/edge.yaml": []byte(`domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: fortnight
      requests_per_unit: 2
`)})
	fmt.Println(err)
	// Output:
	// invalid rate limit configuration: config/edge.yaml:5: descriptors[0].rate_limit.unit: invalid unit "fortnight" (second, minute, hour, day, week, month, year)
}

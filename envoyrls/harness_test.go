package envoyrls_test

import (
	"context"
	"net"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// serve registers srv on a gRPC server listening on a free loopback port and
// returns a client of it made with go-control-plane's generated client, the
// one Envoy's protocol defines. Both stop when the test ends.
func serve(t testing.TB, srv rlsv3.RateLimitServiceServer) rlsv3.RateLimitServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		gs.Stop()
		<-done
	})
	return rlsv3.NewRateLimitServiceClient(conn)
}

// load parses the YAML files given as name, contents pairs.
func load(t testing.TB, nameData ...string) *envoyrls.Config {
	t.Helper()
	files := map[string][]byte{}
	for i := 0; i+1 < len(nameData); i += 2 {
		files[nameData[i]] = []byte(nameData[i+1])
	}
	cfg, err := envoyrls.Parse(files)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// newServer serves cfg in memory on a manual clock.
func newServer(t testing.TB, cfg *envoyrls.Config, opts ...envoyrls.Option) (*envoyrls.Server, rlsv3.RateLimitServiceClient, *limitertest.Clock) {
	t.Helper()
	clock := limitertest.NewClock(limitertest.Start)
	srv := envoyrls.New(cfg, append([]envoyrls.Option{envoyrls.WithClock(clock)}, opts...)...)
	return srv, serve(t, srv), clock
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// hits sets a descriptor's own hits_addend.
func hits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func ask(t testing.TB, c rlsv3.RateLimitServiceClient, domain string, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	return askReq(t, c, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds})
}

func askReq(t testing.TB, c rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	if len(resp.Statuses) != len(req.Descriptors) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
	}
	return resp
}

// countOK asks n times and counts OK answers.
func countOK(t testing.TB, c rlsv3.RateLimitServiceClient, n int, domain string, ds ...*ratelimitv3.RateLimitDescriptor) int {
	t.Helper()
	ok := 0
	for range n {
		if ask(t, c, domain, ds...).OverallCode == rlsv3.RateLimitResponse_OK {
			ok++
		}
	}
	return ok
}

func header(resp *rlsv3.RateLimitResponse, name string) string {
	for _, h := range resp.ResponseHeadersToAdd {
		if h.Key == name {
			return h.Value
		}
	}
	return ""
}

func meta(resp *rlsv3.RateLimitResponse, key string) any {
	if resp.DynamicMetadata == nil {
		return nil
	}
	v, ok := resp.DynamicMetadata.AsMap()[key]
	if !ok {
		return nil
	}
	return v
}

// Command envoy-rls is Envoy's rate limit service
// (envoy.service.ratelimit.v3), deciding with sluice's exact buckets. It
// loads envoyproxy/ratelimit's YAML unchanged, or sluice's gateway JSON, and
// reloads the file or directory when it changes (a bad file keeps the last
// good configuration).
//
//	go run ./examples/envoy-rls -config examples/envoy-rls/ratelimit.yaml
//	go run ./examples/envoy-rls -config /etc/ratelimit/config -redis 127.0.0.1:6379 -addr 0.0.0.0:8081
//
// In memory by default; with -redis, every instance sharing the Redis
// server shares the limits. See README.md for an Envoy bootstrap that points
// envoy.filters.http.ratelimit at it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/stack/redisbackend"
)

// options are the command line's.
type options struct {
	config     string
	redis      string
	addr       string
	failClosed bool
	shadow     bool
	reload     time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.config, "config", "", "envoyproxy/ratelimit YAML file or directory, or a gateway JSON file (required)")
	flag.StringVar(&o.redis, "redis", "", "Redis address host:port; empty decides in memory")
	flag.StringVar(&o.addr, "addr", "127.0.0.1:8081", "gRPC address to serve on")
	flag.BoolVar(&o.failClosed, "fail-closed", false, "answer OVER_LIMIT when Redis cannot decide (default: OK)")
	flag.BoolVar(&o.shadow, "shadow", false, "global shadow mode: decide and report, always answer OK")
	flag.DurationVar(&o.reload, "reload", 2*time.Second, "how often to check the configuration for changes (0: never)")
	flag.Parse()
	if o.config == "" {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, o, time.Now); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run serves until ctx ends, saying on w where it listens.
func run(ctx context.Context, w io.Writer, o options, now func() time.Time) error {
	cfg, err := envoyrls.Load(o.config)
	if err != nil {
		return err
	}
	logErr := func(err error) { log.Print(err) }
	opts := []envoyrls.Option{envoyrls.WithClock(now), envoyrls.WithErrorHandler(logErr)}
	if o.failClosed {
		opts = append(opts, envoyrls.WithFailClosed())
	}
	if o.shadow {
		opts = append(opts, envoyrls.WithShadowMode())
	}
	where := "in memory"
	if o.redis != "" {
		client := redis.NewClient(&redis.Options{Addr: o.redis, ContextTimeoutEnabled: true})
		defer client.Close()
		rb, err := redisbackend.New(client)
		if err != nil {
			return err
		}
		opts = append(opts, envoyrls.WithBackend(rb))
		where = "on Redis " + o.redis
	}
	rls := envoyrls.New(cfg, opts...)
	if o.reload > 0 {
		wt := envoyrls.NewWatcher(rls, o.config, logErr)
		wt.Start(o.reload)
		defer wt.Close()
	}

	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, rls)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "serving envoy.service.ratelimit.v3 on %s, deciding %s, domains %v\n", lis.Addr(), where, cfg.Domains())
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		srv.GracefulStop()
	}()
	err = srv.Serve(lis)
	<-done
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

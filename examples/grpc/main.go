// Command grpc serves a gRPC API rate-limited with grpclimit (2 calls per
// second per caller, read from the x-caller metadata; the standard health
// service stands in for an application service), and is also its client.
//
//	go run ./examples/grpc                                # demonstrate on a port of its own and exit
//	go run ./examples/grpc -addr 127.0.0.1:50051          # serve until interrupted
//	go run ./examples/grpc -client -addr 127.0.0.1:50051  # call it 3 times as alice
//
// Without flags it serves on a loopback port of its own, calls itself as
// alice three times, waits out the RetryInfo delay on the server's clock
// (which stands still during the demonstration, so the delay is exactly
// the half second the 2-per-second bucket needs to refill one call; nothing
// sleeps), calls once more, and exits:
//
//	call 1: OK
//	call 2: OK
//	call 3: ResourceExhausted "sluice: rate limit exceeded for per-caller/caller=alice (requests), retry after 500ms"
//	  RetryInfo delay: 500ms
//	  grpc-retry-pushback-ms: [500]
//	(the server's clock moves 500ms on)
//	call 4: OK
//
// and shows that another caller, bob, has a bucket of his own.
//
// Against a server on the real clock the delay is what is left of that
// half second, a few milliseconds under 500ms. Any gRPC client works as
// well, for instance grpcurl:
//
//	grpcurl -plaintext -H 'x-caller: alice' 127.0.0.1:50051 grpc.health.v1.Health/Check
//
// Flags:
//
//	-addr ADDR     address to serve on; with -client, the server to call
//	               (default 127.0.0.1:50051)
//	-client        call the server at -addr instead of serving
//	-caller NAME   with -client: the x-caller metadata the calls send (default alice)
//	-n N           with -client: how many calls to make, 1 to 1000 (default 3)
//
// A server named by -client -addr that does not accept a connection within
// 2 s, an address that cannot be listened on, or a flag out of range is
// reported in one line and the exit status is 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/stack"
)

const config = `{"rateLimits": [
  {"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
    {"dimensions": {"caller": "*"}, "requests": [{"rate": 2, "period": "second"}]}
  ]}
]}`

// defaultClientAddr is where -client calls without -addr.
const defaultClientAddr = "127.0.0.1:50051"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runArgs(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "grpc:", err)
		}
		os.Exit(1)
	}
}

// runArgs parses args and serves, calls a server, or demonstrates.
func runArgs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("grpc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "address to serve on, or with -client the server to call (default "+defaultClientAddr+"); without -addr or -client: demonstrate on a port of its own and exit")
	client := fs.Bool("client", false, "call the server at -addr instead of serving")
	caller := fs.String("caller", "alice", "with -client: the x-caller metadata the calls send")
	calls := fs.Int("n", 3, "with -client: how many calls to make, 1 to 1000")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var clientOnly string
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "caller" || f.Name == "n" {
			clientOnly = f.Name
		}
	})
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q: all input is given by flags", fs.Arg(0))
	case clientOnly != "" && !*client:
		return fmt.Errorf("-%s is for the client: add -client", clientOnly)
	case *calls < 1 || *calls > 1000:
		return fmt.Errorf("-n %d: must be between 1 and 1000", *calls)
	case *caller == "":
		return errors.New("-caller: empty; give a name")
	}
	switch {
	case *client:
		target := *addr
		if target == "" {
			target = defaultClientAddr
		}
		if err := checkReachable(target); err != nil {
			return err
		}
		return runClient(ctx, stdout, target, *caller, *calls)
	case *addr != "":
		return serve(ctx, stdout, *addr, time.Now)
	default:
		return demo(ctx, stdout)
	}
}

// checkReachable says, in one error naming addr, why no server there
// accepts a TCP connection within 2 s.
func checkReachable(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return fmt.Errorf("cannot reach the server at -addr %s: %w", addr, err)
	}
	return c.Close()
}

// callerKey reads the caller from the x-caller metadata; a call without one
// is not limited by per-caller (the limit is skipped).
func callerKey(ctx context.Context, method string) (sluice.Keys, error) {
	var k sluice.Keys
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-caller"); len(v) > 0 {
		k.Set("caller", v[0])
	}
	k.Set("method", method)
	return k, nil
}

// newServer returns a gRPC server (the standard health service stands in
// for an application service) whose unary and stream calls are limited.
func newServer(now func() time.Time) (*grpc.Server, error) {
	limits, err := stack.Load([]byte(config), stack.WithClock(sluice.ClockFunc(now)))
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(limits, callerKey)),
		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(limits, callerKey)),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	return srv, nil
}

// listen listens on addr, naming the flag in its error.
func listen(addr string) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-addr %s: %w", addr, err)
	}
	return lis, nil
}

// serve listens on addr, says where on w, and serves until ctx ends.
func serve(ctx context.Context, w io.Writer, addr string, now func() time.Time) error {
	srv, err := newServer(now)
	if err != nil {
		return err
	}
	lis, err := listen(addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "serving gRPC on %s (2 calls per second per x-caller)\n", lis.Addr())
	return serveOn(ctx, srv, lis)
}

// serveOn serves lis until ctx ends.
func serveOn(ctx context.Context, srv *grpc.Server, lis net.Listener) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		srv.GracefulStop()
	}()
	err := srv.Serve(lis)
	<-done
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

// stillClock is the demonstration's clock: it moves only when told to.
type stillClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stillClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stillClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// demo serves on a loopback port of its own, on a clock that stands still,
// calls itself as alice until throttled, moves the clock on by the delay
// the server asked for, and calls once more.
func demo(ctx context.Context, w io.Writer) error {
	clock := &stillClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	srv, err := newServer(clock.now)
	if err != nil {
		return err
	}
	lis, err := listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serveOn(ctx, srv, lis) }()
	defer func() { cancel(); <-served }()

	addr := lis.Addr().String()
	fmt.Fprintf(w, "serving gRPC on %s (2 calls per second per x-caller), its clock standing still; calling it as alice:\n", addr)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	var delay time.Duration
	for i := 1; i <= 3; i++ {
		if delay, err = call(ctx, w, client, "alice", i); err != nil {
			return err
		}
	}
	if delay == 0 {
		return errors.New("the third call in the same instant was not throttled")
	}
	clock.add(delay)
	fmt.Fprintf(w, "(the server's clock moves %v on)\n", delay)
	if _, err := call(ctx, w, client, "alice", 4); err != nil {
		return err
	}
	fmt.Fprintln(w, "bob has a bucket of his own:")
	_, err = call(ctx, w, client, "bob", 1)
	return err
}

// runClient makes n health checks against addr as caller and prints what
// each returned.
func runClient(ctx context.Context, w io.Writer, addr, caller string, n int) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for i := 1; i <= n; i++ {
		if _, err := call(ctx, w, client, caller, i); err != nil {
			return err
		}
	}
	return nil
}

// call makes health check i as caller and prints its outcome; a throttled
// call returns the RetryInfo delay.
func call(ctx context.Context, w io.Writer, client healthpb.HealthClient, caller string, i int) (time.Duration, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, "x-caller", caller)
	var trailer metadata.MD
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if err == nil {
		fmt.Fprintf(w, "call %d: OK\n", i)
		return 0, nil
	}
	st := status.Convert(err)
	delay, ok := grpclimit.RetryDelay(err)
	if !ok {
		return 0, fmt.Errorf("call %d failed without RetryInfo: %w", i, err)
	}
	fmt.Fprintf(w, "call %d: %s %q\n", i, st.Code(), st.Message())
	fmt.Fprintf(w, "  RetryInfo delay: %v\n", delay.Round(time.Millisecond))
	fmt.Fprintf(w, "  %s: %v\n", grpclimit.PushbackTrailer, trailer.Get(grpclimit.PushbackTrailer))
	return delay, nil
}

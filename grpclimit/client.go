package grpclimit

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/pace"
)

// maxPushback is the longest delay a server's answer is believed for.
const maxPushback = 24 * time.Hour

// upstreamName is the name the calls on cc share their pace under:
// upstream, or cc's target when it is "".
func upstreamName(upstream string, cc *grpc.ClientConn) string {
	if upstream != "" {
		return upstream
	}
	return cc.Target()
}

// UnaryClientInterceptor paces unary calls through p: each call waits for
// its upstream's turn (pace.Transport.Wait, with p's maximum wait, order
// and shared limiter), and a call that fails with RESOURCE_EXHAUSTED
// pauses every call to that upstream for the delay the server gave, read
// from google.rpc.RetryInfo or the grpc-retry-pushback-ms trailer (a
// call failing otherwise with a pushback trailer pauses it too). Without
// a delay, p's default pause applies. A call that cannot wait long enough
// fails with the *pace.WaitError, before anything is sent.
//
// upstream names the upstream whose pace the calls share: "" means the
// ClientConn's target, so each connection is paced apart (an interceptor
// is usually given to one connection, as a grpc.DialOption); a name shares
// one pace among every connection and method that uses it. (pace's
// UpstreamFunc names HTTP upstreams per request; a gRPC connection has one
// upstream, so a name is all it needs.)
//
// Retrying is left to gRPC's retry policy, which obeys the same pushback.
func UnaryClientInterceptor(p *pace.Transport, upstream string) grpc.UnaryClientInterceptor {
	if p == nil {
		panic("grpclimit: UnaryClientInterceptor: the *pace.Transport p is nil")
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		name := upstreamName(upstream, cc)
		if err := p.Wait(ctx, name); err != nil {
			return err
		}
		var trailer metadata.MD
		err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Trailer(&trailer))...)
		observeCall(ctx, p, name, err, trailer)
		return err
	}
}

// StreamClientInterceptor paces the start of streams as
// UnaryClientInterceptor paces unary calls, and learns from the stream's
// end: a stream that ends with RESOURCE_EXHAUSTED (or a pushback trailer)
// pauses its upstream. upstream is UnaryClientInterceptor's.
func StreamClientInterceptor(p *pace.Transport, upstream string) grpc.StreamClientInterceptor {
	if p == nil {
		panic("grpclimit: StreamClientInterceptor: the *pace.Transport p is nil")
	}
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		name := upstreamName(upstream, cc)
		if err := p.Wait(ctx, name); err != nil {
			return nil, err
		}
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			observeCall(ctx, p, name, err, nil)
			return nil, err
		}
		return &pacedStream{ClientStream: cs, ctx: ctx, p: p, name: name}, nil
	}
}

type pacedStream struct {
	grpc.ClientStream
	ctx  context.Context
	p    *pace.Transport
	name string
	done bool
}

func (s *pacedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil && !s.done {
		s.done = true
		end := err
		if errors.Is(err, io.EOF) { // the stream's clean end
			end = nil
		}
		observeCall(s.ctx, s.p, s.name, end, s.Trailer())
	}
	return err
}

// observeCall tells p how a call ended.
func observeCall(ctx context.Context, p *pace.Transport, name string, err error, trailer metadata.MD) {
	if err == nil {
		p.Succeeded(name)
		return
	}
	code := status.Code(err)
	d, hasDelay := RetryDelay(err)
	if !hasDelay {
		d, hasDelay = Pushback(trailer)
	}
	if code == codes.ResourceExhausted || hasDelay {
		p.Throttled(ctx, name, d, hasDelay, int(code))
	}
}

// Pushback reads the gRFC A6 trailer grpc-retry-pushback-ms: the delay
// and true for a well-formed value from 0 to a day; false when it is
// absent, malformed, negative (the server says "do not retry") or absurd.
func Pushback(md metadata.MD) (time.Duration, bool) {
	v := md.Get(PushbackTrailer)
	if len(v) == 0 || len(v[0]) == 0 || len(v[0]) > 12 {
		return 0, false
	}
	var ms int64
	for i := 0; i < len(v[0]); i++ {
		c := v[0][i]
		if c < '0' || c > '9' {
			return 0, false
		}
		ms = ms*10 + int64(c-'0')
	}
	d := time.Duration(ms) * time.Millisecond
	if d > maxPushback {
		return 0, false
	}
	return d, true
}

// Package middleware compares sluice's middlewares with their usual
// replacements, per request, side by side in one run: httplimit against
// go-chi/httprate, grpclimit against go-grpc-middleware's ratelimit
// interceptor over golang.org/x/time/rate. It is a nested module so that
// the peers never enter sluice's own go.mod; it has no code of its own
// beyond the benchmarks (see BENCHMARKS.md at the repository root,
// "Middleware: HTTP" and "Middleware: gRPC").
package middleware

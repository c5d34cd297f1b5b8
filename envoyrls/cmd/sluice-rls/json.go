package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// maxJSONBody bounds a /json request body.
const maxJSONBody = 1 << 20

// jsonHandler serves ShouldRateLimit over HTTP/1 as theirs does, for
// clients that cannot speak gRPC: the body is a RateLimitRequest and the
// answer a RateLimitResponse, both as protobuf JSON; 429 when the overall
// code is OVER_LIMIT, 400 for a body that is not a request or a request the
// service refuses, 413 for a body over 1 MiB.
func jsonHandler(svc rlsv3.RateLimitServiceServer, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, status := parseJSONRequest(http.MaxBytesReader(w, r.Body, maxJSONBody))
		if status != 0 {
			http.Error(w, http.StatusText(status), status)
			return
		}
		resp, err := svc.ShouldRateLimit(context.WithoutCancel(r.Context()), req)
		if err != nil {
			log.Debug("/json: request refused", "error", err)
			http.Error(w, http.StatusText(http.StatusBadRequest), http.StatusBadRequest)
			return
		}
		body, err := protojson.Marshal(resp)
		if err != nil {
			http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch resp.OverallCode {
		case rlsv3.RateLimitResponse_OVER_LIMIT:
			w.WriteHeader(http.StatusTooManyRequests)
		case rlsv3.RateLimitResponse_UNKNOWN:
			w.WriteHeader(http.StatusInternalServerError)
		}
		w.Write(body)
	})
}

// parseJSONRequest reads a RateLimitRequest in protobuf JSON from body; a
// non-zero status says why it could not.
func parseJSONRequest(body io.Reader) (*rlsv3.RateLimitRequest, int) {
	data, err := io.ReadAll(body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, http.StatusRequestEntityTooLarge
		}
		return nil, http.StatusBadRequest
	}
	var req rlsv3.RateLimitRequest
	if err := protojson.Unmarshal(data, &req); err != nil {
		return nil, http.StatusBadRequest
	}
	return &req, 0
}

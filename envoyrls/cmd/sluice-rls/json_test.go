package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/envoyrls"
)

// FuzzJSONRequest: parseJSONRequest never panics, accepts exactly what
// protojson accepts, and what it accepts survives a round trip.
func FuzzJSONRequest(f *testing.F) {
	for _, s := range []string{
		`{"domain":"rl","descriptors":[{"entries":[{"key":"foo","value":"bar"}]}]}`,
		`{"domain":"rl","hitsAddend":3,"descriptors":[{"entries":[{"key":"k"}],"hitsAddend":0,"limit":{"requestsPerUnit":2,"unit":"MINUTE"}}]}`,
		`{"domain":`, `[]`, `null`, ``, `{"descriptors":[{"entries":[null]}]}`, `{"hits_addend":-1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, status := parseJSONRequest(bytes.NewReader(data))
		var want rlsv3.RateLimitRequest
		werr := protojson.Unmarshal(data, &want)
		if (status == 0) != (werr == nil) {
			t.Fatalf("status %d, protojson error %v", status, werr)
		}
		if status != 0 {
			if status != http.StatusBadRequest {
				t.Fatalf("status %d for a small body", status)
			}
			return
		}
		again, err := protojson.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, status := parseJSONRequest(bytes.NewReader(again)); status != 0 {
			t.Fatalf("round trip refused: %s", again)
		}
	})
}

// /json answers as theirs: 200 or 429 with the response as JSON, 400 for a
// body that is not a request or one the service refuses, 413 over 1 MiB.
func TestJSONHandler(t *testing.T) {
	cfg, err := envoyrls.Parse(map[string][]byte{"a.yaml": []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")})
	if err != nil {
		t.Fatal(err)
	}
	h := jsonHandler(&answerer{rls: envoyrls.New(cfg)}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	do := func(body string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), "POST", "/json", strings.NewReader(body)))
		return rec.Code, rec.Body.String()
	}
	req := `{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`
	if code, body := do(req); code != 200 || !strings.Contains(body, `"overallCode":"OK"`) {
		t.Errorf("first: %d %s", code, body)
	}
	if code, body := do(req); code != 429 || !strings.Contains(body, `"overallCode":"OVER_LIMIT"`) {
		t.Errorf("second: %d %s", code, body)
	}
	for body, want := range map[string]int{
		`{"domain":1}`:               400,
		`{"domain":"d"}`:             400, // no descriptors: the service refuses it
		`{"domain":"d","nope":true}`: 400,
		strings.Repeat(" ", 1<<20+1): 413,
	} {
		if code, _ := do(body); code != want {
			t.Errorf("%.40q: %d, want %d", body, code, want)
		}
	}
}

// RESPONSE_DYNAMIC_METADATA false (their default) leaves the dynamic
// metadata out; LIMIT_RESPONSE_HEADERS_ENABLED adds their three headers for
// the descriptor closest to its limit, under the configured names.
func TestAnswererShapesTheResponse(t *testing.T) {
	cfg, err := envoyrls.Parse(map[string][]byte{"a.yaml": []byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 10}\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")})
	if err != nil {
		t.Fatal(err)
	}
	rls := envoyrls.New(cfg)
	s := settings{LimitHeaders: true, HeaderLimit: "X-Limit", HeaderRemaining: "X-Remaining", HeaderReset: "X-Reset"}
	a := &answerer{rls: rls, s: s}
	req := &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "a", Value: "x"}}},
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "b", Value: "y"}}},
	}}
	a.ShouldRateLimit(context.Background(), req)
	resp, err := a.ShouldRateLimit(context.Background(), req) // b is over
	if err != nil {
		t.Fatal(err)
	}
	if resp.DynamicMetadata != nil {
		t.Errorf("dynamic metadata %v with RESPONSE_DYNAMIC_METADATA false", resp.DynamicMetadata)
	}
	h := map[string]string{}
	for _, v := range resp.ResponseHeadersToAdd {
		h[v.Key] = v.Value
	}
	if h["X-Limit"] != "1" || h["X-Remaining"] != "0" || h["X-Reset"] == "" || h["X-Reset"] == "0" {
		t.Errorf("headers %v", h)
	}
	if _, ok := h["RateLimit"]; !ok {
		t.Errorf("the IETF RateLimit header is gone: %v", h)
	}
	a.s.DynamicMetadata, a.s.LimitHeaders = true, false
	resp, _ = a.ShouldRateLimit(context.Background(), req)
	if resp.DynamicMetadata.GetFields()["denied_by"].GetStringValue() != "d.b" {
		t.Errorf("dynamic metadata %v with RESPONSE_DYNAMIC_METADATA true", resp.DynamicMetadata)
	}
	for _, v := range resp.ResponseHeadersToAdd {
		if v.Key == "X-Limit" {
			t.Errorf("X-Limit without LIMIT_RESPONSE_HEADERS_ENABLED")
		}
	}
}

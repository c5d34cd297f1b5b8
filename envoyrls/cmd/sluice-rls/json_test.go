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

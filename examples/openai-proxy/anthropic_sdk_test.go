package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	slerrors "github.com/sluicehq/sluice/errors"
)

// The Anthropic-compatible 429 (seed 002's shape, from the same errors
// package this proxy uses for OpenAI) is read by Anthropic's official Go SDK
// as a rate_limit_error, which it retries after retry-after-ms; a permanent
// denial (x-should-retry: false) is not retried.
func TestAnthropicSDKReadsTheThrottledResponse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		te       *slerrors.ThrottledError
		wantHits int64
	}{
		{"retryable", &slerrors.ThrottledError{LimitID: "rl-abc123", LimitKey: "rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet",
			Metric: "tokens", RetryAfter: time.Millisecond}, 2},
		{"permanent", &slerrors.ThrottledError{LimitID: "rl-abc123", LimitKey: "rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet",
			Metric: "tokens", Permanent: true, Cause: slerrors.ErrCostExceedsBurst}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				_ = slerrors.Response{Format: slerrors.Anthropic}.Write(w, tc.te)
			}))
			defer srv.Close()
			client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("k"), option.WithMaxRetries(1))
			_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
				Model:     "claude-3-sonnet",
				MaxTokens: 16,
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
			})
			var ae *anthropic.Error
			if !errors.As(err, &ae) {
				t.Fatalf("error %v is not an *anthropic.Error", err)
			}
			if ae.StatusCode != http.StatusTooManyRequests || ae.Type() != "rate_limit_error" || ae.Message != "Rate limit exceeded" {
				t.Errorf("SDK read status %d type %q message %q", ae.StatusCode, ae.Type(), ae.Message)
			}
			if got := hits.Load(); got != tc.wantHits {
				t.Errorf("the SDK sent %d requests, want %d", got, tc.wantHits)
			}
		})
	}
}

package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/smithy-go"

	slerrors "github.com/sluicehq/sluice/errors"
)

// The AWS-style throttled response is what the seed's ECS client saw:
// the official AWS SDK for Go (here the ECS client, AWS JSON 1.1) reads it
// as ThrottlingException "Rate exceeded", classifies it as throttling, and
// retries it.
func TestAWSSDKClassifiesThrottling(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_ = slerrors.Response{Format: slerrors.AWS}.Write(w, &slerrors.ThrottledError{LimitID: "Cluster read",
			LimitKey: "Cluster read/action=DescribeClusters", Metric: "requests", RetryAfter: 50 * time.Millisecond})
	}))
	defer srv.Close()
	client := ecs.New(ecs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  aws.AnonymousCredentials{},
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 2
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		}),
	})
	_, err := client.DescribeClusters(context.Background(), &ecs.DescribeClustersInput{})
	var api smithy.APIError
	if !errors.As(err, &api) {
		t.Fatalf("error %v is not a smithy.APIError", err)
	}
	if api.ErrorCode() != "ThrottlingException" || api.ErrorMessage() != "Rate exceeded" {
		t.Errorf("SDK read code %q message %q", api.ErrorCode(), api.ErrorMessage())
	}
	if got := (retry.ThrottleErrorCode{Codes: retry.DefaultThrottleErrorCodes}).IsErrorThrottle(err); got != aws.TrueTernary {
		t.Errorf("the SDK's throttle classifier says %v", got)
	}
	if got := hits.Load(); got != 2 {
		t.Errorf("the SDK sent %d requests, want 2 (one retry of a throttled call)", got)
	}
}

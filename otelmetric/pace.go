package otelmetric

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice/pace"
)

// Names of the instruments PaceHooks records to.
const (
	// PaceWaitDuration is a histogram of the time each request sent by a
	// pace.Transport waited for its upstream, in seconds.
	PaceWaitDuration = "sluice.pace.wait.duration"
	// PaceRequests counts the requests a pace.Transport sent.
	PaceRequests = "sluice.pace.requests"
	// PaceThrottled counts the throttled responses it received, by status
	// (an HTTP status, or a gRPC code for grpclimit's interceptors).
	PaceThrottled = "sluice.pace.throttled"
	// PaceLimit is the last request rate learned from an upstream, in
	// requests per second (after the configured ceiling).
	PaceLimit = "sluice.pace.limit"
	// PaceStoreErrors counts the calls to a pace.Store (pace.WithStore)
	// that failed; the Transport then paced by what it learned itself.
	PaceStoreErrors = "sluice.pace.store.errors"
)

// KeyPaceStatus is the status of a throttled response.
const KeyPaceStatus attribute.Key = "sluice.pace.status"

// waitBounds are the wait histogram's buckets, in seconds: from no wait to
// the default maximum wait.
var waitBounds = []float64{0, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// PaceHooks returns pace.Hooks that record a pace.Transport's metrics with
// mp's meter: the time requests waited, the requests sent, the throttled
// responses received, the limit learned and the failed calls to the
// pace.Store. Pass them with
// pace.WithHooks.
func PaceHooks(mp metric.MeterProvider) (pace.Hooks, error) {
	meter := mp.Meter(ScopeName)
	var err, e error
	var (
		wait      metric.Float64Histogram
		requests  metric.Int64Counter
		throttled metric.Int64Counter
		limit     metric.Float64Gauge
		storeErrs metric.Int64Counter
	)
	wait, e = meter.Float64Histogram(PaceWaitDuration, metric.WithUnit("s"),
		metric.WithDescription("Time a request waited for its upstream's rate limit before it was sent."),
		metric.WithExplicitBucketBoundaries(waitBounds...))
	err = errors.Join(err, e)
	requests, e = meter.Int64Counter(PaceRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Requests sent through a pacer."))
	err = errors.Join(err, e)
	throttled, e = meter.Int64Counter(PaceThrottled, metric.WithUnit("{response}"),
		metric.WithDescription("Throttled responses received from upstreams (429s and alike)."))
	err = errors.Join(err, e)
	limit, e = meter.Float64Gauge(PaceLimit, metric.WithUnit("{request}/s"),
		metric.WithDescription("Request rate last learned from an upstream's responses."))
	err = errors.Join(err, e)
	storeErrs, e = meter.Int64Counter(PaceStoreErrors, metric.WithUnit("{call}"),
		metric.WithDescription("Calls to the store of what a fleet of pacers learned that failed."))
	err = errors.Join(err, e)
	if err != nil {
		return pace.Hooks{}, err
	}
	return pace.Hooks{
		Paced: func(ctx context.Context, waited time.Duration) {
			wait.Record(ctx, waited.Seconds())
			requests.Add(ctx, 1)
		},
		Throttled: func(ctx context.Context, status int) {
			throttled.Add(ctx, 1, metric.WithAttributes(KeyPaceStatus.Int(status)))
		},
		Learned: func(ctx context.Context, n int64, window time.Duration) {
			if window > 0 {
				limit.Record(ctx, float64(n)/window.Seconds())
			}
		},
		StoreFailed: func(ctx context.Context, _ error) {
			storeErrs.Add(ctx, 1)
		},
	}, nil
}

package otelmetric_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/otelmetric"
	"github.com/sluicehq/sluice/pace"
)

// A pacer's metrics: an upstream announcing 5 requests per second answers
// the second request with a 429 and Retry-After: 1; the third request
// waits that second. The clock is simulated.
func ExamplePaceHooks() {
	reader := sdkmetric.NewManualReader()
	hooks, err := otelmetric.PaceHooks(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		panic(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	sent := 0
	upstream := upstreamFunc(func(*http.Request) (*http.Response, error) {
		sent++
		h := http.Header{"Ratelimit-Policy": {`"default";q=5;w=1`}}
		status := http.StatusOK
		if sent == 2 {
			status = http.StatusTooManyRequests
			h.Set("Retry-After", "1")
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(""))}, nil
	})
	client := &http.Client{Transport: pace.New(upstream, pace.WithHooks(hooks),
		pace.WithClock(clockFuncs{func() time.Time { return now },
			func(_ context.Context, d time.Duration) error { now = now.Add(d); return nil }}),
		pace.WithJitter(func(time.Duration) time.Duration { return 0 }))}
	for range 3 {
		res, err := client.Get("https://api.example.com/")
		if err != nil {
			panic(err)
		}
		res.Body.Close()
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	var lines []string
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			lines = append(lines, fmt.Sprintf("%s: %d", m.Name, d.DataPoints[0].Value))
		case metricdata.Gauge[float64]:
			lines = append(lines, fmt.Sprintf("%s: %g %s", m.Name, d.DataPoints[0].Value, m.Unit))
		case metricdata.Histogram[float64]:
			lines = append(lines, fmt.Sprintf("%s: %d waits, %gs in all", m.Name, d.DataPoints[0].Count, d.DataPoints[0].Sum))
		}
	}
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// sluice.pace.limit: 5 {request}/s
	// sluice.pace.requests: 3
	// sluice.pace.throttled: 1
	// sluice.pace.wait.duration: 3 waits, 1s in all
}

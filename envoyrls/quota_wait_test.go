package envoyrls_test

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/redis/redistest"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// Every OVER_LIMIT status says when its bucket can give a unit, and the
// RateLimit header agrees: envoyproxy/ratelimit's quota.sh then
// token-quota.sh, in memory. Two quota_mode descriptors (1 and 2 a minute),
// three requests naming both, then a zero-cost check (hits_addend 0) on
// one of them: OVER_LIMIT, and before the fix duration_until_reset 0 and
// t=0 (a client told to retry now).
func TestQuotaDenialsSayWhen(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) { testQuotaDenialsSayWhen(t, backend) })
	}
}

func testQuotaDenialsSayWhen(t *testing.T, backend string) {
	const cfg = `domain: quota
descriptors:
  - key: service_1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: service_2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
`
	clock := limitertest.NewClock(limitertest.Start)
	opts := []envoyrls.Option{envoyrls.WithClock(clock)}
	if backend == "redis" {
		opts = append(opts, envoyrls.WithBackend(redisBackend(t, redistest.Start(t).Addr, clock, "quotawait")))
	}
	c := serve(t, envoyrls.New(load(t, "quota.yaml", cfg), opts...))
	both := &rlsv3.RateLimitRequest{Domain: "quota", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("service_1", "a"), desc("service_2", "b")}}
	header := regexp.MustCompile(`"quota\.service_2";r=(\d+);t=(\d+)`)
	checkOver := func(what string, resp *rlsv3.RateLimitResponse, i int, min time.Duration) {
		t.Helper()
		st := resp.Statuses[i]
		if st.Code != rlsv3.RateLimitResponse_OVER_LIMIT {
			return
		}
		if d := st.DurationUntilReset.AsDuration(); d < min || d > time.Minute {
			t.Errorf("%s: status %d OVER_LIMIT with duration_until_reset %v, want %v to 1m", what, i, d, min)
		}
	}
	for i := range 3 {
		resp := askReq(t, c, both)
		for d := range resp.Statuses {
			checkOver("request "+strconv.Itoa(i+1), resp, d, time.Second)
		}
	}
	check := &rlsv3.RateLimitRequest{Domain: "quota", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("service_2", "b")}}
	check.Descriptors[0].HitsAddend = wrapperspb.UInt64(0)
	resp := askReq(t, c, check)
	if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("zero-cost check after the quota is used: %v", resp.OverallCode)
	}
	// 2 a minute: a unit comes back within 30 s.
	if d := resp.Statuses[0].DurationUntilReset.AsDuration(); d <= 0 || d > 30*time.Second {
		t.Errorf("zero-cost check: duration_until_reset %v, want in (0, 30s]", d)
	}
	var tSec int64 = -1
	for _, h := range resp.ResponseHeadersToAdd {
		if m := header.FindStringSubmatch(h.Value); h.Key == "RateLimit" && m != nil {
			tSec, _ = strconv.ParseInt(m[2], 10, 64)
		}
	}
	want := int64((resp.Statuses[0].DurationUntilReset.AsDuration() + time.Second - 1) / time.Second)
	if tSec <= 0 || tSec != want {
		t.Errorf("RateLimit header t=%d, want %d (the status' duration, rounded up): %v", tSec, want, resp.ResponseHeadersToAdd)
	}
	// After that wait the check passes.
	clock.Advance(resp.Statuses[0].DurationUntilReset.AsDuration())
	if resp := askReq(t, c, check); resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Errorf("after duration_until_reset: %v", resp)
	}
}

package envoyrls_test

import (
	"context"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// FuzzParseYAML: any file is either a configuration or a *ConfigError
// whose every problem names the file; it never panics, and a configuration
// it accepts answers lookups.
func FuzzParseYAML(f *testing.F) {
	f.Add([]byte(twoLimits))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    value: v*\n    rate_limit: {unit: day, requests_per_unit: 3, unit_multiplier: 2, name: n, replaces: [{name: m}]}\n    descriptors:\n      - key: k2\n        shadow_mode: true\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true}\n  - key: k\n"))
	f.Add([]byte("domain: &a d\ndescriptors: *a\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    value: a*b*\n    share_threshold: true\n    quota_mode: true\n    value_to_metric: true\n    metadata: {m: {n: [1, x, true, null]}}\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    share_threshold: 3\n    quota_mode: [x]\n    metadata: {? [a] : b}\n"))
	f.Add([]byte("domain: [1]\ndescriptors: {a: b}\n"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := envoyrls.Parse(map[string][]byte{"f.yaml": data})
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n\t")[1:] {
				if !strings.HasPrefix(line, "f.yaml") && !strings.HasPrefix(line, "…") {
					t.Fatalf("a problem without its file: %q", line)
				}
			}
			if cfg != nil {
				t.Fatal("a configuration and an error")
			}
			return
		}
		for _, d := range cfg.Domains() {
			_ = cfg.Lookup(d, [2]string{"k", "v"}, [2]string{"k2", ""})
		}
	})
}

// FuzzShouldRateLimit feeds arbitrary protobuf bytes as a request: each one
// is either refused with InvalidArgument or answered with one status per
// descriptor; nothing panics, and a refused request consumes nothing.
func FuzzShouldRateLimit(f *testing.F) {
	seed := func(req *rlsv3.RateLimitRequest) {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	neg := hits(desc("tenant", "a"), 3)
	neg.IsNegativeHits = true
	over := desc("route", "r")
	over.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_MINUTE, UnitMultiplier: wrapperspb.UInt32(3)}
	seed(&rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "a"), desc("route", "r")}})
	seed(&rlsv3.RateLimitRequest{Domain: "api", HitsAddend: 7, Descriptors: []*ratelimitv3.RateLimitDescriptor{neg, over, hits(desc("ten", "x"), 0)}})
	seed(&rlsv3.RateLimitRequest{Domain: "", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("", "")}})
	cfg, err := envoyrls.Parse(map[string][]byte{"api.yaml": []byte(twoLimits)})
	if err != nil {
		f.Fatal(err)
	}
	clock := limitertest.NewClock(limitertest.Start)
	srv := envoyrls.New(cfg, envoyrls.WithClock(clock))
	ctx := context.Background()
	probe := &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{hits(desc("tenant", "a"), 0)}}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req rlsv3.RateLimitRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		before, err := srv.ShouldRateLimit(ctx, probe)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.ShouldRateLimit(ctx, &req)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), "envoyrls: ") {
				t.Fatalf("error %v is not a clear InvalidArgument", err)
			}
			after, _ := srv.ShouldRateLimit(ctx, probe)
			if after.Statuses[0].LimitRemaining != before.Statuses[0].LimitRemaining {
				t.Fatalf("a refused request consumed: %d then %d", before.Statuses[0].LimitRemaining, after.Statuses[0].LimitRemaining)
			}
			return
		}
		if len(resp.Statuses) != len(req.Descriptors) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
		}
		clock.Advance(1 << 30)
	})
}

package envoyrls_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/envoyrls"
)

// String lists every rule, sorted, in envoyproxy/ratelimit's /rlconfig shape.
func TestConfigString(t *testing.T) {
	cfg, err := envoyrls.Parse(map[string][]byte{"a.yaml": []byte(`domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 10}
    descriptors:
      - key: path
        value: /login
        rate_limit: {unit: second, requests_per_unit: 3, unit_multiplier: 30}
  - key: open
    rate_limit: {unlimited: true}
  - key: beta
    shadow_mode: true
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
`)})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"edge.beta: unit=HOUR requests_per_unit=1, shadow_mode: true, quota_mode: true",
		"edge.open: unlimited, shadow_mode: false, quota_mode: false",
		"edge.remote_address: unit=MINUTE requests_per_unit=10, shadow_mode: false, quota_mode: false",
		"edge.remote_address.path_/login: unit=SECOND requests_per_unit=3 unit_multiplier=30, shadow_mode: false, quota_mode: false",
	}, "\n") + "\n"
	if got := cfg.String(); got != want {
		t.Errorf("String:\n%s\nwant:\n%s", got, want)
	}
	var nilCfg *envoyrls.Config
	if nilCfg.String() != "" {
		t.Error("a nil Config is not empty")
	}
}

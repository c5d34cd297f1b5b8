package stack_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/stack"
)

// "hour" and "day" load from JSON like "second" and "minute" (envoyproxy's
// configurations use them), and have the lengths their names say.
func TestHourAndDayPeriodsLoad(t *testing.T) {
	cfg, err := stack.Parse([]byte(`{"rateLimits": [{"rateLimitId": "quota", "dimensionKeys": ["caller"],
	  "entries": [{"dimensions": {"caller": "*"}, "requests": [{"rate": 10, "period": "second"}, {"rate": 100, "period": "hour"}, {"rate": 250, "period": "day"}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.RateLimits[0].Entries[0].Requests
	if got[1].Period != stack.Hour || got[2].Period != stack.Day {
		t.Fatalf("periods %+v", got)
	}
	for p, want := range map[stack.Unit]time.Duration{"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour,
		"week": 7 * 24 * time.Hour, "month": 30 * 24 * time.Hour, "year": 365 * 24 * time.Hour, "Hour": 0, "": 0} {
		if d := p.Duration(); d != want {
			t.Errorf("Unit(%q).Duration() = %v, want %v", p, d, want)
		}
	}
}

// Week, month and year are envoyrls' units: a Stack's configuration refuses
// them at their path, naming the units it takes.
func TestStackRefusesEnvoyOnlyUnits(t *testing.T) {
	for _, u := range []string{"week", "month", "year", "fortnight"} {
		_, err := stack.Parse([]byte(`{"rateLimits": [{"rateLimitId": "q", "dimensionKeys": ["caller"],
		  "entries": [{"dimensions": {"caller": "*"}, "requests": [{"rate": 10, "period": "` + u + `"}]}]}]}`))
		want := `rateLimits[0].entries[0].requests[0].period: "` + u + `" must be "second", "minute", "hour" or "day"`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("period %q: err = %v, want it to contain %s", u, err, want)
		}
	}
}

package stack_test

import (
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
	if got[1].Period != stack.PeriodHour || got[2].Period != stack.PeriodDay {
		t.Fatalf("periods %+v", got)
	}
	for p, want := range map[stack.Period]time.Duration{"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour, "week": 0, "Hour": 0, "": 0} {
		if d := p.Duration(); d != want {
			t.Errorf("Period(%q).Duration() = %v, want %v", p, d, want)
		}
	}
}

package sluice_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
)

func TestDecisionLogValue(t *testing.T) {
	tests := []struct {
		name string
		d    sluice.Decision
		want map[string]any
	}{
		{"allowed, no limit", sluice.Decision{Allowed: true},
			map[string]any{"allowed": true}},
		{"allowed names its tightest limit", sluice.Decision{Allowed: true, LimitID: "per-caller", Limit: 10, Remaining: 3},
			map[string]any{"allowed": true, "limit": "per-caller"}},
		{"throttled", sluice.Decision{LimitID: "per-tool", LimitKey: "per-tool/toolName=readData", Metric: sluice.MetricTokens, RetryAfter: 1500 * time.Millisecond,
			MatchedEntry: []string{"readData"}, ResolvedValues: []string{"readData"}},
			map[string]any{"allowed": false, "limit": "per-tool/toolName=readData", "metric": "tokens", "retry_after": float64(1500 * time.Millisecond)}},
		{"permanent", sluice.Decision{LimitID: "deny", LimitKey: "deny", Metric: sluice.MetricRequests, Permanent: true},
			map[string]any{"allowed": false, "limit": "deny", "metric": "requests", "permanent": true}},
		{"shadowed", sluice.Decision{Allowed: true, Shadowed: []string{"new-limit/caller=bob"}},
			map[string]any{"allowed": true, "shadowed": []any{"new-limit/caller=bob"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{
				ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
					if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
						return slog.Attr{}
					}
					return a
				},
			})).Info("", "decision", tt.d)
			var got struct {
				Decision map[string]any `json:"decision"`
			}
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("%v in %s", err, buf.Bytes())
			}
			if diff := cmp.Diff(tt.want, got.Decision); diff != "" {
				t.Errorf("logged decision (-want +got):\n%s", diff)
			}
		})
	}
}

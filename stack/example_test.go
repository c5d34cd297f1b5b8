package stack_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// A gateway definition loads unchanged; the most specific entry wins, and
// stacked limits must all pass.
func Example() {
	cfg := `{"rateLimits": [
	  {"rateLimitId": "per-tool", "dimensionKeys": ["targetName", "toolName"], "entries": [
	    {"dimensions": {"targetName": "my-target", "toolName": "readData"}, "requests": [{"rate": 3, "period": "second"}]},
	    {"dimensions": {"targetName": "my-target", "toolName": "*"},        "requests": [{"rate": 1, "period": "second"}]}
	  ]},
	  {"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
	    {"dimensions": {"caller": "*"}, "requests": [{"rate": 120, "period": "minute"}]}
	  ]}
	]}`
	s, err := stack.Load([]byte(cfg), stack.WithClock(limitertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, tool := range []string{"readData", "readData", "readData", "readData", "writeData", "writeData"} {
		keys := sluice.NewKeys("targetName", "my-target", "toolName", tool, "caller", "alice")
		d, _ := s.Allow(ctx, keys)
		if d.Allowed {
			fmt.Printf("%-9s allowed, %d of %d left\n", tool, d.Remaining, d.Limit)
			continue
		}
		fmt.Printf("%-9s throttled by %s (matched %v), retry after %v\n", tool, d.LimitKey, d.MatchedEntry, d.RetryAfter)
	}
	// Output:
	// readData  allowed, 2 of 3 left
	// readData  allowed, 1 of 3 left
	// readData  allowed, 0 of 3 left
	// readData  throttled by per-tool/targetName=my-target,toolName=readData (matched [my-target readData]), retry after 333.333332ms
	// writeData allowed, 0 of 1 left
	// writeData throttled by per-tool/targetName=my-target,toolName=writeData (matched [my-target *]), retry after 1s
}

// Allow skips a limit whose dimension a request does not carry, so keys
// with a misspelt dimension name ("IP" for "ip") are silently unlimited.
// Selects shows, in a test, which limits a set of keys selects.
func ExampleStack_Selects() {
	s, err := stack.Load([]byte(`{"rateLimits": [
	  {"rateLimitId": "per-ip", "dimensionKeys": ["ip"], "entries": [
	    {"dimensions": {"ip": "*"}, "requests": [{"rate": 10, "period": "second"}]}]},
	  {"rateLimitId": "per-tool", "dimensionKeys": ["caller", "tool"], "entries": [
	    {"dimensions": {"caller": "alice", "tool": "*"}, "requests": [{"rate": 1, "period": "second"}]}]}
	]}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Selects(sluice.NewKeys("ip", "192.0.2.1", "caller", "alice", "tool", "search")))
	fmt.Println(s.Selects(sluice.NewKeys("ip", "192.0.2.1", "caller", "bob", "tool", "search"))) // no entry for bob
	fmt.Println(s.Selects(sluice.NewKeys("IP", "192.0.2.1")))                                    // misspelt: nothing applies
	// Output:
	// [per-ip per-tool]
	// [per-ip]
	// []
}

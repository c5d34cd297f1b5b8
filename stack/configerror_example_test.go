package stack_test

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/stack"
)

// An invalid configuration is a *stack.ConfigError: its message names every
// problem with its path (the first 20, then a count), and Problems lists
// them for code.
func ExampleConfigError() {
	_, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "per-caller", "dimensionKeys": ["caller"],
	  "entries": [{"dimensions": {"caller": "*"}, "requests": [{"rate": 10, "period": "week"}]},
	              {"dimensions": {"caller": ""},  "requests": [{"rate": 10, "period": "second"}]}]}]}`))
	fmt.Println(err)
	var ce *stack.ConfigError
	if errors.As(err, &ce) {
		fmt.Println(ce.Count(), "problems; the first is at", ce.Problems[0].Path)
	}
	// Output:
	// invalid rate limit configuration: 2 problems:
	//	rateLimits[0].entries[0].requests[0].period: "week" must be "second", "minute", "hour" or "day"
	//	rateLimits[0].entries[1].dimensions.caller: empty value (use "*" to match every value)
	// 2 problems; the first is at rateLimits[0].entries[0].requests[0].period
}

// Command gateway is sluice's main demo, on the in-memory default: the
// gateway's entry-matching table and AND stacking from the rate-limit
// enforcement document, driven by a fake clock and printed.
//
//	go run ./examples/gateway
//
// It takes no flags or arguments; given any, it says so in one line and the
// exit status is 1.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
)

// config is written exactly as for the gateway's API.
const config = `{"rateLimits": [
  {
    "rateLimitId": "per-tool",
    "dimensionKeys": ["targetName", "toolName"],
    "entries": [
      {"dimensions": {"targetName": "my-target", "toolName": "readData"}, "requests": [{"rate": 5, "period": "second"}]},
      {"dimensions": {"targetName": "my-target", "toolName": "*"},        "requests": [{"rate": 2, "period": "second"}]},
      {"dimensions": {"targetName": "*",         "toolName": "*"},        "requests": [{"rate": 1, "period": "second"}]}
    ]
  },
  {
    "rateLimitId": "per-target-rps",
    "dimensionKeys": ["targetName"],
    "entries": [{"dimensions": {"targetName": "*"}, "requests": [{"rate": 5, "period": "second"}]}]
  },
  {
    "rateLimitId": "per-caller-rpm",
    "dimensionKeys": ["$.context.jwt.sub"],
    "entries": [
      {"dimensions": {"$.context.jwt.sub": "alice"}, "requests": [{"rate": 600, "period": "minute"}]},
      {"dimensions": {"$.context.jwt.sub": "*"},     "requests": [{"rate": 4, "period": "minute"}]}
    ]
  }
]}`

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "gateway: unexpected argument %q: this example takes no flags or arguments\n", os.Args[1])
		os.Exit(1)
	}
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s, err := stack.Load([]byte(config), stack.WithClock(sluice.ClockFunc(func() time.Time { return now })))
	if err != nil {
		return err
	}
	ctx := sluice.WithEvaluated(context.Background())
	call := func(caller, target, tool string) {
		keys := sluice.NewKeys("targetName", target, "toolName", tool, "$.context.jwt.sub", caller)
		d, err := s.Allow(ctx, keys)
		if err != nil {
			fmt.Fprintln(w, "error:", err)
			return
		}
		what := fmt.Sprintf("%-5s %-10s %-10s", caller, target, tool)
		if d.Allowed {
			fmt.Fprintf(w, "  %s allowed    evaluated %s\n", what, strings.Join(d.Evaluated, " "))
			return
		}
		fmt.Fprintf(w, "  %s THROTTLED  %s (entry %s), retry after %v\n", what, d.LimitKey, strings.Join(d.MatchedEntry, ","), d.RetryAfter.Round(time.Millisecond))
	}

	fmt.Fprintln(w, "Entry matching for [targetName, toolName] (exact, then trailing *, then the default):")
	fmt.Fprintln(w, "  my-target/readData  -> (my-target, readData): 5/s")
	fmt.Fprintln(w, "  my-target/writeData -> (my-target, *): 2/s for each tool")
	fmt.Fprintln(w, "  other/readData      -> (*, *): 1/s for each (target, tool)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "t=0s: alice calls readData 7 times; per-target-rps (5/s) is stacked on top:")
	for i := 0; i < 7; i++ {
		call("alice", "my-target", "readData")
	}
	fmt.Fprintln(w, "t=0s: writeData gets its own (my-target, *) bucket, but the target's 5/s is spent:")
	call("alice", "my-target", "writeData")
	now = now.Add(time.Second)
	fmt.Fprintln(w, "t=1s: bob (4/min) on another target falls to the (*, *) default entry:")
	for i := 0; i < 3; i++ {
		call("bob", "other", "readData")
	}
	now = now.Add(time.Second)
	fmt.Fprintln(w, "t=2s: bob's per-caller limit is the strictest one left:")
	for _, tool := range []string{"a", "b", "c", "d"} {
		call("bob", "other", tool)
	}
	return nil
}

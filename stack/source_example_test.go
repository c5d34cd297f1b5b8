package stack_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/stack"
)

// A Source keeps enforcing the last good configuration when the file goes
// bad. A program runs it with `go src.Run(ctx)`, which refreshes every
// interval; here Refresh is called by hand.
func ExampleSource() {
	dir, err := os.MkdirTemp("", "sluice")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "limits.json")
	write := func(doc string) {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			panic(err)
		}
	}
	limits := func(rate int) string {
		return fmt.Sprintf(`{"rateLimits": [{"rateLimitId": "per-caller", "dimensionKeys": ["caller"],
		  "entries": [{"dimensions": {"caller": "*"}, "requests": [{"rate": %d, "period": "minute"}]}]}]}`, rate)
	}

	write(limits(60))
	s, err := stack.Load([]byte(limits(60)), stack.WithErrorHandler(func(err error) {
		var se *stack.SourceError
		if errors.As(err, &se) {
			fmt.Println("reported a failed", se.Op, "- the last good configuration stays")
		}
	}))
	if err != nil {
		panic(err)
	}
	src := stack.NewFileSource(s, path, stack.WithInterval(stack.DefaultRefreshInterval))
	ctx := context.Background()
	show := func() {
		st := src.Status()
		fmt.Printf("rate %d/minute, generation %d, %d errors\n",
			s.Config().RateLimits[0].Entries[0].Requests[0].Rate, st.Generation, st.Errors)
	}

	_ = src.Refresh(ctx)
	show()
	write(limits(120)) // a change: applied at the next refresh
	_ = src.Refresh(ctx)
	show()
	write(limits(30)[:40]) // half written: rejected, 120 stays in force
	_ = src.Refresh(ctx)
	show()
	// Output:
	// rate 60/minute, generation 1, 0 errors
	// rate 120/minute, generation 2, 0 errors
	// reported a failed load - the last good configuration stays
	// rate 120/minute, generation 2, 1 errors
}

// Command ecs replays the Amazon ECS API throttling model: twenty categories
// of actions, each sharing one token bucket, driven by a fake clock. A
// throttled call prints the ThrottlingException an AWS SDK would see.
//
//	go run ./examples/ecs
//
// It takes no flags or arguments; given any, it says so in one line and the
// exit status is 1.
package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sluicehq/sluice/category"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "ecs: unexpected argument %q: this example takes no flags or arguments\n", os.Args[1])
		os.Exit(1)
	}
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ecs:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	set, err := category.New(category.ECS())
	if err != nil {
		return err
	}
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start := t
	burst := func(calls map[string]int, order ...string) {
		fmt.Fprintf(w, "t=%-5v", t.Sub(start))
		for _, action := range order {
			ok, n := 0, calls[action]
			var last time.Duration
			for i := 0; i < n; i++ {
				d, err := set.AllowActionAt(t, action, 1)
				if err != nil {
					fmt.Fprintln(w, err)
					return
				}
				if d.Allowed {
					ok++
				} else {
					last = d.RetryAfter
				}
			}
			fmt.Fprintf(w, "  %s %d/%d", action, ok, n)
			if ok < n {
				fmt.Fprintf(w, " (ThrottlingException: Rate exceeded, retry after %v)", last.Round(time.Millisecond))
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Cluster read: burst 50, refill 20/s, shared by DescribeClusters and ListClusters")
	burst(map[string]int{"DescribeClusters": 25, "ListClusters": 25}, "DescribeClusters", "ListClusters")
	t = t.Add(5 * time.Second)
	burst(map[string]int{"DescribeClusters": 50, "ListClusters": 50}, "DescribeClusters", "ListClusters")
	for i := 0; i < 3; i++ {
		t = t.Add(time.Second)
		burst(map[string]int{"DescribeClusters": 30}, "DescribeClusters")
	}
	t = t.Add(2500 * time.Millisecond)
	fmt.Fprintln(w, "after 2.5 s idle the empty bucket is full again:")
	burst(map[string]int{"ListClusters": 60}, "ListClusters")
	fmt.Fprintln(w, "Other categories have their own buckets:")
	burst(map[string]int{"RunTask": 120, "StopTask": 10, "DeleteTaskDefinitions": 8, "CreateService": 60}, "RunTask", "StopTask", "DeleteTaskDefinitions", "CreateService")
	return nil
}

package category_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/category"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// The seed's example: DescribeClusters and ListClusters share the cluster-read
// bucket of 50, refilled at 20 per second.
func Example() {
	set, err := category.New([]category.Category{
		{Name: "Cluster read", Burst: 50, Refill: 20, Actions: []string{"DescribeClusters", "ListClusters"}},
	})
	if err != nil {
		panic(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	burst := func(at time.Time, describe, list int) {
		ok := 0
		for i := 0; i < describe+list; i++ {
			action := "DescribeClusters"
			if i >= describe {
				action = "ListClusters"
			}
			if d, _ := set.AllowActionAt(at, action, 1); d.Allowed {
				ok++
			}
		}
		fmt.Printf("%d Describe + %d List: %d allowed\n", describe, list, ok)
	}
	burst(t0, 25, 25)
	burst(t0.Add(10*time.Second), 50, 50)
	d, _ := set.AllowActionAt(t0.Add(10*time.Second), "ListClusters", 1)
	fmt.Println(d.LimitKey, "retry after", d.RetryAfter)
	// Output:
	// 25 Describe + 25 List: 50 allowed
	// 50 Describe + 50 List: 50 allowed
	// Cluster read/action=ListClusters retry after 50ms
}

// The Amazon ECS table ships with the package: build a limiter from it and
// render a denial as the ThrottlingException AWS SDKs retry.
func ExampleECS() {
	set, err := category.New(category.ECS())
	if err != nil {
		panic(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	allowed := 0
	for i := 0; i < 8; i++ {
		d, err := set.AllowActionAt(t0, "DeleteTaskDefinitions", 1)
		if err != nil {
			panic(err)
		}
		if d.Allowed {
			allowed++
			continue
		}
		fmt.Println(allowed, "allowed, then", d.LimitID, "retry after", d.RetryAfter)
		break
	}
	c, _ := set.Category("RunTask")
	fmt.Printf("RunTask: %s, burst %d, %v per second\n", c.Name, c.Burst, c.Refill)
	// Output:
	// 5 allowed, then Task definition deletion retry after 1s
	// RunTask: Cluster resource modify, burst 100, 40 per second
}

// WithClock injects the clock Allow and AllowAction read (any
// sluice.Clock); here a manual one that the example advances by hand.
func ExampleWithClock() {
	clock := limitertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	set, err := category.New(category.ECS(), category.WithClock(clock))
	if err != nil {
		panic(err)
	}
	for i := 0; i < 20; i++ { // drain Cluster modify (burst 20)
		if _, err := set.AllowAction("CreateCluster"); err != nil {
			panic(err)
		}
	}
	d, _ := set.AllowAction("UpdateCluster")
	fmt.Println("allowed:", d.Allowed, "retry after", d.RetryAfter)
	clock.Advance(time.Second) // refill: 1 per second
	d, _ = set.AllowAction("UpdateCluster")
	fmt.Println("a second later, allowed:", d.Allowed)
	// Output:
	// allowed: false retry after 1s
	// a second later, allowed: true
}

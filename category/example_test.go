package category_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/category"
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
			if d, _ := set.AllowAt(at, action, 1); d.Allowed {
				ok++
			}
		}
		fmt.Printf("%d Describe + %d List: %d allowed\n", describe, list, ok)
	}
	burst(t0, 25, 25)
	burst(t0.Add(10*time.Second), 50, 50)
	d, _ := set.AllowAt(t0.Add(10*time.Second), "ListClusters", 1)
	fmt.Println(d.LimitKey, "retry after", d.RetryAfter)
	// Output:
	// 25 Describe + 25 List: 50 allowed
	// 50 Describe + 50 List: 50 allowed
	// Cluster read/action=ListClusters retry after 50ms
}

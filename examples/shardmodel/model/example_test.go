package model_test

import (
	"fmt"

	"github.com/sluicehq/sluice/examples/shardmodel/model"
)

// Seed 003: 129.01 successes and 7.27 rejections per second under a limit of
// 150. One limiter explains only 0.61 of the 7.27 per second.
func ExamplePoisson() {
	p, err := model.NewPoisson(129.01 + 7.27)
	if err != nil {
		panic(err)
	}
	fmt.Printf("P(X ≥ 151)     = %.5f\n", p.AtLeast(151))
	fmt.Printf("E[X | X ≥ 151] = %.1f\n", p.MeanAtLeast(151))
	fmt.Printf("rejections/s   = %.2f\n", p.Excess(151))
	// Output:
	// P(X ≥ 151)     = 0.11279
	// E[X | X ≥ 151] = 156.4
	// rejections/s   = 0.61
}

// Six pods each holding 150/6 = 25 per second (border 26), clients retrying
// once: the model explains 6.85 of the 7.27 rejections per second.
func ExamplePredict() {
	pr, err := model.Predict(model.Scenario{Rate: 129.01 + 7.27/2, Limit: 150, Shards: 6, Retries: 1})
	if err != nil {
		panic(err)
	}
	fmt.Printf("per pod: λ = %.4f, border %d, P(full) = %.3f\n", pr.ShardRate, pr.Border, pr.PAtLeast)
	fmt.Printf("fleet: %.2f rejections/s (%.1f%% of requests)\n", pr.Rejected, 100*pr.Fraction)
	// Output:
	// per pod: λ = 22.1075, border 26, P(full) = 0.230
	// fleet: 6.85 rejections/s (5.2% of requests)
}

// What limit would have kept the seed's six pods under 1% rejections, and
// how many pods can share the original limit of 150 and stay under 1%?
func ExampleMinLimit() {
	s := model.Scenario{Rate: 129.01 + 7.27/2, Limit: 150, Shards: 6, Retries: 1}
	limit, err := model.MinLimit(s, 0.01*s.Rate)
	if err != nil {
		panic(err)
	}
	n, err := model.MaxShardCount(s, 0.01*s.Rate, 64)
	if err != nil {
		panic(err)
	}
	fmt.Println("limit for 1% over six pods:", limit)
	fmt.Println("pods sharing 150 under 1%:", n)
	// Output:
	// limit for 1% over six pods: 180
	// pods sharing 150 under 1%: 1
}

package sim_test

import (
	"fmt"

	"github.com/sluicehq/sluice/examples/shardmodel/model"
	"github.com/sluicehq/sluice/examples/shardmodel/sim"
)

// Seed 003's traffic over six pods, each with a window reset every second
// that admits 26: the simulation lands near the model's 6.85 rejections/s.
func ExampleRun() {
	s := model.Scenario{Rate: 129.01 + 7.27/2, Limit: 150, Shards: 6, Retries: 1}
	pr, err := model.Predict(s)
	if err != nil {
		panic(err)
	}
	res, err := sim.Run(sim.Config{Scenario: s, Seconds: 3600, Seed: 1},
		func(int) sim.Allower { return sim.NewFixedWindow(pr.Border) })
	if err != nil {
		panic(err)
	}
	fmt.Printf("model %.2f/s, simulated %.2f/s over an hour\n", pr.Rejected, res.RejectedPerSecond())
	// Output:
	// model 6.85/s, simulated 7.00/s over an hour
}

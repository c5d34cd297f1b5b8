package main

import (
	"io"
	"os"
)

// The seed's scenario with a short simulation and no plot. The numbers are
// deterministic: the simulated arrivals come from a seeded generator.
func Example() {
	if err := run([]string{"-seconds", "600", "-plot", ""}, os.Stdout, io.Discard); err != nil {
		panic(err)
	}
	// Output:
	// λ = 132.645 requests/s, limit 150 over 6 shards, 1 retry per rejected request
	// per shard: λ = 22.1075, border 26, P(X ≥ 26) = 0.22998, E[X | X ≥ 26] = 28.48
	// predicted 429s: 6.8531/s over the fleet (5.166% of requests)
	// smallest limit keeping 429s ≤ 1% over 6 shards: 180
	// shards that can share a limit of 150 and keep 429s ≤ 1%: 1 to 1
	//
	// 429s per second, model and 600 simulated seconds per row:
	//   shards  border   model  fixed 1 s window  sluice bucket  x/time/rate
	//        1     151  0.6010            0.5667         0.0000       0.0000
	//        2      76  2.0171            2.0733         0.0000       0.0000
	//        3      51  3.4161            3.4600         0.0000       0.0000
	//        6      26  6.8531            7.1067         0.0767       0.0767
}

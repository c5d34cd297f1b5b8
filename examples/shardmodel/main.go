// Command shardmodel answers seed 003's question for your numbers: with this
// traffic and this limit, split over this many pods that do not coordinate,
// how many 429s will clients see, and what limit keeps them under x%?
//
//	go run ./examples/shardmodel                     # the seed: 132.645 rps, 150 over 6 pods, 1 retry
//	go run ./examples/shardmodel -rate 900 -limit 1000 -shards 4 -retries 0 -target 0.5
//
// It prints the Poisson model's prediction (package model), the inverse
// (smallest limit for the target; how many pods can share the limit), and a
// table comparing the model with simulations (package sim) of a fixed
// one-second window per pod and of a token bucket per pod (sluice's bucket,
// and golang.org/x/time/rate beside it), for 1, 2, 3 and 6 pods. It writes a plot of rejections per second against traffic for 1 to 6
// pods, model lines and simulated markers, to the SVG file named by -plot
// (default shardmodel.svg in the temporary directory; -plot "" skips it).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/bucket"
	"github.com/sluicehq/sluice/examples/shardmodel/model"
	"github.com/sluicehq/sluice/examples/shardmodel/sim"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "shardmodel:", err)
		}
		os.Exit(2)
	}
}

// config is the parsed command line.
type config struct {
	scenario model.Scenario
	target   float64 // percent of original requests
	seconds  int     // simulated seconds per run; 0 = automatic
	seed     uint64
	plot     string
}

// parseArgs reads the flags; every error names the flag and the bad value.
func parseArgs(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("shardmodel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.Float64Var(&c.scenario.Rate, "rate", 129.01+7.27/2, "mean original `requests/s` over the fleet, retries not included (λ)")
	fs.IntVar(&c.scenario.Limit, "limit", 150, "fleet limit in `requests/s`, split evenly over the shards")
	fs.IntVar(&c.scenario.Shards, "shards", 6, "pods, each running its own limiter of limit/shards (+1, as in the seed)")
	fs.IntVar(&c.scenario.Retries, "retries", 1, "immediate retries of a rejected request")
	fs.Float64Var(&c.target, "target", 1, "largest acceptable 429s, in `percent` of original requests, for the inverse")
	fs.IntVar(&c.seconds, "seconds", 0, "simulated `seconds` per table row (0: about 2·10^6 arrivals, 1 to 3600 s, none above 2·10^6 requests/s)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the simulated arrivals")
	fs.StringVar(&c.plot, "plot", filepath.Join(os.TempDir(), "shardmodel.svg"), "write the SVG plot to this `file` (\"\" skips the plot)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q: all input is given by flags", fs.Arg(0))
	}
	s := c.scenario
	switch {
	case math.IsNaN(s.Rate) || s.Rate < 0 || s.Rate > model.MaxLambda:
		return config{}, fmt.Errorf("-rate %v: must be between 0 and %g", s.Rate, float64(model.MaxLambda))
	case s.Limit < 0 || s.Limit > model.MaxLimit:
		return config{}, fmt.Errorf("-limit %d: must be between 0 and %d", s.Limit, model.MaxLimit)
	case s.Shards < 1 || s.Shards > model.MaxShards:
		return config{}, fmt.Errorf("-shards %d: must be between 1 and %d", s.Shards, model.MaxShards)
	case s.Retries < 0 || s.Retries > model.MaxRetries:
		return config{}, fmt.Errorf("-retries %d: must be between 0 and %d", s.Retries, model.MaxRetries)
	case math.IsNaN(c.target) || c.target <= 0 || c.target > 100*(model.MaxRetries+1):
		return config{}, fmt.Errorf("-target %v: must be a percentage above 0", c.target)
	case c.seconds < 0 || c.seconds > 86400:
		return config{}, fmt.Errorf("-seconds %d: must be between 0 (automatic) and 86400", c.seconds)
	}
	return c, nil
}

// limiter is one kind of per-shard limiter to simulate.
type limiter struct {
	name string
	// make builds one shard's limiter from the shard's rate (limit/shards
	// per second) and the seed's border (what a window admits per second,
	// used as the bucket's burst).
	make func(perShard float64, border int) sim.Allower
}

// limiters are the kinds the table and the plot compare.
var limiters = []limiter{
	{"fixed 1 s window", func(_ float64, border int) sim.Allower { return sim.NewFixedWindow(border) }},
	{"sluice bucket", func(r float64, border int) sim.Allower {
		return sim.AllowerFunc(bucket.New(rate.Limit(r), border).AllowAt)
	}},
	{"x/time/rate", func(r float64, border int) sim.Allower { return rate.NewLimiter(rate.Limit(r), border) }},
}

// simulate runs one limiter kind on scenario s.
func simulate(s model.Scenario, lim limiter, seconds int, seed uint64) (sim.Result, error) {
	shards := max(s.Shards, 1)
	perShard, border := float64(s.Limit)/float64(shards), s.Border()
	return sim.Run(sim.Config{Scenario: s, Seconds: seconds, Seed: seed},
		func(int) sim.Allower { return lim.make(perShard, border) })
}

// Simulation budgets, in arrivals: per table row when -seconds is automatic,
// and per plot point (the plot has 13 traffic levels × 6 shard counts ×
// every limiter kind, so about 3·10^7 arrivals in all at most).
const (
	rowArrivals   = 2e6
	pointArrivals = 2e5
)

// autoSeconds picks a run length long enough for a steady estimate and
// short enough to finish in about a second: rowArrivals arrivals, 1 s to 1 h.
// It returns 0, meaning "do not simulate", when even one second holds more.
func autoSeconds(rate float64) int {
	if rate > rowArrivals {
		return 0
	}
	if rate <= 0 {
		return 1
	}
	return int(math.Min(3600, math.Ceil(rowArrivals/rate)))
}

func run(args []string, stdout, stderr io.Writer) error {
	c, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	s := c.scenario
	pr, err := model.Predict(s)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "λ = %g requests/s, limit %d over %d shard%s, %d retr%s per rejected request\n",
		s.Rate, s.Limit, s.Shards, plural(s.Shards), s.Retries, map[bool]string{true: "y", false: "ies"}[s.Retries == 1])
	fmt.Fprintf(stdout, "per shard: λ = %.4f, border %d, P(X ≥ %d) = %.5f, E[X | X ≥ %d] = %.2f\n",
		pr.ShardRate, pr.Border, pr.Border, pr.PAtLeast, pr.Border, pr.MeanAtLeast)
	fmt.Fprintf(stdout, "predicted 429s: %.4f/s over the fleet (%.3f%% of requests)\n", pr.Rejected, 100*pr.Fraction)

	maxRejected := c.target / 100 * s.Rate
	if limit, err := model.MinLimit(s, maxRejected); err == nil {
		fmt.Fprintf(stdout, "smallest limit keeping 429s ≤ %g%% over %d shard%s: %d\n", c.target, s.Shards, plural(s.Shards), limit)
	} else {
		fmt.Fprintf(stdout, "smallest limit keeping 429s ≤ %g%%: %v\n", c.target, err)
	}
	const shardSearch = 64
	if n, err := model.MaxShardCount(s, maxRejected, shardSearch); err == nil {
		more := ""
		if n == shardSearch {
			more = " (or more: the search stops there)"
		}
		fmt.Fprintf(stdout, "shards that can share a limit of %d and keep 429s ≤ %g%%: 1 to %d%s\n", s.Limit, c.target, n, more)
	} else {
		fmt.Fprintf(stdout, "shards that can share a limit of %d under %g%%: %v\n", s.Limit, c.target, err)
	}

	seconds := c.seconds
	if seconds == 0 {
		seconds = autoSeconds(s.Rate)
	}
	if seconds == 0 {
		fmt.Fprintf(stdout, "\n429s per second (no simulation: above %g requests/s one second is more than the automatic budget; set -seconds to force it):\n", float64(rowArrivals))
	} else {
		fmt.Fprintf(stdout, "\n429s per second, model and %d simulated seconds per row:\n", seconds)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "shards\tborder\tmodel\t")
	for _, l := range limiters {
		fmt.Fprintf(tw, "%s\t", l.name)
	}
	fmt.Fprintln(tw)
	counts := []int{1, 2, 3, 6}
	if !slices.Contains(counts, s.Shards) {
		counts = append(counts, s.Shards)
		slices.Sort(counts)
	}
	for _, n := range counts {
		sn := s
		sn.Shards = n
		p, err := model.Predict(sn)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%d\t%d\t%.4f\t", n, p.Border, p.Rejected)
		for _, l := range limiters {
			if seconds == 0 {
				fmt.Fprint(tw, "-\t")
				continue
			}
			res, err := simulate(sn, l, seconds, c.seed)
			if err != nil {
				return err
			}
			fmt.Fprintf(tw, "%.4f\t", res.RejectedPerSecond())
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if c.plot == "" {
		return nil
	}
	ch, simulated, err := sweep(s, c.seed, seconds)
	if err != nil {
		return err
	}
	if !simulated {
		fmt.Fprintf(stdout, "\nplot: model only; traffic above %g requests/s is too much to simulate per point\n", float64(pointArrivals))
	}
	f, err := os.Create(c.plot)
	if err != nil {
		return fmt.Errorf("-plot: %w", err)
	}
	if err := writeSVG(f, ch); err != nil {
		f.Close()
		return fmt.Errorf("-plot %s: %w", c.plot, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("-plot %s: %w", c.plot, err)
	}
	fmt.Fprintf(stdout, "\nplot written to %s\n", c.plot)
	return nil
}

// sweep computes the plot: rejections per second against traffic from 0.6 to
// 1.2 times the larger of the limit and the rate, for 1 to 6 shards, model
// and every simulated limiter. Each point is simulated for a quarter of the
// table's seconds, at most pointArrivals arrivals and at least one second;
// if one second is already more, the plot shows the model only and
// simulated is false.
func sweep(s model.Scenario, seed uint64, seconds int) (ch chart, simulated bool, err error) {
	top := math.Max(float64(s.Limit), s.Rate)
	if top == 0 {
		return chart{}, false, errors.New("-plot: nothing to plot with -rate 0 and -limit 0")
	}
	simulated = 1.2*top <= pointArrivals
	pointSeconds := max(1, min(seconds/4, int(pointArrivals/(1.2*top))))
	const steps = 12
	ch = chart{Title: fmt.Sprintf("429s/s vs traffic, limit %d split over n pods, %d retr%s", s.Limit, s.Retries, map[bool]string{true: "y", false: "ies"}[s.Retries == 1])}
	if simulated {
		for _, l := range limiters {
			ch.SimNames = append(ch.SimNames, l.name+" (simulated)")
		}
	}
	for n := 1; n <= 6; n++ {
		cv := curve{Shards: n, Sims: make([][]point, len(limiters))}
		for i := 0; i <= steps; i++ {
			sn := s
			sn.Shards = n
			sn.Rate = top * (0.6 + 0.6*float64(i)/steps)
			p, err := model.Predict(sn)
			if err != nil {
				return chart{}, false, err
			}
			cv.Model = append(cv.Model, point{sn.Rate, p.Rejected})
			if !simulated {
				continue
			}
			for k, l := range limiters {
				// Each point gets its own seed so the markers' noise is
				// independent from point to point.
				res, err := simulate(sn, l, pointSeconds, seed+uint64(1000*n+i))
				if err != nil {
					return chart{}, false, err
				}
				cv.Sims[k] = append(cv.Sims[k], point{sn.Rate, res.RejectedPerSecond()})
			}
		}
		ch.Curves = append(ch.Curves, cv)
	}
	return ch, simulated, nil
}

// Package sim drives rate limiters with Poisson traffic on a fake clock and
// counts the rejections, to set them beside the predictions of package model.
//
// The traffic is the model's: requests arrive as a Poisson stream of mean
// Rate per second; each goes to a shard (pod) picked uniformly at random, so
// every shard sees an independent Poisson stream of Rate/Shards; a rejected
// request is retried at once, at the same instant and on the same shard, up
// to Retries times. Each shard has its own limiter, built by the caller, and
// nothing is shared between shards. Time is a fake clock: arrival instants
// are computed, never waited for, and a run is fully determined by its Seed.
package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/examples/shardmodel/model"
)

// Allower is what the simulator needs from a limiter: a decision for n
// requests at an explicit instant. sluice's bucket.Bucket and
// golang.org/x/time/rate.Limiter both implement it.
type Allower interface {
	AllowN(t time.Time, n int) bool
}

// AllowerFunc is a function as an Allower: AllowerFunc(b.AllowAt) for
// sluice's bucket.Bucket, whose AllowN reads its own clock.
type AllowerFunc func(t time.Time, n int) bool

// AllowN calls f(t, n).
func (f AllowerFunc) AllowN(t time.Time, n int) bool { return f(t, n) }

// FixedWindow is the "reset at the start of each second" limiter the seed
// lists: it admits up to its capacity in every one-second window aligned to
// whole Unix seconds, and forgets the count when the next second begins. It
// is the limiter the model describes exactly: a window that admits c of X
// arrivals rejects (X − c)⁺.
//
// FixedWindow is for simulation: it is not safe for concurrent use, and it
// expects instants that do not go backwards (an earlier second is counted as
// a new window).
type FixedWindow struct {
	capacity int
	second   int64
	used     int
}

// NewFixedWindow returns a window that admits capacity requests per second.
// A capacity below 0 is treated as 0.
func NewFixedWindow(capacity int) *FixedWindow {
	return &FixedWindow{capacity: max(capacity, 0), second: math.MinInt64}
}

// AllowN reports whether n more requests fit in the window of t's second,
// and counts them if so. n ≤ 0 is always allowed and counts nothing.
func (w *FixedWindow) AllowN(t time.Time, n int) bool {
	if n <= 0 {
		return true
	}
	if s := t.Unix(); s != w.second {
		w.second, w.used = s, 0
	}
	if n > w.capacity-w.used {
		return false
	}
	w.used += n
	return true
}

// MaxSeconds bounds Config.Seconds.
const MaxSeconds = 1 << 24

// epoch is the fake clock's instant zero, on a whole Unix second so that
// FixedWindow's seconds line up with the simulated ones.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Config is one simulation run.
type Config struct {
	// Scenario gives the traffic (Rate), the shard count and the retries.
	// Its Limit is not read here; the caller builds the limiters from it.
	model.Scenario
	// Seconds is how long the run lasts on the fake clock.
	Seconds int
	// Seed selects the pseudo-random arrivals; equal seeds give equal runs.
	Seed uint64
}

// Result counts what one run saw.
type Result struct {
	Seconds int
	// Requests counts original requests; Attempts adds the retries.
	Requests, Attempts int
	// FirstRejected counts requests whose first attempt was rejected;
	// Rejected counts every rejected attempt (every 429 a client saw).
	FirstRejected, Rejected int
}

// RejectedPerSecond returns Rejected/Seconds, to compare with
// model.Prediction.Rejected.
func (r Result) RejectedPerSecond() float64 {
	if r.Seconds == 0 {
		return 0
	}
	return float64(r.Rejected) / float64(r.Seconds)
}

// Run simulates cfg with one limiter per shard, built by newLimiter(shard)
// for shard = 0 … Shards−1. The fake clock runs from 2026-01-01T00:00:00Z for
// cfg.Seconds; limiters see those instants, on whole nanoseconds, in order. It returns an error, and runs nothing, if cfg is
// out of range or newLimiter returns nil.
func Run(cfg Config, newLimiter func(shard int) Allower) (Result, error) {
	if err := cfg.Scenario.Validate(); err != nil {
		return Result{}, err
	}
	if cfg.Seconds < 1 || cfg.Seconds > MaxSeconds {
		return Result{}, fmt.Errorf("%w: Config.Seconds = %d: must be between 1 and %d", model.ErrInvalid, cfg.Seconds, MaxSeconds)
	}
	if expected := cfg.Rate * float64(cfg.Seconds) * float64(cfg.Retries+1); expected > 1e10 {
		return Result{}, fmt.Errorf("%w: Config: %g requests per second for %d s: more than 10^10 attempts to simulate", model.ErrInvalid, cfg.Rate, cfg.Seconds)
	}
	if newLimiter == nil {
		return Result{}, errors.New("sim: Run: newLimiter is nil")
	}
	shards := max(cfg.Shards, 1)
	limiters := make([]Allower, shards)
	for i := range limiters {
		if limiters[i] = newLimiter(i); limiters[i] == nil {
			return Result{}, fmt.Errorf("sim: Run: newLimiter(%d) returned nil", i)
		}
	}
	res := Result{Seconds: cfg.Seconds}
	if cfg.Rate == 0 {
		return res, nil
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed003))
	end := float64(cfg.Seconds)
	for at := rng.ExpFloat64() / cfg.Rate; at < end; at += rng.ExpFloat64() / cfg.Rate {
		// Arrivals fall on whole nanoseconds of the fake clock.
		t := epoch.Add(time.Duration(at * 1e9))
		lim := limiters[rng.IntN(shards)]
		res.Requests++
		for attempt := 0; attempt <= cfg.Retries; attempt++ {
			res.Attempts++
			if lim.AllowN(t, 1) {
				break
			}
			res.Rejected++
			if attempt == 0 {
				res.FirstRejected++
			}
		}
	}
	return res, nil
}

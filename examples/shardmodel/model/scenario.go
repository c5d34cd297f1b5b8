package model

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalid matches, with errors.Is, every error this package returns for
// bad input: the message says which value and why.
var ErrInvalid = errors.New("model: invalid input")

// ErrUnreachable is returned by the inverses when no value in the searched
// range meets the target.
var ErrUnreachable = errors.New("model: target unreachable")

// Bounds on a Scenario, so that every count fits an int and every search ends.
const (
	MaxLimit   = 1 << 40
	MaxShards  = 1 << 20
	MaxRetries = 100
)

// Scenario is one question to the model: this traffic, this limit, split over
// this many pods, with clients that retry this often.
//
// The model is seed 003's: requests arrive as a Poisson stream; a load
// balancer spreads them uniformly at random over Shards pods, so each pod sees
// an independent Poisson stream of Rate/Shards; each pod runs its own limiter
// without coordination, a window that admits Border() requests per second;
// a rejected request is retried at once, on the same pod, Retries times.
type Scenario struct {
	// Rate is λ, the mean number of original requests per second over the
	// whole fleet, retries not included. The seed's value is
	// 129.01 + 7.27/2: the successes plus the rejected requests once.
	Rate float64
	// Limit is the fleet's limit in requests per second (the seed's 150).
	Limit int
	// Shards is the number of pods that each hold a share of Limit; 0 means 1.
	Shards int
	// Retries is how many times a client retries a rejected request; the
	// seed's retry_num is Retries+1.
	Retries int
}

// shards returns the shard count with the zero value read as 1.
func (s Scenario) shards() int {
	if s.Shards == 0 {
		return 1
	}
	return s.Shards
}

// Border returns the requests one shard admits per second: int(Limit/Shards)+1,
// the seed's border_one_limiter. The seed counts a window as full only past
// its share, so a single limiter of 150 has border 151 and six shards of 25
// have border 26.
func (s Scenario) Border() int { return s.Limit/s.shards() + 1 }

// Validate reports the first field of s that is out of range.
func (s Scenario) Validate() error {
	switch {
	case math.IsNaN(s.Rate) || s.Rate < 0 || s.Rate > MaxLambda:
		return fmt.Errorf("%w: Scenario.Rate = %v: must be between 0 and %g requests per second", ErrInvalid, s.Rate, float64(MaxLambda))
	case s.Limit < 0 || s.Limit > MaxLimit:
		return fmt.Errorf("%w: Scenario.Limit = %d: must be between 0 and %d", ErrInvalid, s.Limit, MaxLimit)
	case s.Shards < 0 || s.Shards > MaxShards:
		return fmt.Errorf("%w: Scenario.Shards = %d: must be between 1 and %d (0 means 1)", ErrInvalid, s.Shards, MaxShards)
	case s.Retries < 0 || s.Retries > MaxRetries:
		return fmt.Errorf("%w: Scenario.Retries = %d: must be between 0 and %d", ErrInvalid, s.Retries, MaxRetries)
	}
	return nil
}

// Prediction is the model's answer for one Scenario.
type Prediction struct {
	Scenario
	// ShardRate is the mean requests per second one shard sees, Rate/Shards.
	ShardRate float64
	// Border is Scenario.Border(): the requests one shard admits per second.
	Border int
	// PAtLeast is P(X ≥ Border) for one shard in one second: how often a
	// shard's window fills up (the seed's 11.27% for the single limiter).
	PAtLeast float64
	// MeanAtLeast is E[X | X ≥ Border] for one shard (the seed's 156.4).
	MeanAtLeast float64
	// ShardExcess is E[(X − Border)⁺]: first-attempt rejections per second
	// of one shard.
	ShardExcess float64
	// Rejected is the expected 429s per second over the fleet, retries
	// included: ShardExcess·Shards·(Retries+1). An immediate retry on the
	// same pod finds the window still full, so each rejected request is
	// rejected Retries+1 times (the seed's multiplication by retry_num).
	Rejected float64
	// Fraction is Rejected/Rate: 429s per original request (0 if Rate is 0).
	Fraction float64
}

// Predict returns the model's prediction for s, or an error if s is invalid.
func Predict(s Scenario) (Prediction, error) {
	if err := s.Validate(); err != nil {
		return Prediction{}, err
	}
	s.Shards = s.shards()
	shard, _ := NewPoisson(s.Rate / float64(s.Shards)) // cannot fail: 0 ≤ Rate/Shards ≤ Rate
	b := s.Border()
	pr := Prediction{
		Scenario:    s,
		ShardRate:   shard.Lambda(),
		Border:      b,
		PAtLeast:    shard.AtLeast(b),
		MeanAtLeast: shard.MeanAtLeast(b),
		ShardExcess: shard.Excess(b),
	}
	pr.Rejected = pr.ShardExcess * float64(s.Shards) * float64(s.Retries+1)
	if s.Rate > 0 {
		pr.Fraction = pr.Rejected / s.Rate
	}
	return pr, nil
}

// MinLimit returns the smallest fleet limit that keeps the predicted 429s at
// or below maxRejected per second for s's Rate, Shards and Retries (s.Limit is
// ignored). Predicted rejections never grow with the limit, so the answer is
// found by bisection. It returns ErrUnreachable if even MaxLimit is not
// enough or if maxRejected is 0 while Rate is not (no finite limit is), and an error wrapping ErrInvalid for bad input.
func MinLimit(s Scenario, maxRejected float64) (int, error) {
	s.Limit = 0
	if err := s.Validate(); err != nil {
		return 0, err
	}
	if math.IsNaN(maxRejected) || maxRejected < 0 {
		return 0, fmt.Errorf("%w: target of %v rejections per second: must be at least 0", ErrInvalid, maxRejected)
	}
	if maxRejected == 0 && s.Rate > 0 {
		// A Poisson count is unbounded: every finite limit rejects some.
		return 0, fmt.Errorf("%w: no finite limit rejects nothing at %g requests per second", ErrUnreachable, s.Rate)
	}
	ok := func(limit int) bool {
		s.Limit = limit
		pr, _ := Predict(s)
		return pr.Rejected <= maxRejected
	}
	if ok(0) {
		return 0, nil
	}
	hi := 1
	for !ok(hi) {
		if hi == MaxLimit {
			return 0, fmt.Errorf("%w: no limit up to %d keeps rejections at or below %g/s", ErrUnreachable, MaxLimit, maxRejected)
		}
		hi = min(2*hi, MaxLimit)
	}
	lo := hi / 2 // ok(lo) is false (lo = 0 was checked, else lo failed above)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

// MaxShardCount returns the largest n ≤ upTo such that splitting s.Limit over
// every shard count from 1 to n keeps the predicted 429s at or below
// maxRejected per second (s.Shards is ignored): how far the fleet can scale
// out without coordinating its limiters.
//
// With a fleet limit split into shares, the smallest shard count that meets a
// target is always 1 when any is, so the useful inverse is the largest one.
// Rejections are not monotone in the shard count (each share is rounded down
// and gets +1, and past Limit shards every pod admits one request a second),
// so every count up to n is checked. It returns ErrUnreachable if even one
// shard misses the target.
func MaxShardCount(s Scenario, maxRejected float64, upTo int) (int, error) {
	s.Shards = 1
	if err := s.Validate(); err != nil {
		return 0, err
	}
	if math.IsNaN(maxRejected) || maxRejected < 0 {
		return 0, fmt.Errorf("%w: target of %v rejections per second: must be at least 0", ErrInvalid, maxRejected)
	}
	if upTo < 1 || upTo > MaxShards {
		return 0, fmt.Errorf("%w: shard count bound %d: must be between 1 and %d", ErrInvalid, upTo, MaxShards)
	}
	n := 0
	for ; n < upTo; n++ {
		s.Shards = n + 1
		if pr, _ := Predict(s); pr.Rejected > maxRejected {
			break
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: a single limiter of %d already rejects more than %g/s", ErrUnreachable, s.Limit, maxRejected)
	}
	return n, nil
}

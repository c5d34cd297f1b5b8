// Package model predicts the 429s a rate limiter sharded across pods throws
// under Poisson traffic, after seed 003: steady rejections at 129 requests per
// second under a limit of 150, explained by the Poisson spread of the
// per-second count, by retries, and by six pods each holding a sixth of the
// limit without coordination.
//
// The building block is Poisson: P(X ≥ k), E[X | X ≥ k] and E[(X − k)⁺] for
// λ up to MaxLambda, computed in log space with stable tail recurrences.
// Predict turns a Scenario (traffic, limit, shards, retries) into expected
// rejections per second; MinLimit and MaxShardCount invert it.
//
// The model describes a fixed one-second window per pod that admits Border()
// requests: a window admitting c requests rejects exactly (X − c)⁺ of the X
// that arrive. A token bucket refills continuously and carries unused tokens
// up to its burst, so it rejects at a different rate; package sim measures
// both on the same arrivals.
package model

package model

import (
	"fmt"
	"math"
)

// MaxLambda is the largest mean NewPoisson accepts. Every quantity stays
// accurate to about 1e-12 relative up to it; the tail sums take O(√λ) steps,
// about 3·10^5 at this bound.
const MaxLambda = 1e9

// Poisson is the distribution of the number of requests that arrive in one
// second when requests arrive independently at mean rate λ per second.
//
// All methods work in log space and sum the tails outward from the border
// with a decreasing-term recurrence, so nothing overflows or underflows to a
// wrong answer for λ up to MaxLambda: a tail too small for a float64 is 0, and
// E[X | X ≥ k] is computed as a ratio that stays finite even then.
//
// The zero Poisson has λ = 0. A Poisson is a plain value, safe for
// concurrent use.
type Poisson struct {
	lambda float64
}

// NewPoisson returns the Poisson distribution with mean lambda. It returns an
// error when lambda is NaN, negative or larger than MaxLambda.
func NewPoisson(lambda float64) (Poisson, error) {
	if math.IsNaN(lambda) || lambda < 0 || lambda > MaxLambda {
		return Poisson{}, fmt.Errorf("%w: Poisson mean λ = %v: must be between 0 and %g", ErrInvalid, lambda, float64(MaxLambda))
	}
	return Poisson{lambda: lambda}, nil
}

// Lambda returns the mean λ.
func (p Poisson) Lambda() float64 { return p.lambda }

// PMF returns P(X = k).
func (p Poisson) PMF(k int) float64 {
	if k < 0 {
		return 0
	}
	return math.Exp(p.logPMF(k))
}

// AtLeast returns P(X ≥ k): the probability that at least k requests arrive
// in one second. It is the seed's get_prob_at_least(k, λ).
func (p Poisson) AtLeast(k int) float64 {
	switch {
	case k <= 0:
		return 1
	case p.lambda == 0:
		return 0
	case float64(k) >= p.lambda:
		lp, s0, _ := p.upper(k)
		return math.Exp(lp) * s0
	default:
		lp, t0, _ := p.lower(k)
		return 1 - math.Exp(lp)*t0
	}
}

// Excess returns E[(X − k)⁺], the expected number of requests beyond the
// first k in one second. It is what a fixed one-second window that admits k
// requests rejects per second on average, and equals the seed's
// get_expected_errors_num(λ, k) = (E[X | X ≥ k] − k)·P(X ≥ k).
func (p Poisson) Excess(k int) float64 {
	switch {
	case k <= 0:
		return p.lambda - float64(k)
	case p.lambda == 0:
		return 0
	case float64(k) >= p.lambda:
		lp, _, s1 := p.upper(k)
		return math.Exp(lp) * s1
	default:
		// E[(X−k)⁺] = E[X−k] + E[(k−X)⁺]; both terms are non-negative here.
		lp, _, t1 := p.lower(k)
		return p.lambda - float64(k) + math.Exp(lp)*t1
	}
}

// MeanAtLeast returns E[X | X ≥ k], the seed's
// get_expectation_via_conditional_at_least(k, λ). It stays finite where
// P(X ≥ k) underflows. For λ = 0 and k ≥ 1 the condition has probability 0;
// MeanAtLeast then returns k, the limit as λ → 0.
func (p Poisson) MeanAtLeast(k int) float64 {
	switch {
	case k <= 0:
		return p.lambda
	case p.lambda == 0:
		return float64(k)
	case float64(k) >= p.lambda:
		_, s0, s1 := p.upper(k)
		return float64(k) + s1/s0
	default:
		return float64(k) + p.Excess(k)/p.AtLeast(k)
	}
}

// tailEps is the relative size below which the rest of a tail sum is dropped.
const tailEps = 1e-17

// upper sums the upper tail from k ≥ λ: with t_j = P(X = k+j)/P(X = k) it
// returns log P(X = k), S0 = Σ t_j and S1 = Σ j·t_j. The ratio
// t_{j+1}/t_j = λ/(k+j+1) is below 1 and falls with j, so the terms decrease
// and the rest after t_j is bounded by a geometric series.
func (p Poisson) upper(k int) (logp, s0, s1 float64) {
	lambda, kf := p.lambda, float64(k)
	t := 1.0
	for j := 0.0; ; j++ {
		s0 += t
		s1 += j * t
		rho := lambda / (kf + j + 1)
		// Σ_{i≥1} t·ρ^i and Σ_{i≥1} (j+i)·t·ρ^i bound what is left.
		g := rho / (1 - rho)
		if t*g <= tailEps*s0 && t*(j*g+g/(1-rho)) <= tailEps*s1 {
			break
		}
		t *= rho
		if t == 0 {
			break
		}
	}
	return p.logPMF(k), s0, s1
}

// lower sums the lower tail below k < λ from m = k−1 down: with
// t_j = P(X = m−j)/P(X = m) it returns log P(X = m), T0 = Σ t_j
// = P(X ≤ m)/P(X = m) and T1 = Σ (j+1)·t_j = E[(k−X)⁺]/P(X = m). The ratio
// t_{j+1}/t_j = (m−j)/λ is below 1 and falls with j.
func (p Poisson) lower(k int) (logp, t0, t1 float64) {
	lambda, m := p.lambda, k-1
	t := 1.0
	for j := 0; ; j++ {
		jf := float64(j)
		t0 += t
		t1 += (jf + 1) * t
		if j == m {
			break
		}
		rho := float64(m-j) / lambda
		g := rho / (1 - rho)
		if t*g <= tailEps*t0 && t*((jf+1)*g+g/(1-rho)) <= tailEps*t1 {
			break
		}
		t *= rho
		if t == 0 {
			break
		}
	}
	return p.logPMF(m), t0, t1
}

// logPMF returns log P(X = k) for k ≥ 0 without the cancellation of
// k·log λ − λ − log k!, whose terms reach 10^10 at large λ. It uses
// Loader's form: log P(X = k) = −λ·D(k/λ) − ½·log(2πk) − δ(k), where
// D(x) = x·log x − x + 1 (computed with log1p) and δ is the Stirling error.
func (p Poisson) logPMF(k int) float64 {
	lambda, kf := p.lambda, float64(k)
	switch {
	case lambda == 0 && k == 0:
		return 0
	case lambda == 0:
		return math.Inf(-1)
	case k == 0:
		return -lambda
	}
	// λ·D(k/λ) = k·log(k/λ) − k + λ; with u = (k−λ)/λ it is k·log1p(u) − (k−λ).
	var bd0 float64
	if d := kf - lambda; math.Abs(d) < 0.1*lambda {
		bd0 = kf*math.Log1p(d/lambda) - d
	} else {
		bd0 = kf*math.Log(kf/lambda) - d
	}
	return -bd0 - 0.5*math.Log(2*math.Pi*kf) - stirlingError(kf)
}

// stirlingError returns δ(n) = log n! − (n·log n − n + ½·log(2πn)).
func stirlingError(n float64) float64 {
	if n < 16 {
		lg, _ := math.Lgamma(n + 1)
		return lg - (n*math.Log(n) - n + 0.5*math.Log(2*math.Pi*n))
	}
	n2 := n * n
	return (1.0/12 - (1.0/360-(1.0/1260-1.0/(1680*n2))/n2)/n2) / n
}

package model

import (
	"errors"
	"math"
	"testing"
)

func mustPoisson(t testing.TB, lambda float64) Poisson {
	t.Helper()
	p, err := NewPoisson(lambda)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func closeRel(got, want, rel float64) bool {
	return math.Abs(got-want) <= rel*math.Abs(want)
}

// The seed's figures, from its own definitions.
func TestSeedFigures(t *testing.T) {
	p := mustPoisson(t, 129.01+7.27)
	// The seed prints 0.1127 (11.27%), truncated; the value is 0.112787.
	if got := p.AtLeast(151); math.Abs(got-0.11279) > 5e-6 {
		t.Errorf("P(X ≥ 151 | λ = 136.28) = %.6f, want 0.11279", got)
	}
	if got := p.MeanAtLeast(151); math.Abs(got-156.4) > 0.05 {
		t.Errorf("E[X | X ≥ 151] = %.4f, want ≈ 156.4", got)
	}
	if got := p.Excess(151); math.Abs(got-0.61) > 0.005 {
		t.Errorf("rejections/s of the single limiter = %.4f, want ≈ 0.61", got)
	}
	pr, err := Predict(Scenario{Rate: 129.01 + 7.27/2, Limit: 150, Shards: 6, Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Border != 26 || math.Abs(pr.ShardRate-22.1075) > 1e-9 {
		t.Errorf("six shards: border %d, shard rate %v; want 26 and 22.1075", pr.Border, pr.ShardRate)
	}
	if math.Abs(pr.Rejected-6.85) > 0.005 {
		t.Errorf("six shards of 25/s, two attempts: %.4f rejections/s, want ≈ 6.85", pr.Rejected)
	}
}

// refTail is an independent oracle for moderate λ (≤ 700, where e^−λ is a
// normal float64): the PMF by the forward product recurrence from P(X = 0),
// and the upper tail summed directly, never as 1 − (lower sum).
func refTail(lambda float64, k int) (atLeast, excess float64) {
	pmf := math.Exp(-lambda)
	end := int(lambda+60*math.Sqrt(lambda)) + 200
	for x := 0; x <= end; x++ {
		if x > 0 {
			pmf *= lambda / float64(x)
		}
		if x >= k {
			atLeast += pmf
			excess += float64(x-k) * pmf
		}
	}
	return atLeast, excess
}

func TestAgainstDirectSums(t *testing.T) {
	for _, lambda := range []float64{0.05, 1, 3.5, 22.1075, 136.28, 600} {
		p := mustPoisson(t, lambda)
		sd := math.Sqrt(lambda)
		for k := 0; float64(k) < lambda+12*sd+10; k++ {
			wantP, wantE := refTail(lambda, k)
			gotP, gotE := p.AtLeast(k), p.Excess(k)
			// Both sides are sums of positive terms with ~1e-16 error per
			// operation over at most a few thousand terms; 1e-12 relative
			// leaves a wide margin and still catches any off-by-one in k
			// (which changes the value by P(X = k), far above 1e-12).
			if !closeRel(gotP, wantP, 1e-12) || !closeRel(gotE, wantE, 1e-12) {
				t.Errorf("λ=%v k=%d: P(X≥k)=%v Excess=%v, want %v and %v", lambda, k, gotP, gotE, wantP, wantE)
			}
			if wantP > 1e-290 {
				if got, want := p.MeanAtLeast(k), float64(k)+wantE/wantP; !closeRel(got, want, 1e-12) {
					t.Errorf("λ=%v k=%d: E[X|X≥k]=%v, want %v", lambda, k, got, want)
				}
			}
		}
	}
}

// At large λ there is no direct oracle, so check the identities that tie
// consecutive borders together; each side is computed by a different branch
// (upper or lower tail) when k straddles λ.
func TestIdentitiesLargeLambda(t *testing.T) {
	for _, lambda := range []float64{1e3, 12345.6, 1e6, 1e9} {
		p := mustPoisson(t, lambda)
		sd := math.Sqrt(lambda)
		for _, z := range []float64{-8, -3, -1, -0.3, 0, 0.2, 1, 2.5, 6} {
			k := int(lambda + z*sd)
			// Each tail is a sum of up to ~10√λ terms built by repeated
			// multiplication, so its rounding error grows like √λ·ε; the
			// differences below cancel the leading digits of two such sums.
			// Allow 1e-15·√λ absolute (1e-12 at λ = 10^6) on top of 1e-9
			// relative; an off-by-one in k would be off by a whole P(X = k).
			tol := 1e-15 * sd
			pk, pk1 := p.AtLeast(k), p.AtLeast(k+1)
			if got, want := pk-pk1, p.PMF(k); math.Abs(got-want) > 1e-9*want+tol {
				t.Errorf("λ=%g k=%d: P(X≥k)−P(X≥k+1) = %v, want P(X=k) = %v", lambda, k, got, want)
			}
			ek, ek1 := p.Excess(k), p.Excess(k+1)
			if got := ek - ek1; math.Abs(got-pk1) > 1e-9*pk1+tol*max(1, ek) {
				t.Errorf("λ=%g k=%d: Excess(k)−Excess(k+1) = %v, want P(X≥k+1) = %v", lambda, k, got, pk1)
			}
			if got, want := (p.MeanAtLeast(k)-float64(k))*pk, ek; !closeRel(got, want, 1e-9) {
				t.Errorf("λ=%g k=%d: (E[X|X≥k]−k)·P(X≥k) = %v, want Excess = %v", lambda, k, got, want)
			}
			for _, v := range []float64{pk, ek, p.MeanAtLeast(k)} {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("λ=%g k=%d: non-finite result", lambda, k)
				}
			}
		}
	}
}

// At λ = 10^6 the Poisson is close to a normal of mean λ and standard
// deviation σ = 1000. With the first Edgeworth (skewness) term,
//
//	P(X ≥ k)  ≈ 1 − Φ(z′) + φ(z′)·(z′² − 1)/(6σ),  z′ = (k − ½ − λ)/σ,
//	E[(X−k)⁺] ≈ σ·(φ(z) − z·(1 − Φ(z))) + z·φ(z)/6,  z = (k − λ)/σ
//
// (the second is the first summed over j > k by the midpoint rule: the
// normal loss function plus ∫(w²−1)φ(w)dw = zφ(z) from the skewness term).
// The terms left out are O(1/λ) = 1e-6 for the probability and O(1/λ)·σ =
// 1e-3 for the excess, with small constants: the gaps measured were 1.4e-8
// and 3.3e-5, and the bounds below sit between the two. Without the
// skewness terms the gaps would be 7e-5 and 0.04, so the test does see
// whether the model gets the tail's asymmetry right.
func TestNormalApproximationMillion(t *testing.T) {
	const lambda = 1e6
	p := mustPoisson(t, lambda)
	sd := math.Sqrt(lambda)
	phi := func(z float64) float64 { return math.Exp(-z*z/2) / math.Sqrt(2*math.Pi) }
	upper := func(z float64) float64 { return 0.5 * math.Erfc(z/math.Sqrt2) }
	for _, z := range []float64{-4, -2, -1, -0.5, 0, 0.5, 1, 2, 3, 4, 5} {
		k := int(lambda + z*sd)
		zc := (float64(k) - 0.5 - lambda) / sd
		wantP := upper(zc) + phi(zc)*(zc*zc-1)/(6*sd)
		if got := p.AtLeast(k); math.Abs(got-wantP) > 5e-7 {
			t.Errorf("z=%v: P(X≥%d) = %v, Edgeworth %v", z, k, got, wantP)
		}
		zk := (float64(k) - lambda) / sd
		wantE := sd*(phi(zk)-zk*upper(zk)) + zk*phi(zk)/6
		if got := p.Excess(k); math.Abs(got-wantE) > 5e-4 {
			t.Errorf("z=%v: E[(X−%d)⁺] = %v, Edgeworth %v", z, k, got, wantE)
		}
	}
}

// Where P(X ≥ k) underflows, E[X | X ≥ k] must still be finite and right:
// far in the tail, X given X ≥ k is k plus a nearly geometric overshoot with
// ratio ρ = λ/(k+1), mean about ρ/(1−ρ).
func TestFarTail(t *testing.T) {
	p := mustPoisson(t, 1)
	if got := p.AtLeast(1000); got != 0 {
		t.Errorf("P(X≥1000 | λ=1) = %v, want 0 (underflow)", got)
	}
	got := p.MeanAtLeast(1000)
	rho := 1.0 / 1001
	if want := 1000 + rho/(1-rho); math.Abs(got-want) > 1e-5 {
		t.Errorf("E[X | X≥1000, λ=1] = %v, want ≈ %v", got, want)
	}
	big := mustPoisson(t, 1e6)
	if got := big.MeanAtLeast(2e6); math.IsNaN(got) || got < 2e6 || got > 2e6+2 {
		t.Errorf("E[X | X≥2e6, λ=1e6] = %v, want just above 2e6", got)
	}
	if got := big.AtLeast(1); got != 1 {
		t.Errorf("P(X≥1 | λ=1e6) = %v, want 1", got)
	}
	if got, want := big.Excess(10), 1e6-10; got != want {
		t.Errorf("E[(X−10)⁺ | λ=1e6] = %v, want %v", got, want)
	}
}

func TestEdgeCases(t *testing.T) {
	var zero Poisson
	if zero.AtLeast(0) != 1 || zero.AtLeast(1) != 0 || zero.Excess(3) != 0 || zero.MeanAtLeast(3) != 3 || zero.PMF(0) != 1 {
		t.Errorf("λ=0: AtLeast(0)=%v AtLeast(1)=%v Excess(3)=%v MeanAtLeast(3)=%v PMF(0)=%v",
			zero.AtLeast(0), zero.AtLeast(1), zero.Excess(3), zero.MeanAtLeast(3), zero.PMF(0))
	}
	p := mustPoisson(t, 4)
	if p.AtLeast(-5) != 1 || p.Excess(-2) != 6 || p.MeanAtLeast(-1) != 4 || p.PMF(-1) != 0 {
		t.Error("negative borders: want P=1, Excess=λ−k, mean λ, PMF 0")
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1), 2 * MaxLambda} {
		if _, err := NewPoisson(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewPoisson(%v): err %v, want ErrInvalid", bad, err)
		}
	}
}

// FuzzPoisson checks, for any mean and border, that the results are finite,
// in range, and consistent with each other.
func FuzzPoisson(f *testing.F) {
	f.Add(136.28, 151)
	f.Add(22.1075, 26)
	f.Add(1e6, 1000000)
	f.Add(0.0, 1)
	f.Add(1e-300, 2)
	f.Add(5e8, 1<<40)
	f.Add(3.0, -7)
	f.Fuzz(func(t *testing.T, lambda float64, k int) {
		p, err := NewPoisson(lambda)
		if err != nil {
			return
		}
		pk, ek, mk := p.AtLeast(k), p.Excess(k), p.MeanAtLeast(k)
		if !(pk >= 0 && pk <= 1) {
			t.Fatalf("λ=%v k=%d: P(X≥k) = %v outside [0,1]", lambda, k, pk)
		}
		if !(ek >= 0) || math.IsInf(ek, 0) {
			t.Fatalf("λ=%v k=%d: Excess = %v", lambda, k, ek)
		}
		// Jensen: E[(X−k)⁺] ≥ (λ−k)⁺; and E[(X−k)⁺] ≤ E[(X−k)⁺ at k−1].
		if floor := lambda - float64(k); ek < floor*(1-1e-12) {
			t.Fatalf("λ=%v k=%d: Excess %v below λ−k = %v", lambda, k, ek, floor)
		}
		if !(mk >= float64(min(k, 0))) || math.IsInf(mk, 0) || (k > 0 && mk < float64(k)) {
			t.Fatalf("λ=%v k=%d: E[X|X≥k] = %v", lambda, k, mk)
		}
		if k > math.MinInt && k < math.MaxInt {
			if pk1 := p.AtLeast(k + 1); pk1 > pk*(1+1e-12) {
				t.Fatalf("λ=%v k=%d: P(X≥k+1) = %v > P(X≥k) = %v", lambda, k, pk1, pk)
			}
		}
	})
}

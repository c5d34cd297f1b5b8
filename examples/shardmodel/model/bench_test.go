package model

import (
	"math"
	"testing"
)

// seedAtLeast is the seed's get_prob_at_least, transcribed: the peer the
// log-space tail is measured against. It overflows past λ ≈ 700.
func seedAtLeast(border int, lambda float64) float64 {
	sum, mult := 1.0, 1.0
	for i := 1; i < border; i++ {
		mult = mult * lambda / float64(i)
		sum += mult
	}
	return 1 - sum*math.Exp(-lambda)
}

// The transcription agrees with AtLeast where the seed's method works (its
// 1 − sum loses digits in the far tail, hence the absolute bound).
func TestSeedTranscription(t *testing.T) {
	p := mustPoisson(t, 136.28)
	for k := 100; k < 200; k++ {
		if got, want := seedAtLeast(k, 136.28), p.AtLeast(k); math.Abs(got-want) > 1e-13 {
			t.Errorf("k=%d: seed %v, model %v", k, got, want)
		}
	}
	if got := seedAtLeast(1000, 1000); !math.IsNaN(got) && got > 0 && got < 1 {
		// e^−1000 underflows to 0 and λ^i/i! overflows: the seed's
		// method cannot answer at this size, which is why AtLeast exists.
		t.Errorf("seed method at λ=1000 gave a plausible %v; expected a broken value", got)
	}
}

var sink float64

func BenchmarkAtLeast(b *testing.B) {
	for _, bc := range []struct {
		name   string
		lambda float64
		k      int
	}{
		{"seed/λ=136.28", 136.28, 151},
		{"shard/λ=22.1", 22.1075, 26},
		{"λ=1e6", 1e6, 1001000},
	} {
		p, _ := NewPoisson(bc.lambda)
		b.Run("model/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = p.AtLeast(bc.k)
			}
		})
		if bc.lambda < 700 {
			b.Run("seedpython/"+bc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					sink = seedAtLeast(bc.k, bc.lambda)
				}
			})
		}
	}
}

func BenchmarkPredict(b *testing.B) {
	s := Scenario{Rate: 129.01 + 7.27/2, Limit: 150, Shards: 6, Retries: 1}
	b.ReportAllocs()
	for b.Loop() {
		pr, _ := Predict(s)
		sink = pr.Rejected
	}
}

// Predict allocates nothing, so sweeping it over a grid is cheap.
func TestPredictAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("coverage and -race change allocation counts")
	}
	s := Scenario{Rate: 129.01 + 7.27/2, Limit: 150, Shards: 6, Retries: 1}
	if n := testing.AllocsPerRun(100, func() { pr, _ := Predict(s); sink = pr.Rejected }); n != 0 {
		t.Errorf("Predict allocates %v times per call, want 0", n)
	}
}

package compare

import (
	"math"
	"math/rand/v2"
	"testing"
)

// lognormal draws n response times (ns) around median med with log-sd s,
// plus shift, from a seeded generator.
func lognormal(rng *rand.Rand, n int, med, s float64, shift int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(med*math.Exp(s*rng.NormFloat64())) + shift
	}
	return out
}

func TestMannWhitneyByHand(t *testing.T) {
	// No ties: U_B = 9 of 9 pairs, mean 4.5, var 3*3/12*7 = 5.25,
	// z = (4.5 - 0.5)/sqrt(5.25): p = 0.0809.
	r := MannWhitney([]int64{1, 2, 3}, []int64{4, 5, 6})
	if r.U != 9 || r.PSuperior != 1 || math.Abs(r.P-0.08086) > 1e-4 {
		t.Errorf("no ties: %+v, want U 9, p 0.0809", r)
	}
	// Three pairs of ties: ranks 1.5 1.5 3.5 | 3.5 5.5 5.5, U_B = 14.5-6
	// = 8.5; var = 0.75*(7 - 18/30) = 4.8: p = 0.1102 (without the tie
	// correction it would be 0.1266).
	r = MannWhitney([]int64{1, 1, 2}, []int64{2, 3, 3})
	if r.U != 8.5 || math.Abs(r.P-0.11016) > 1e-4 {
		t.Errorf("ties: %+v, want U 8.5, p 0.1102", r)
	}
	// All tied: no evidence of anything.
	r = MannWhitney([]int64{5, 5, 5, 5}, []int64{5, 5, 5})
	if r.P != 1 || r.PSuperior != 0.5 {
		t.Errorf("all tied: %+v, want p 1, P(B>A) 0.5", r)
	}
	// Swapping the sides mirrors U and keeps p.
	a, b := []int64{3, 9, 1, 7, 7}, []int64{8, 2, 10, 12, 7}
	ab, ba := MannWhitney(a, b), MannWhitney(b, a)
	if ab.U+ba.U != 25 || math.Abs(ab.P-ba.P) > 1e-12 {
		t.Errorf("swap: %+v vs %+v", ab, ba)
	}
}

func TestShiftIsSignificant(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		a := lognormal(rng, 400, 100e6, 0.5, 0)
		slow := lognormal(rng, 400, 100e6, 0.5, 30e6) // +30 ms
		fast := lognormal(rng, 400, 100e6, 0.5, -30e6)
		if r := Compare(a, slow, Options{Seed: seed}); r.Verdict != Slower || r.PValue >= 0.05 || r.DeltaMedian <= 0 {
			t.Errorf("seed %d: +30 ms gave %q (p %.3g, delta %d)", seed, r.Verdict, r.PValue, r.DeltaMedian)
		}
		if r := Compare(a, fast, Options{Seed: seed}); r.Verdict != Faster {
			t.Errorf("seed %d: -30 ms gave %q (p %.3g)", seed, r.Verdict, r.PValue)
		}
	}
}

// The false-positive rate over many same-distribution pairs stays near
// alpha (binomial sd over 2000 runs at 5%: 0.5 points), continuous and
// heavily tied alike.
func TestFalsePositiveRate(t *testing.T) {
	const runs = 2000
	for _, tc := range []struct {
		name string
		draw func(*rand.Rand) int64
	}{
		{"lognormal", func(r *rand.Rand) int64 { return int64(100e6 * math.Exp(0.6*r.NormFloat64())) }},
		{"five values", func(r *rand.Rand) int64 { return int64(r.IntN(5)) * 1e6 }},
	} {
		sig := 0
		for seed := uint64(0); seed < runs; seed++ {
			rng := rand.New(rand.NewPCG(seed, 99))
			a, b := make([]int64, 60), make([]int64, 80)
			for i := range a {
				a[i] = tc.draw(rng)
			}
			for i := range b {
				b[i] = tc.draw(rng)
			}
			if MannWhitney(a, b).P < 0.05 {
				sig++
			}
		}
		rate := float64(sig) / runs
		if rate < 0.025 || rate > 0.075 {
			t.Errorf("%s: false-positive rate %.3f, want near 0.05", tc.name, rate)
		}
		t.Logf("%s: false-positive rate %.3f", tc.name, rate)
	}
}

func TestSameDistributionNoChange(t *testing.T) {
	noChange := 0
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		r := Compare(lognormal(rng, 300, 80e6, 0.5, 0), lognormal(rng, 300, 80e6, 0.5, 0), Options{Seed: seed})
		if r.Verdict == NoChange {
			noChange++
		}
	}
	// 20 runs at 5%: P(more than 4 significant) < 2%.
	if noChange < 16 {
		t.Errorf("same distribution: %d of 20 no change", noChange)
	}
}

// The 95% interval of the median difference covers the true shift in
// about 95% of runs; 100 runs, at least 85 (binomial: P < 0.1%).
func TestBootstrapCoversShift(t *testing.T) {
	const shift = 20e6
	covered, covered90 := 0, 0
	for seed := uint64(1); seed <= 100; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		a := lognormal(rng, 300, 100e6, 0.4, 0)
		b := lognormal(rng, 300, 100e6, 0.4, shift)
		r := Compare(a, b, Options{Seed: seed, Resamples: 1000})
		if r.MedianCI.Lo <= shift && shift <= r.MedianCI.Hi {
			covered++
		}
		if r.P90CI.Lo <= shift && shift <= r.P90CI.Hi {
			covered90++
		}
		if r.MedianCI.Lo > r.MedianCI.Hi {
			t.Fatalf("seed %d: interval %+v upside down", seed, r.MedianCI)
		}
	}
	if covered < 85 || covered90 < 85 {
		t.Errorf("coverage: median %d/100, p90 %d/100, want >= 85", covered, covered90)
	}
}

func TestBootstrapReproducible(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	a, b := lognormal(rng, 200, 50e6, 0.5, 0), lognormal(rng, 200, 50e6, 0.5, 5e6)
	r1, r2 := Compare(a, b, Options{Seed: 42}), Compare(a, b, Options{Seed: 42})
	if r1 != r2 {
		t.Errorf("same seed, different results: %+v vs %+v", r1, r2)
	}
	if r3 := Compare(a, b, Options{Seed: 43}); r3.MedianCI == r1.MedianCI {
		t.Errorf("another seed gave the very same interval %+v", r3.MedianCI)
	}
}

func TestTooFew(t *testing.T) {
	r := Compare([]int64{1, 2, 3}, []int64{100, 200, 300, 400}, Options{})
	if r.Verdict != TooFew || r.B.N != 4 || r.DeltaMedian != 300-2 {
		t.Errorf("tiny samples: %+v", r)
	}
	if r := Compare(nil, nil, Options{}); r.Verdict != TooFew || r.A.N != 0 {
		t.Errorf("empty: %+v", r)
	}
}

func TestQuantileContract(t *testing.T) {
	s := []int64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	// index min(floor(q n), n-1): 0.5 -> 5, 0.9 -> 9, 0.99 -> 9.
	if Quantile(s, 0.5) != 60 || Quantile(s, 0.9) != 100 || Quantile(s, 0.99) != 100 || Quantile(s, 0) != 10 {
		t.Errorf("quantiles %d %d %d", Quantile(s, 0.5), Quantile(s, 0.9), Quantile(s, 0.99))
	}
}

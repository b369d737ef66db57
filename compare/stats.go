// Package compare compares two samples of response times per class: the
// figures of each side, their differences, a bootstrap confidence
// interval of the median and p90 differences, a Mann-Whitney U test, and
// a one-line verdict. Run reads both sides from a store.
package compare

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// Verdicts, from the rank test on the two samples.
const (
	Slower   = "slower, significant"
	Faster   = "faster, significant"
	NoChange = "no significant change"
	TooFew   = "too few samples"
)

// Options of a comparison; zero values take the defaults.
type Options struct {
	Alpha      float64 // significance level of the rank test; default 0.05
	Confidence float64 // of the bootstrap intervals; default 0.95
	Resamples  int     // bootstrap resamples; default 1000, at most 10000
	MinSamples int     // fewer on either side: TooFew; default 20
	Seed       uint64  // bootstrap and sampling seed; default 1
}

func (o Options) withDefaults() Options {
	if !(o.Alpha > 0 && o.Alpha < 1) {
		o.Alpha = 0.05
	}
	if !(o.Confidence > 0 && o.Confidence < 1) {
		o.Confidence = 0.95
	}
	if o.Resamples <= 0 {
		o.Resamples = 1000
	}
	o.Resamples = min(o.Resamples, 10000)
	if o.MinSamples <= 0 {
		o.MinSamples = 20
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return o
}

// Figures describe one side's sample, in ns.
type Figures struct {
	N      int   `json:"n"`
	Median int64 `json:"median"`
	P90    int64 `json:"p90"`
	P99    int64 `json:"p99"`
}

// Interval is a confidence interval of a difference B - A, in ns.
type Interval struct {
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

// Result compares sample B with sample A. Deltas are B - A in ns; the
// relative ones are over A's figure (0 when A's is 0). PSuperior is the
// probability that a B value exceeds an A value, ties counted half: 0.5
// for no shift.
type Result struct {
	A           Figures  `json:"a"`
	B           Figures  `json:"b"`
	DeltaMedian int64    `json:"delta_median"`
	DeltaP90    int64    `json:"delta_p90"`
	DeltaP99    int64    `json:"delta_p99"`
	RelMedian   float64  `json:"rel_median"`
	RelP90      float64  `json:"rel_p90"`
	RelP99      float64  `json:"rel_p99"`
	MedianCI    Interval `json:"median_ci"`
	P90CI       Interval `json:"p90_ci"`
	PValue      float64  `json:"p_value"`
	PSuperior   float64  `json:"p_superior"`
	Verdict     string   `json:"verdict"`
}

// Quantile of sorted values: the value at index min(floor(q*n), n-1), the
// store's percentile contract, so the figures match the overview's.
func Quantile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(math.Floor(q*float64(len(sorted)))), len(sorted)-1)]
}

func figures(sorted []int64) Figures {
	return Figures{N: len(sorted), Median: Quantile(sorted, 0.5), P90: Quantile(sorted, 0.9), P99: Quantile(sorted, 0.99)}
}

func rel(d, base int64) float64 {
	if base == 0 {
		return 0
	}
	return float64(d) / float64(base)
}

// Compare compares b with a (neither is modified). The verdict rests on
// the Mann-Whitney test at opt.Alpha; its direction is the side the ranks
// lean to. The intervals are percentile bootstrap intervals, each side
// resampled on its own, reproducible for a given Seed.
func Compare(a, b []int64, opt Options) Result {
	opt = opt.withDefaults()
	sa, sb := slices.Clone(a), slices.Clone(b)
	slices.Sort(sa)
	slices.Sort(sb)
	r := Result{A: figures(sa), B: figures(sb)}
	r.DeltaMedian, r.DeltaP90, r.DeltaP99 = r.B.Median-r.A.Median, r.B.P90-r.A.P90, r.B.P99-r.A.P99
	r.RelMedian, r.RelP90, r.RelP99 = rel(r.DeltaMedian, r.A.Median), rel(r.DeltaP90, r.A.P90), rel(r.DeltaP99, r.A.P99)
	if len(sa) < opt.MinSamples || len(sb) < opt.MinSamples {
		r.PValue, r.PSuperior, r.Verdict = 1, 0.5, TooFew
		return r
	}
	mw := MannWhitney(sa, sb)
	r.PValue, r.PSuperior = mw.P, mw.PSuperior
	r.MedianCI, r.P90CI = Bootstrap(sa, sb, opt.Resamples, opt.Confidence, opt.Seed)
	switch {
	case mw.P >= opt.Alpha:
		r.Verdict = NoChange
	case mw.PSuperior > 0.5:
		r.Verdict = Slower
	default:
		r.Verdict = Faster
	}
	return r
}

// MWResult is a Mann-Whitney U test of B against A.
type MWResult struct {
	U         float64 // B's U statistic: pairs where B > A, ties half
	Z         float64 // normal approximation, continuity corrected
	P         float64 // two-sided
	PSuperior float64 // U / (nA nB)
}

// MannWhitney tests whether a and b come from one distribution, by the
// normal approximation to U with the tie correction of its variance and
// a continuity correction: exact enough from ~20 values a side, which
// Compare requires. Tied values get their mean rank; all values tied
// give P = 1.
func MannWhitney(a, b []int64) MWResult {
	na, nb := len(a), len(b)
	if na == 0 || nb == 0 {
		return MWResult{P: 1, PSuperior: 0.5}
	}
	type obs struct {
		v   int64
		inB bool
	}
	all := make([]obs, 0, na+nb)
	for _, v := range a {
		all = append(all, obs{v, false})
	}
	for _, v := range b {
		all = append(all, obs{v, true})
	}
	slices.SortFunc(all, func(x, y obs) int { return cmp.Compare(x.v, y.v) })
	n := float64(na + nb)
	var rankB, ties float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		t := float64(j - i)
		mean := float64(i+j+1) / 2 // ranks i+1 .. j
		for k := i; k < j; k++ {
			if all[k].inB {
				rankB += mean
			}
		}
		ties += t*t*t - t
		i = j
	}
	fa, fb := float64(na), float64(nb)
	u := rankB - fb*(fb+1)/2
	mu := fa * fb / 2
	v := fa * fb / 12 * ((n + 1) - ties/(n*(n-1)))
	r := MWResult{U: u, PSuperior: u / (fa * fb), P: 1}
	if v <= 0 {
		return r
	}
	d := math.Abs(u-mu) - 0.5
	if d < 0 {
		d = 0
	}
	r.Z = math.Copysign(d/math.Sqrt(v), u-mu)
	r.P = math.Min(1, math.Erfc(math.Abs(r.Z)/math.Sqrt2))
	return r
}

// Bootstrap gives percentile intervals, at level conf, of the median and
// p90 differences B - A, from n resamples of each sorted side. A resample
// draws len indices with replacement and counts them per index, so its
// quantiles are read by walking the counts: O(len) per resample, no sort.
func Bootstrap(sortedA, sortedB []int64, n int, conf float64, seed uint64) (median, p90 Interval) {
	if len(sortedA) == 0 || len(sortedB) == 0 || n <= 0 {
		return
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	dm, d9 := make([]float64, n), make([]float64, n)
	ca, cb := make([]int32, len(sortedA)), make([]int32, len(sortedB))
	for i := 0; i < n; i++ {
		ma, pa := resampleQuantiles(rng, sortedA, ca)
		mb, pb := resampleQuantiles(rng, sortedB, cb)
		dm[i], d9[i] = float64(mb-ma), float64(pb-pa)
	}
	return interval(dm, conf), interval(d9, conf)
}

// resampleQuantiles draws len(sorted) values with replacement and returns
// their median and p90 (the Quantile contract); counts is scratch space.
func resampleQuantiles(rng *rand.Rand, sorted []int64, counts []int32) (median, p90 int64) {
	clear(counts)
	m := len(sorted)
	for range m {
		counts[rng.IntN(m)]++
	}
	im, i9 := min(m/2, m-1), min(int(math.Floor(0.9*float64(m))), m-1)
	seen := 0
	found := false
	for i, c := range counts {
		seen += int(c)
		if !found && seen > im {
			median, found = sorted[i], true
		}
		if seen > i9 {
			return median, sorted[i]
		}
	}
	return median, sorted[m-1]
}

func interval(d []float64, conf float64) Interval {
	slices.Sort(d)
	lo := (1 - conf) / 2
	at := func(q float64) float64 { return d[min(int(math.Floor(q*float64(len(d)))), len(d)-1)] }
	return Interval{Lo: at(lo), Hi: at(1 - lo)}
}

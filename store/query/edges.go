package query

import "math"

// LogEdges returns n+1 log-spaced integer bucket edges from lo to hi (ns),
// preceded by 0 so that values below lo have a bucket of their own. Edges
// are computed once in Go and passed to the engines as integers.
func LogEdges(lo, hi int64, n int) []int64 {
	if lo < 1 {
		lo = 1
	}
	out := []int64{0}
	r := math.Pow(float64(hi)/float64(lo), 1/float64(n))
	for i := 0; i <= n; i++ {
		e := int64(math.Round(float64(lo) * math.Pow(r, float64(i))))
		if e > out[len(out)-1] {
			out = append(out, e)
		}
	}
	return out
}

// LinearEdges returns edges 0, step, 2*step, ... n*step.
func LinearEdges(step int64, n int) []int64 {
	out := make([]int64, n+1)
	for i := range out {
		out[i] = int64(i) * step
	}
	return out
}

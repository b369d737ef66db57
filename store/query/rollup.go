package query

import (
	"math"
	"sort"
	"time"
)

// Summary answers from per-minute rollups whose histograms share one grid
// of fine buckets; its percentiles are on that grid, so their precision is
// part of what a Querier promises, not an engine detail.

// RollupEdges are the rollups' histogram buckets: 160 per decade from 1 µs
// to 10^4 s. Every 8th edge from 1 ms is LogEdges(1ms, 100s, 100)'s, so the
// overview's histogram is exact from rollups (TestOverviewEdgesOnRollupGrid).
var RollupEdges = LogEdges(int64(time.Microsecond), 1e13, 1600)

// RollupRelError bounds a rollup percentile's relative error for values of
// at least 1 µs: half a bucket, geometrically (0.72%), plus the rounding of
// the integer edges near 1 µs: 0.76%.
var RollupRelError = func() float64 {
	worst := 0.0
	for b := 1; b < len(RollupEdges)-1; b++ {
		lo, hi := RollupEdges[b], RollupEdges[b+1]-1 // integer values of bucket b
		est := float64(RollupEstimate(b, 0, math.MaxInt64))
		worst = max(worst, (est-float64(lo))/float64(lo), (float64(hi)-est)/float64(hi))
	}
	return worst
}()

// RollupBucket is the RollupEdges bucket of v (bucket 0 also takes v < 0).
func RollupBucket(v int64) int {
	return max(sort.Search(len(RollupEdges), func(i int) bool { return RollupEdges[i] > v })-1, 0)
}

// RollupEstimate is the value a rollup percentile reports for bucket b of
// a group whose values lie in [lo, hi].
func RollupEstimate(b int, lo, hi int64) int64 {
	var v int64
	switch {
	case b <= 0:
		v = RollupEdges[1] / 2
	case b >= len(RollupEdges)-1:
		v = hi
	default:
		v = int64(math.Round(math.Sqrt(float64(RollupEdges[b]) * float64(RollupEdges[b+1]))))
	}
	return min(max(v, lo), hi)
}

package whatif

import "testing"

// Without edges a distribution uses DefaultEdges rather than failing.
func TestNewDistributionDefaultEdges(t *testing.T) {
	d := NewDistribution([]int64{1e9, 2e9, 3e9}, nil)
	var n int64
	for _, c := range d.Counts {
		n += c
	}
	if n != 3 || d.N != 3 || len(d.Edges) != len(DefaultEdges) || d.P50 != 2e9 {
		t.Errorf("distribution %+v", d)
	}
}

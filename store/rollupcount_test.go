package store

import "testing"

// A histogram read after records arrived that the count query missed
// holds more than the count: the count becomes the histogram's, so no
// bucket outgrows it.
func TestRollupRowCountFromHist(t *testing.T) {
	r := &rollupRow{n: 33, hist: []bucketCount{{b: 10, c: 40}, {b: 200, c: 15}}}
	r.countFromHist()
	if r.n != 55 {
		t.Errorf("count %d, want 55 (the histogram's)", r.n)
	}
}

package storetest

import (
	"fmt"
	"math"
	"time"

	"github.com/rtmon/rtmon/store"
)

// RollupPercentileMisses lists where percentiles read from the rollups
// (got) break their contract against the exact ones of the same records:
// the same classes with the same counts, each value within RollupRelError
// of the exact one (or 1 µs). None: they keep it.
func RollupPercentileMisses(got, exact []store.ClassPercentiles, qs []float64) []string {
	if len(got) != len(exact) {
		return []string{fmt.Sprintf("%d classes, exact %d", len(got), len(exact))}
	}
	var misses []string
	for i, e := range exact {
		g := got[i]
		if g.Class != e.Class || g.Count != e.Count || len(g.Values) != len(e.Values) {
			misses = append(misses, fmt.Sprintf("class %s (%d records, %d values), exact %s (%d, %d)",
				g.Class, g.Count, len(g.Values), e.Class, e.Count, len(e.Values)))
			continue
		}
		for j, v := range g.Values {
			if d := math.Abs(float64(v - e.Values[j])); d > max(float64(time.Microsecond), store.RollupRelError*float64(e.Values[j])) {
				misses = append(misses, fmt.Sprintf("class %s: q%v %d ns, exact %d", g.Class, qs[j], v, e.Values[j]))
			}
		}
	}
	return misses
}

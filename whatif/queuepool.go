package whatif

// Pooling replays of a chaotic queue replay (Options.Members), and the
// band a queue prediction carries.

import (
	"cmp"
	"math"
	"slices"
)

// queueRun is a prediction's replays under the queue model: the first
// member's units and states, whether the rules ran the model free, and,
// when several members were pooled, each class's unit times per member.
type queueRun struct {
	units   []UnitResult
	st      []unitState
	ranFree bool
	members int
	// pooled: per class, each member's predicted unit times (nil when one
	// replay ran); times alone, so that members cost 8 bytes a unit each.
	pooled map[string][][]int64
}

// runQueue replays rules under the fitted queue: once, or o.Members
// times when the front end's copies met a modelled backlog. With those
// copies which client a freed slot goes to hangs on a millisecond, and
// one replay is one draw of many (see Options.Members): pooled, the six
// kept FAST SYN pairs' p90 errors fell from 16.9 to 10.8 points RMS
// (high class) and from 20.0 to 11.0 (low). Other replays stay single:
// the RT_HIGH-driven drop, as chaotic from its switching, did not gain
// (one pair's low median went from +41% to +88%).
func (d *Dataset) runQueue(rules []Rule, o *Options, qf *queueFit) queueRun {
	var r queueRun
	var copied bool
	r.units, r.st, r.ranFree, copied = d.replayQueue(rules, o, qf, 0)
	r.members = 1
	if !copied || o.Members <= 1 {
		return r
	}
	r.members = o.Members
	r.pooled = map[string][][]int64{}
	add := func(us []UnitResult) {
		byClass := map[string][]int64{}
		for _, u := range us {
			byClass[u.Class] = append(byClass[u.Class], u.Predicted)
		}
		for c, v := range byClass {
			r.pooled[c] = append(r.pooled[c], v)
		}
	}
	add(r.units)
	for m := 1; m < r.members; m++ {
		more, _, _, _ := d.replayQueue(rules, o, qf, uint64(m))
		add(more)
	}
	return r
}

// band is class c's band (see ClassResult.Band): the null replay's error,
// or, when the rules took SYNs out of the capture's hands (ranFree), the
// larger of that and the free null replay's, which the prediction then
// rests on.
func (m *QueueModel) band(c string, ranFree bool) (*[2]float64, bool) {
	for _, f := range m.Fit {
		if f.Class != c {
			continue
		}
		b := f.Band
		if ranFree {
			b = [2]float64{max(b[0], f.FreeBand[0]), max(b[1], f.FreeBand[1])}
		}
		return &b, ranFree
	}
	return nil, false
}

// pooledDistribution is a class's predicted distribution over its units'
// times in every member (members[m] the m-th member's): its percentiles
// and mean are the pool's, its counts scaled to one member (by largest
// remainder, so they sum to N, the class's units). It also returns the
// lowest and highest p90 of the members alone.
func pooledDistribution(members [][]int64, edges []int64) (Distribution, *[2]int64) {
	var all []int64
	p90 := [2]int64{math.MaxInt64, math.MinInt64}
	for _, one := range members {
		all = append(all, one...)
		x := NewDistribution(one, edges).P90
		p90 = [2]int64{min(p90[0], x), max(p90[1], x)}
	}
	k := int64(len(members))
	d := NewDistribution(all, edges)
	d.N /= k
	type rem struct {
		i    int
		frac int64
	}
	left := d.N
	rems := make([]rem, len(d.Counts))
	for i, n := range d.Counts {
		d.Counts[i] = n / k
		left -= d.Counts[i]
		rems[i] = rem{i, n % k}
	}
	slices.SortStableFunc(rems, func(a, b rem) int { return cmp.Compare(b.frac, a.frac) })
	for j := 0; left > 0 && j < len(rems); j++ {
		d.Counts[rems[j].i]++
		left--
	}
	return d, &p90
}

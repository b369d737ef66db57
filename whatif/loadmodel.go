package whatif

import (
	"slices"
	"sort"
)

// LoadModel predicts a transaction's server processing time (request's last
// byte to response's first byte, both at the capture point) from the server's
// concurrency: the number of transactions in service at that moment.
//
// Assumptions: processing time grows linearly with concurrency,
// Proc(c) = Intercept + Slope*c with Slope >= 0 (a fitted negative slope is
// taken as no load effect), and a transaction's own variation (file size,
// CGI vs static) is kept: predicted = measured * Proc(new c) / Proc(old c).
// Proc is floored at Floor so the ratio stays finite.
type LoadModel struct {
	Intercept float64 `json:"intercept_ns"`
	Slope     float64 `json:"slope_ns"` // per concurrent transaction
	Floor     float64 `json:"floor_ns"`
	Samples   int     `json:"samples"`
}

// Proc evaluates the model at concurrency c.
func (m LoadModel) Proc(c float64) float64 {
	return max(m.Intercept+m.Slope*c, m.Floor, 1)
}

// Scale is the factor a processing time measured at concurrency from is
// multiplied by at concurrency to.
func (m LoadModel) Scale(from, to float64) float64 {
	if m.Slope == 0 || from == to {
		return 1
	}
	return m.Proc(to) / m.Proc(from)
}

// serviceTimes returns a transaction's service interval at the capture point,
// ok false when it has none (no request or no response seen).
func serviceTimes(ti *txInfo) (start, end int64, ok bool) {
	t := ti.tx
	if t.RequestLast == 0 || t.ResponseFirst == 0 || t.ResponseFirst < t.RequestLast {
		return 0, 0, false
	}
	return t.RequestLast, t.ResponseFirst, true
}

// measureLoad computes each transaction's concurrency and fits the model by
// least squares of processing time on concurrency.
func (d *Dataset) measureLoad() {
	for i := range d.txs {
		if s, e, ok := serviceTimes(&d.txs[i]); ok {
			d.starts = append(d.starts, s)
			d.ends = append(d.ends, e)
		}
	}
	slices.Sort(d.starts)
	slices.Sort(d.ends)
	d.conc = make([]int32, len(d.txs))
	var n, sx, sy, sxx, sxy float64
	for i := range d.txs {
		s, e, ok := serviceTimes(&d.txs[i])
		if !ok {
			continue
		}
		c := float64(countIn(d.starts, d.ends, s))
		d.conc[i] = int32(c)
		y := float64(e - s)
		n++
		sx, sy, sxx, sxy = sx+c, sy+y, sxx+c*c, sxy+c*y
	}
	if n == 0 {
		return
	}
	m := LoadModel{Samples: int(n), Intercept: sy / n, Floor: 0.01 * sy / n}
	if den := n*sxx - sx*sx; den > 0 {
		if b := (n*sxy - sx*sy) / den; b > 0 {
			m.Slope = b
			m.Intercept = (sy - b*sx) / n
		}
	}
	d.model = m
}

// countIn counts intervals [start, end) holding t, given the sorted starts
// and ends of the intervals.
func countIn(starts, ends []int64, t int64) int {
	s := sort.Search(len(starts), func(i int) bool { return starts[i] > t })
	e := sort.Search(len(ends), func(i int) bool { return ends[i] > t })
	return s - e
}

// loadDelta is the change of load a replay makes: intervals taken out of
// service (dropped or removed work) and put back at other times (admitted
// late).
type loadDelta struct {
	rmStart, rmEnd   []int64
	addStart, addEnd []int64
}

func (l *loadDelta) empty() bool { return len(l.rmStart) == 0 && len(l.addStart) == 0 }

func (l *loadDelta) sort() {
	slices.Sort(l.rmStart)
	slices.Sort(l.rmEnd)
	slices.Sort(l.addStart)
	slices.Sort(l.addEnd)
}

// at is the change of concurrency at t.
func (l *loadDelta) at(t int64) int {
	return countIn(l.addStart, l.addEnd, t) - countIn(l.rmStart, l.rmEnd, t)
}

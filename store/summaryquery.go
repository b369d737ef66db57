package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"golang.org/x/sync/errgroup"
)

// Summary reads whole minutes from the rollups (verified against the raw
// counts) and computes the partial minutes at the range's ends from the
// records; then it folds the rows into the answer.
func (q *querier) Summary(ctx context.Context, sq SummaryQuery) (*Summary, error) {
	k, coarse, err := checkSummary(sq)
	if err != nil {
		return nil, err
	}
	kinds := rollupKinds(q.d)
	got, recomputed, err := q.summaryRows(ctx, kinds, sq, k)
	if err != nil {
		return nil, fmt.Errorf("summary: %w", err)
	}
	s := &Summary{Recomputed: recomputed}
	summaryCounters(s, kinds, got, sq.Class)
	rows := got[0]
	if k == Pageviews {
		rows = got[1]
	}
	f := summaryFold{sq: sq, kind: k, coarse: coarse, s: s}
	f.fold(rows)
	if sq.BySensor && len(sq.Qs) > 0 {
		s.BySensor = sensorPercentiles(sq, k, rows)
	}
	return s, nil
}

// sensorPercentiles folds each sensor's rows on their own, for the
// percentiles of its classes.
func sensorPercentiles(sq SummaryQuery, k Kind, rows map[rollupKey]*rollupRow) []SensorPercentiles {
	bySensor := map[string]map[rollupKey]*rollupRow{}
	for key, row := range rows {
		if bySensor[key.sensor] == nil {
			bySensor[key.sensor] = map[rollupKey]*rollupRow{}
		}
		bySensor[key.sensor][key] = row
	}
	only := SummaryQuery{Class: sq.Class, Qs: sq.Qs}
	var out []SensorPercentiles
	for _, sensor := range slices.Sorted(maps.Keys(bySensor)) {
		s := &Summary{}
		f := summaryFold{sq: only, kind: k, s: s}
		f.fold(bySensor[sensor])
		if len(s.Percentiles) > 0 {
			out = append(out, SensorPercentiles{Sensor: sensor, Classes: s.Percentiles})
		}
	}
	return out
}

// checkSummary validates sq and returns its kind and coarseBuckets(sq.Edges).
func checkSummary(sq SummaryQuery) (Kind, []int, error) {
	k, _, err := kindTable(sq.Kind)
	if err != nil {
		return "", nil, err
	}
	if len(sq.Qs) > 0 {
		if err := validQs(sq.Qs); err != nil {
			return "", nil, err
		}
	}
	if sq.Step < 0 || int64(sq.Step)%rollupGrain != 0 {
		return "", nil, fmt.Errorf("summary: series step %v is not a multiple of %v", sq.Step, time.Duration(rollupGrain))
	}
	coarse, err := coarseBuckets(sq.Edges)
	if err != nil {
		return "", nil, err
	}
	return k, coarse, nil
}

// wholeMinutes splits r into the whole minutes [from, to) the rollups
// answer (from < 0: none; to 0: no bound) and the partial minutes at its
// ends, which are computed from the records.
func wholeMinutes(r TimeRange) (from, to int64, ends []TimeRange) {
	from = -floorDiv(-r.From, rollupGrain) * rollupGrain
	if r.To != 0 && floorDiv(r.To, rollupGrain)*rollupGrain <= from {
		// No whole minute inside.
		if r.To > r.From {
			ends = append(ends, r)
		}
		return -1, 0, ends
	}
	if r.From < from {
		ends = append(ends, TimeRange{From: r.From, To: from})
	}
	if r.To != 0 {
		to = floorDiv(r.To, rollupGrain) * rollupGrain
		if to < r.To {
			ends = append(ends, TimeRange{From: to, To: r.To})
		}
	}
	return from, to, ends
}

// summaryRows reads each kind's rows of sq's range, the kinds in parallel,
// and returns them with the number of minutes recomputed. Rows computed
// for this answer only carry a histogram where it asks for one (kind k's,
// with edges or quantiles): the histogram query costs DuckDB ~40 ms to
// plan, more than the tail's other sums.
func (q *querier) summaryRows(ctx context.Context, kinds []rollupKind, sq SummaryQuery, k Kind) ([]map[rollupKey]*rollupRow, int, error) {
	fullFrom, fullTo, ends := wholeMinutes(sq.Range)
	hours := sq.Step == 0 || int64(sq.Step)%rollupHour == 0
	got := make([]map[rollupKey]*rollupRow, len(kinds))
	recomputed := make([]int, len(kinds))
	g, gctx := errgroup.WithContext(ctx)
	_, kt, _ := kindTable(k)
	for i, rk := range kinds {
		if sq.Sensor != "" {
			rk = rk.onlySensors([]string{sq.Sensor})
		}
		hist := rk.t.name == kt.name && (sq.Edges != nil || len(sq.Qs) > 0)
		g.Go(func() error {
			rows := map[rollupKey]*rollupRow{}
			if fullFrom >= 0 {
				var err error
				if rows, recomputed[i], err = q.tieredRollups(gctx, rk, fullFrom, fullTo, hours, hist); err != nil {
					return err
				}
			}
			answer := rk
			answer.hist = answer.hist && hist
			partial, err := q.computeRollups(gctx, answer, ends)
			if err != nil {
				return err
			}
			for key, row := range partial {
				rows[key] = row
			}
			got[i] = rows
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	n := 0
	for _, r := range recomputed {
		n += r
	}
	return got, n, nil
}

// summaryCounters sets s's Classes (those with records of any kind,
// sorted), its Counters of class ("" = all) and their ByClass.
func summaryCounters(s *Summary, kinds []rollupKind, got []map[rollupKey]*rollupRow, class string) {
	byClass := map[string]*Counters{}
	for i, rk := range kinds {
		n := map[string]int64{}
		sums := map[string]map[string]int64{}
		for key, row := range got[i] {
			if row.n == 0 {
				continue
			}
			if byClass[key.class] == nil {
				byClass[key.class] = &Counters{}
			}
			if sums[key.class] == nil {
				sums[key.class] = map[string]int64{}
			}
			n[key.class] += row.n
			for name, v := range row.sums {
				sums[key.class][name] += v
			}
		}
		for c, cn := range n {
			addCounters(byClass[c], rk.name, cn, sums[c])
			if class == "" || c == class {
				addCounters(&s.Counters, rk.name, cn, sums[c])
			}
		}
	}
	s.Classes = make([]string, 0, len(byClass))
	for c := range byClass {
		s.Classes = append(s.Classes, c)
	}
	sort.Strings(s.Classes)
	for _, c := range s.Classes {
		if class == "" || c == class {
			s.ByClass = append(s.ByClass, ClassCounters{Class: c, Counters: *byClass[c]})
		}
	}
}

// summaryFold folds one kind's rows into the per-class answers, in
// (class, minute) order: one dense histogram per class, and the series'
// steps one after another through one scratch histogram.
type summaryFold struct {
	sq     SummaryQuery
	kind   Kind
	coarse []int
	s      *Summary
	cur    classAgg // the class being folded
	step   classAgg // its series step being folded
	stepT  int64
}

func (f *summaryFold) fold(rows map[rollupKey]*rollupRow) {
	keys := make([]rollupKey, 0, len(rows))
	for key, row := range rows {
		if row.n > 0 && (f.sq.Class == "" || key.class == f.sq.Class) {
			keys = append(keys, key)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].class != keys[j].class {
			return keys[i].class < keys[j].class
		}
		return keys[i].minute < keys[j].minute
	})
	for i, key := range keys {
		if i > 0 && key.class != keys[i-1].class {
			f.endClass(keys[i-1].class)
		}
		row := rows[key]
		f.cur.add(row)
		if f.sq.Step > 0 {
			t := floorDiv(key.minute, int64(f.sq.Step)) * int64(f.sq.Step)
			if f.step.n > 0 && t != f.stepT {
				f.endStep(key.class)
			}
			f.stepT = t
			f.step.add(row)
		}
	}
	if len(keys) > 0 {
		f.endClass(keys[len(keys)-1].class)
	}
}

func (f *summaryFold) endStep(class string) {
	if f.step.n > 0 && len(f.sq.Qs) > 0 {
		f.s.Series = append(f.s.Series, SeriesPoint{Class: class, T: f.stepT, Count: f.step.n, Values: f.step.quantiles(f.sq.Qs)})
	}
	f.step.reset()
}

func (f *summaryFold) endClass(class string) {
	if f.sq.Step > 0 {
		f.endStep(class)
	}
	cur := &f.cur
	if cur.n == 0 {
		return
	}
	cs := ComponentSums{Class: class, Count: cur.n, Sums: map[string]int64{}}
	for _, comp := range Components(f.kind) {
		cs.Sums[comp] = cur.sums[comp]
	}
	f.s.Sums = append(f.s.Sums, cs)
	if f.sq.Edges != nil {
		h := ClassHistogram{Class: class, Edges: f.sq.Edges, Counts: make([]int64, len(f.sq.Edges)), Total: cur.n}
		for b, n := range cur.hist {
			h.Counts[f.coarse[b]] += n
		}
		f.s.Histograms = append(f.s.Histograms, h)
	}
	if len(f.sq.Qs) > 0 {
		f.s.Percentiles = append(f.s.Percentiles, ClassPercentiles{Class: class, Count: cur.n, Values: cur.quantiles(f.sq.Qs)})
	}
	cur.reset()
}

// coarseBuckets maps each RollupEdges bucket to its bucket of edges.
func coarseBuckets(edges []int64) ([]int, error) {
	if edges == nil {
		return nil, nil
	}
	if len(edges) == 0 {
		return nil, fmt.Errorf("summary: histogram needs at least one edge")
	}
	for i, e := range edges[1:] {
		j := sort.Search(len(RollupEdges), func(j int) bool { return RollupEdges[j] >= e })
		if j == len(RollupEdges) || RollupEdges[j] != e || e <= edges[i] {
			return nil, fmt.Errorf("summary: histogram edge %d (%d ns) is not on the rollup grid or does not increase", i+1, e)
		}
	}
	out := make([]int, len(RollupEdges))
	c := 0
	for b, lower := range RollupEdges {
		for c+1 < len(edges) && edges[c+1] <= lower {
			c++
		}
		out[b] = c
	}
	return out, nil
}

// classAgg merges rollup rows into a dense histogram; reset keeps the
// arrays.
type classAgg struct {
	rollupRow         // totals; its sparse hist unused
	hist      []int64 // by RollupEdges bucket
	touched   []int   // non-zero buckets of hist, for reset
}

func (a *classAgg) reset() {
	for _, b := range a.touched {
		a.hist[b] = 0
	}
	a.touched = a.touched[:0]
	sums := a.sums
	clear(sums)
	a.rollupRow = rollupRow{sums: sums}
}

func (a *classAgg) add(r *rollupRow) {
	if a.hist == nil {
		a.hist = make([]int64, len(RollupEdges))
		a.sums = map[string]int64{}
	}
	a.mergeTotals(r)
	for _, x := range r.hist {
		if a.hist[x.b] == 0 {
			a.touched = append(a.touched, x.b)
		}
		a.hist[x.b] += x.c
	}
}

// quantiles picks the contract's index (see PercentileQuery) in the merged
// histogram and reports its bucket's estimate.
func (a *classAgg) quantiles(qs []float64) []int64 {
	out := make([]int64, len(qs))
	for i, q := range qs {
		idx := a.n - 1
		if q < 1 {
			idx = min(int64(q*float64(a.n)), a.n-1)
		}
		var cum int64
		for b, c := range a.hist {
			cum += c
			if cum > idx {
				out[i] = RollupEstimate(b, a.lo, a.hi)
				break
			}
		}
	}
	return out
}

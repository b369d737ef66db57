package testbed

// Repeated runs of one setup, judged together: two real runs of the
// overload differed by up to 34% at a class's p90 (six pageviews of the
// high class a run), so one pair of runs cannot tell a model's bias from
// the workload's luck.

import (
	"fmt"
	"strings"
	"time"

	"github.com/rtmon/rtmon/whatif"
)

// meanRow is the repeated pairs' rows of one class as one: each quantile
// the mean of the runs' quantiles (a quantile of the pooled loads would
// let one slow run's tail stand for all), the counts summed, and the mean
// of the link-stall allowances.
func meanRow(rows []judgedRow) judgedRow {
	if len(rows) == 0 {
		return judgedRow{}
	}
	out := judgedRow{row: ValidationRow{Action: rows[0].row.Action, Class: rows[0].row.Class}}
	pick := func(r *ValidationRow) []*whatif.Distribution {
		return []*whatif.Distribution{&r.Baseline, &r.Predicted, &r.Truth, &r.Rtmon}
	}
	sums := make([][5]int64, 4)
	with := make([]int64, 4) // runs with any value: rtmon may have none
	var allow time.Duration
	for i := range rows {
		allow += rows[i].allow
		for k, d := range pick(&rows[i].row) {
			if d.N == 0 {
				continue
			}
			with[k]++
			for q, v := range []int64{d.P50, d.P75, d.P90, d.P99, d.Mean} {
				sums[k][q] += v
			}
		}
	}
	for k, d := range pick(&out.row) {
		for i := range rows {
			d.N += pick(&rows[i].row)[k].N
		}
		if with[k] == 0 {
			continue
		}
		d.P50, d.P75, d.P90, d.P99, d.Mean = sums[k][0]/with[k], sums[k][1]/with[k], sums[k][2]/with[k], sums[k][3]/with[k], sums[k][4]/with[k]
	}
	out.allow = allow / time.Duration(len(rows))
	return out
}

// judgeRepeated judges pairs[i] (baseline i's prediction against applied
// run i) together: per class, the mean prediction against the mean
// measurement must be within the tolerance. It returns the mean rows and
// a line per class telling the spread of the pairs, the floor of what a
// single pair can show.
func judgeRepeated(name string, pairs [][]judgedRow) (rows []ValidationRow, spread string, misses []string) {
	byClass := map[string][]judgedRow{}
	var order []string
	for _, pair := range pairs {
		for _, j := range pair {
			if _, ok := byClass[j.row.Class]; !ok {
				order = append(order, j.row.Class)
			}
			byClass[j.row.Class] = append(byClass[j.row.Class], j)
		}
	}
	var b strings.Builder
	for _, class := range order {
		js := byClass[class]
		m := meanRow(js)
		rows = append(rows, m.row)
		misses = append(misses, m.miss(name)...)
		fmt.Fprintf(&b, "    %-28s %-5s %d pairs: measured p90 %s, predicted p90 %s, pair errors p50 %s p90 %s\n", name, class, len(js),
			spanOf(js, func(r ValidationRow) int64 { return r.Truth.P90 }), spanOf(js, func(r ValidationRow) int64 { return r.Predicted.P90 }),
			errsOf(js, ValidationRow.ErrP50), errsOf(js, ValidationRow.ErrP90))
	}
	return rows, b.String(), misses
}

// spanOf is the least and greatest of a quantile over the pairs, and how
// far apart they are.
func spanOf(js []judgedRow, q func(ValidationRow) int64) string {
	lo, hi := q(js[0].row), q(js[0].row)
	for _, j := range js[1:] {
		lo, hi = min(lo, q(j.row)), max(hi, q(j.row))
	}
	return fmt.Sprintf("%v..%v (%.0f%% apart)", ms(lo), ms(hi), 100*relErr(hi, lo))
}

func errsOf(js []judgedRow, e func(ValidationRow) float64) string {
	parts := make([]string, len(js))
	for i, j := range js {
		parts[i] = fmt.Sprintf("%+.1f%%", 100*e(j.row))
	}
	return strings.Join(parts, " ")
}

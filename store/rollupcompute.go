package store

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
)

// rangesWhere selects start_ns in any of rs (each [From, To), To > From).
func rangesWhere(rs []TimeRange) *where {
	w := &where{}
	conds := make([]string, len(rs))
	for i, r := range rs {
		conds[i] = "(start_ns >= ? AND start_ns < ?)"
		w.args = append(w.args, r.From, r.To)
	}
	w.conds = []string{"(" + strings.Join(conds, " OR ") + ")"}
	return w
}

// computeRollups aggregates the raw rows of rs (of rk's sensors) by
// minute, class and sensor.
func (q *querier) computeRollups(ctx context.Context, rk rollupKind, rs []TimeRange) (map[rollupKey]*rollupRow, error) {
	out := map[rollupKey]*rollupRow{}
	if len(rs) == 0 {
		return out, nil
	}
	d := q.d
	tbl := d.table(rk.t.name)
	w := rangesWhere(rs)
	rk.sensorWhere(w)
	m := d.intDiv("start_ns", strconv.FormatInt(rollupGrain, 10))
	lohi := "0, 0"
	if rk.hist {
		lohi = "min(total), max(total)"
	}
	sqlText := fmt.Sprintf("SELECT %s AS m, class, sensor, count(*), min(start_ns), max(start_ns), %s, %s FROM %s WHERE %s GROUP BY m, class, sensor",
		m, lohi, strings.Join(rk.exprs, ", "), tbl, w)
	rows, err := q.db().QueryContext(ctx, sqlText, w.args...)
	if err != nil {
		return nil, fmt.Errorf("rollup %s: %w", rk.t.name, err)
	}
	vals := make([]int64, len(rk.exprs))
	for rows.Next() {
		var k rollupKey
		r := &rollupRow{sums: make(map[string]int64, len(rk.names))}
		dest := []any{&k.minute, &k.class, &k.sensor, &r.n, &r.first, &r.last, &r.lo, &r.hi}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return nil, fmt.Errorf("rollup %s scan: %w", rk.t.name, err)
		}
		for i, name := range rk.names {
			r.sums[name] = vals[i]
		}
		k.minute *= rollupGrain
		out[k] = r
		q.rawRows.Add(r.n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rollup %s: %w", rk.t.name, err)
	}
	if !rk.hist || len(out) == 0 {
		return out, nil
	}
	if q.betweenRollupQueries != nil {
		q.betweenRollupQueries()
	}
	// The buckets are counted per (minute, class, sensor, bucket) and each
	// (minute, class, sensor) returns its pairs as one text: shipping the
	// ~150 rows per key to Go instead cost more than the query.
	guess, fixed := logBucket(d.boolInt, d.ln, d.elem, "total", RollupEdges)
	sqlText = fmt.Sprintf("SELECT m, class, sensor, %s FROM (SELECT m, class, sensor, %s AS b, count(*) AS c FROM (SELECT %s AS m, class, sensor, total, %s AS b0 FROM %s WHERE %s) GROUP BY m, class, sensor, b) GROUP BY m, class, sensor",
		d.pairsText("b", "c"), fixed, m, guess, tbl, w)
	rows, err = q.db().QueryContext(ctx, sqlText, w.args...)
	if err != nil {
		return nil, fmt.Errorf("rollup histogram %s: %w", rk.t.name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k rollupKey
		var text string
		if err := rows.Scan(&k.minute, &k.class, &k.sensor, &text); err != nil {
			return nil, fmt.Errorf("rollup histogram %s scan: %w", rk.t.name, err)
		}
		k.minute *= rollupGrain
		r := out[k]
		if r == nil {
			continue // arrived between the two queries; the next recompute has it
		}
		if r.hist, err = decodeHist(r.hist, text); err != nil {
			return nil, err
		}
		counted := r.n
		r.countFromHist()
		r.torn = r.n != counted
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rollup histogram %s: %w", rk.t.name, err)
	}
	return out, nil
}

// countFromHist makes the row's count its histogram's: records written
// between the count and the histogram queries are in the one and not the
// other (no transaction spans both, and ClickHouse has none), and a
// histogram whose buckets hold more than its count reads as records
// outside every bucket (a Prometheus histogram whose good bucket outgrew
// its count paged for a class that met its objective). The sums may lag
// by those few records until the next recompute.
func (r *rollupRow) countFromHist() {
	var n int64
	for _, bc := range r.hist {
		n += bc.c
	}
	r.n = n
}

// computeToStore is computeRollups for rows that will be stored. A stored
// row is trusted on its count alone (readers check counts, not sums), so a
// torn one, whose sums missed records its histogram counted (written
// between the two queries, or a lagging replica catching up between them),
// would keep its short sums for good. Torn minutes are computed again, at
// most twice; rows still torn answer the caller (all) but are left out of
// what it stores (storable), so that readers find their minute's count
// short and recompute it.
func (q *querier) computeToStore(ctx context.Context, rk rollupKind, rs []TimeRange) (all, storable map[rollupKey]*rollupRow, err error) {
	all, err = q.computeRollups(ctx, rk, rs)
	if err != nil {
		return nil, nil, err
	}
	for range 2 {
		runs := minuteRuns(tornMinutes(all), 64)
		if len(runs) == 0 {
			break
		}
		again, err := q.computeRollups(ctx, rk, runs)
		if err != nil {
			return nil, nil, err
		}
		maps.DeleteFunc(all, func(k rollupKey, _ *rollupRow) bool { return inRuns(k.minute, runs) })
		maps.Copy(all, again)
	}
	storable = make(map[rollupKey]*rollupRow, len(all))
	for k, r := range all {
		if !r.torn {
			storable[k] = r
		}
	}
	return all, storable, nil
}

// tornMinutes lists the minutes holding a torn row.
func tornMinutes(rows map[rollupKey]*rollupRow) []int64 {
	set := map[int64]bool{}
	for k, r := range rows {
		if r.torn {
			set[k.minute] = true
		}
	}
	return sortedKeys(set)
}

package store

import (
	"context"
	"database/sql"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// pctTarget checks a percentile query and names its table and column.
func pctTarget(pq PercentileQuery) (table, string, error) {
	k, t, err := kindTable(pq.Kind)
	if err != nil {
		return table{}, "", err
	}
	col, err := componentCol(k, pq.Component)
	if err != nil {
		return table{}, "", err
	}
	if err := validQs(pq.Qs); err != nil {
		return table{}, "", err
	}
	return t, col, nil
}

// pctWhere selects a percentile query's records.
func pctWhere(pq PercentileQuery) *where {
	w := baseWhere(pq.Range, pq.Class)
	if pq.Sensor != "" {
		w.add("sensor = ?", pq.Sensor)
	}
	return w
}

func validQs(qs []float64) error {
	if len(qs) == 0 {
		return fmt.Errorf("percentiles: no quantiles")
	}
	for _, x := range qs {
		if !(x >= 0 && x <= 1) {
			return fmt.Errorf("percentiles: quantile %v outside [0, 1]", x)
		}
	}
	return nil
}

func (q *querier) pct(ctx context.Context, pq PercentileQuery, series bool) ([]SeriesPoint, error) {
	t, col, err := pctTarget(pq)
	if err != nil {
		return nil, err
	}
	w := pctWhere(pq)
	exprs, names := []string{"class"}, []string{"class"}
	var args []any
	if series {
		if pq.Bucket <= 0 {
			return nil, fmt.Errorf("percentile series: bucket must be positive")
		}
		// Bucket size is an integer literal after validation: it appears in
		// GROUP BY, where bound parameters are not reliable in both engines.
		b := strconv.FormatInt(int64(pq.Bucket), 10)
		exprs = append(exprs, q.d.intDiv("start_ns", b)+" * "+b)
		names = append(names, "t")
	}
	sqlText := q.d.pct(q.d.table(t.name), w.String(), exprs, names, col, pq.Qs)
	args = append(args, w.args...)
	out, err := queryAll(ctx, q.db(), sqlText, args, func(rows *sql.Rows) (p SeriesPoint, err error) {
		var vals int64List
		dest := []any{&p.Class}
		if series {
			dest = append(dest, &p.T)
		}
		dest = append(dest, &p.Count, &vals)
		err = rows.Scan(dest...)
		p.Values = []int64(vals)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("percentiles: %w", err)
	}
	return out, nil
}

func (q *querier) Percentiles(ctx context.Context, pq PercentileQuery) ([]ClassPercentiles, error) {
	if q.d.discrete != nil {
		// One grouped selection (levels shared by all classes) scans once;
		// the per-class FILTER form is the fallback.
		pts, ok, err := q.pctSeriesDiscrete(ctx, pq, false)
		if err != nil {
			return nil, err
		}
		if !ok {
			return q.pctDiscrete(ctx, pq)
		}
		var out []ClassPercentiles
		for _, p := range pts {
			out = append(out, ClassPercentiles{Class: p.Class, Count: p.Count, Values: p.Values})
		}
		return out, nil
	}
	pts, err := q.pct(ctx, pq, false)
	if err != nil {
		return nil, err
	}
	var out []ClassPercentiles
	for _, p := range pts {
		out = append(out, ClassPercentiles{Class: p.Class, Count: p.Count, Values: p.Values})
	}
	return out, nil
}

// pctDiscrete: count per class first, then pick index min(floor(q*n), n-1)
// with a selection aggregate (no sort) at level (k+0.5)/n, which a
// nearest-rank quantile maps to index k whatever the float rounding.
func (q *querier) pctDiscrete(ctx context.Context, pq PercentileQuery) ([]ClassPercentiles, error) {
	t, col, err := pctTarget(pq)
	if err != nil {
		return nil, err
	}
	w := pctWhere(pq)
	tbl := q.d.table(t.name)
	rows, err := q.db().QueryContext(ctx, fmt.Sprintf("SELECT class, count(*) FROM %s WHERE %s GROUP BY class ORDER BY class", tbl, w), w.args...)
	if err != nil {
		return nil, fmt.Errorf("percentile counts: %w", err)
	}
	var out []ClassPercentiles
	for rows.Next() {
		var c ClassPercentiles
		if err := rows.Scan(&c.Class, &c.Count); err != nil {
			rows.Close()
			return nil, fmt.Errorf("percentile counts: %w", err)
		}
		out = append(out, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(out) == 0 {
		return nil, err
	}
	var aggs []string
	var args []any
	for _, c := range out {
		levels := make([]string, len(pq.Qs))
		for i, x := range pq.Qs {
			idx := c.Count - 1
			if x < 1 {
				idx = min(int64(x*float64(c.Count)), c.Count-1)
			}
			levels[i] = formatQ((float64(idx) + 0.5) / float64(c.Count))
		}
		aggs = append(aggs, q.d.discrete(col, levels)+" FILTER (WHERE class = ?)")
		args = append(args, c.Class)
	}
	dest := make([]any, len(out))
	lists := make([]int64List, len(out))
	for i := range lists {
		dest[i] = &lists[i]
	}
	err = q.db().QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s", strings.Join(aggs, ", "), tbl, w), append(args, w.args...)...).Scan(dest...)
	if err != nil {
		return nil, fmt.Errorf("percentiles: %w", err)
	}
	for i := range out {
		out[i].Values = []int64(lists[i])
	}
	return out, nil
}

func (q *querier) PercentileSeries(ctx context.Context, pq PercentileQuery) ([]SeriesPoint, error) {
	if q.d.discrete != nil && pq.Bucket > 0 {
		if out, ok, err := q.pctSeriesDiscrete(ctx, pq, true); err != nil || ok {
			return out, err
		}
	}
	return q.pct(ctx, pq, true)
}

// pctSeriesDiscrete: like pctDiscrete for many groups. The groups' sizes
// are counted first; then for each quantile one DECIMAL level q' is chosen
// (exact rational arithmetic) with k/n < q' <= (k+1)/n for every group's
// n and index k = min(floor(q*n), n-1), so that the engine's nearest-rank
// selection (index ceil(q'*n)-1, computed in integers for a DECIMAL level)
// picks index k in every group: a selection per group instead of sorting
// a list per group. ok is false when no such level exists or the groups
// changed between the two queries; the caller then sorts lists.
func (q *querier) pctSeriesDiscrete(ctx context.Context, pq PercentileQuery, series bool) ([]SeriesPoint, bool, error) {
	t, col, err := pctTarget(pq)
	if err != nil {
		return nil, false, err
	}
	w := pctWhere(pq)
	tbl := q.d.table(t.name)
	// Without series, t is a constant 0 and groups are classes.
	group, by := "0", "class"
	if series {
		b := strconv.FormatInt(int64(pq.Bucket), 10)
		group, by = q.d.intDiv("start_ns", b)+" * "+b, "class, t"
	}
	rows, err := q.db().QueryContext(ctx, fmt.Sprintf("SELECT class, %s AS t, count(*) AS n FROM %s WHERE %s GROUP BY %s ORDER BY %s", group, tbl, w, by, by), w.args...)
	if err != nil {
		return nil, false, fmt.Errorf("percentile series counts: %w", err)
	}
	var out []SeriesPoint
	for rows.Next() {
		var p SeriesPoint
		if err := rows.Scan(&p.Class, &p.T, &p.Count); err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("percentile series counts: %w", err)
		}
		out = append(out, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("percentile series counts: %w", err)
	}
	if len(out) == 0 {
		return nil, true, nil
	}
	levels, ok := seriesLevels(pq.Qs, out)
	if !ok {
		return nil, false, nil
	}
	rows, err = q.db().QueryContext(ctx, fmt.Sprintf("SELECT class, %s AS t, count(*) AS n, %s AS qs FROM %s WHERE %s GROUP BY %s ORDER BY %s",
		group, q.d.discrete(col, levels), tbl, w, by, by), w.args...)
	if err != nil {
		return nil, false, fmt.Errorf("percentile series: %w", err)
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var class string
		var ts, n int64
		var vals int64List
		if err := rows.Scan(&class, &ts, &n, &vals); err != nil {
			return nil, false, fmt.Errorf("percentile series scan: %w", err)
		}
		if i >= len(out) || out[i].Class != class || out[i].T != ts || out[i].Count != n || len(vals) != len(pq.Qs) {
			return nil, false, nil // new rows arrived in between
		}
		out[i].Values = []int64(vals)
		i++
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("percentile series: %w", err)
	}
	if i != len(out) {
		return nil, false, nil
	}
	return out, true, nil
}

// seriesLevels returns, per quantile, a decimal literal q' (all with the
// same scale, so a list of them is one DECIMAL type) such that for every
// group size n, ceil(q'*n)-1 is the contract index min(floor(q*n), n-1)
// (q*n in float64), or ok=false if none with at most 27 digits exists.
func seriesLevels(qs []float64, groups []SeriesPoint) ([]string, bool) {
	const maxScale = 27 // n * 10^scale stays far inside DuckDB's 128-bit integers
	ns := map[int64]bool{}
	for _, g := range groups {
		if g.Count <= 0 || g.Count > 1e10 {
			return nil, false
		}
		ns[g.Count] = true
	}
	los := make([]*big.Rat, len(qs))
	his := make([]*big.Rat, len(qs))
	scale := 1
	for i, x := range qs {
		var lo, hi *big.Rat // q' in (lo, hi]
		for n := range ns {
			k := n - 1
			if x < 1 {
				k = min(int64(x*float64(n)), n-1)
			}
			l, h := big.NewRat(k, n), big.NewRat(k+1, n)
			if lo == nil || l.Cmp(lo) > 0 {
				lo = l
			}
			if hi == nil || h.Cmp(hi) < 0 {
				hi = h
			}
		}
		if lo.Cmp(hi) >= 0 {
			return nil, false
		}
		los[i], his[i] = lo, hi
		// Smallest scale with a multiple of 10^-s in (lo, hi].
		for s := 1; ; s++ {
			if s > maxScale {
				return nil, false
			}
			if decAbove(lo, s).Cmp(hi) <= 0 {
				scale = max(scale, s)
				break
			}
		}
	}
	out := make([]string, len(qs))
	for i := range qs {
		out[i] = decAbove(los[i], scale).FloatString(scale)
	}
	return out, true
}

// decAbove is the smallest multiple of 10^-s strictly greater than r (r >= 0).
func decAbove(r *big.Rat, s int) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(s)), nil)
	num := new(big.Int).Mul(r.Num(), p)
	num.Quo(num, r.Denom()) // floor, r >= 0
	num.Add(num, big.NewInt(1))
	return new(big.Rat).SetFrac(num, p)
}

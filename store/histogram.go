package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

func (q *querier) Histogram(ctx context.Context, hq HistogramQuery) ([]ClassHistogram, error) {
	k, t, err := kindTable(hq.Kind)
	if err != nil {
		return nil, err
	}
	col, err := componentCol(k, hq.Component)
	if err != nil {
		return nil, err
	}
	if len(hq.Edges) == 0 {
		return nil, fmt.Errorf("histogram: no edges")
	}
	for i := 1; i < len(hq.Edges); i++ {
		if hq.Edges[i] <= hq.Edges[i-1] {
			return nil, fmt.Errorf("histogram: edges must increase (edge %d)", i)
		}
	}
	w := baseWhere(hq.Range, hq.Class)
	w.sensor(hq.Sensor)
	bucketOf := func(b int64) int { return int(b) }
	var sqlText string
	var bargs []any
	if q.d.hist != nil && len(hq.Edges) > 1 {
		var of func(int64) int
		sqlText, bargs, of = q.d.hist(q.d.table(t.name), w.String(), col, hq.Edges, "class", "class")
		if of != nil {
			bucketOf = of
		}
	}
	if sqlText == "" {
		sqlText, bargs = q.histSQL(t, w, col, hq.Edges)
	}
	var out []ClassHistogram
	err = eachRow(ctx, q.db(), sqlText, append(bargs, w.args...), func(rows *sql.Rows) error {
		var class string
		var b, c int64
		if err := rows.Scan(&class, &b, &c); err != nil {
			return err
		}
		if len(out) == 0 || out[len(out)-1].Class != class {
			out = append(out, ClassHistogram{Class: class, Edges: hq.Edges, Counts: make([]int64, len(hq.Edges))})
		}
		h := &out[len(out)-1]
		h.Counts[bucketOf(b)] += c
		h.Total += c
		q.rawRows.Add(c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("histogram: %w", err)
	}
	return out, nil
}

// histSQL: bucket index = number of edges after the first that v reaches;
// plain integer comparisons, identical in both engines.
func (q *querier) histSQL(t table, w *where, col string, edges []int64) (string, []any) {
	var terms []string
	var bargs []any
	for _, e := range edges[1:] {
		terms = append(terms, q.d.boolInt(col+" >= ?"))
		bargs = append(bargs, e)
	}
	bucket := q.d.boolInt("1 = 0")
	if len(terms) > 0 {
		bucket = strings.Join(terms, " + ")
		if q.d.addsBools {
			// ClickHouse adds the UInt8 comparisons directly (the sum
			// widens, at most len(edges)); one cast instead of one per edge.
			conds := make([]string, len(terms))
			for i := range conds {
				conds[i] = "(" + col + " >= ?)"
			}
			bucket = q.d.boolInt(strings.Join(conds, " + "))
		}
	}
	return fmt.Sprintf("SELECT class, %s AS b, count(*) AS c FROM %s WHERE %s GROUP BY class, b ORDER BY class, b",
		bucket, q.d.table(t.name), w), bargs
}

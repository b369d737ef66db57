package store

import (
	"context"
	"fmt"
	"strings"
)

// exactExtent answers from min/max/count, which both engines keep cheap (a
// metadata-sized scan of one column), instead of sorting to find the
// oldest record.
func (q *querier) exactExtent(ctx context.Context, k Kind) (Extent, error) {
	_, t, err := kindTable(k)
	if err != nil {
		return Extent{}, err
	}
	var e Extent
	sqlText := fmt.Sprintf("SELECT count(*), coalesce(min(start_ns), 0), coalesce(max(start_ns), 0) FROM %s", q.d.table(t.name))
	if err := q.db().QueryRowContext(ctx, sqlText).Scan(&e.N, &e.First, &e.Last); err != nil {
		return Extent{}, fmt.Errorf("extent of %s: %w", t.name, err)
	}
	return e, nil
}

// ComponentSums answers with one scan per call: sums cost a fraction of a
// percentile's selection, which is why the overview's breakdown uses them.
func (q *querier) ComponentSums(ctx context.Context, sq SumQuery) ([]ComponentSums, error) {
	k, t, err := kindTable(sq.Kind)
	if err != nil {
		return nil, err
	}
	comps := Components(k)
	sel := make([]string, len(comps))
	for i, c := range comps {
		sel[i] = q.d.sum(componentColumn(c))
	}
	w := baseWhere(sq.Range, sq.Class)
	w.sensor(sq.Sensor)
	sqlText := fmt.Sprintf("SELECT class, count(*), %s FROM %s WHERE %s GROUP BY class ORDER BY class",
		strings.Join(sel, ", "), q.d.table(t.name), w)
	rows, err := q.db().QueryContext(ctx, sqlText, w.args...)
	if err != nil {
		return nil, fmt.Errorf("component sums: %w", err)
	}
	defer rows.Close()
	var out []ComponentSums
	for rows.Next() {
		cs := ComponentSums{Sums: make(map[string]int64, len(comps))}
		vals := make([]int64, len(comps))
		dest := []any{&cs.Class, &cs.Count}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("component sums scan: %w", err)
		}
		for i, c := range comps {
			cs.Sums[c] = vals[i]
		}
		out = append(out, cs)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("component sums: %w", err)
	}
	return out, nil
}

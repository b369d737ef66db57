package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// querier answers the queries of both engines over database/sql. It also
// keeps the rollups it reads right: a stale minute it finds is recomputed
// and stored through ins.
type querier struct {
	db *sql.DB
	d  dialect
	// ins stores recomputed rollups.
	ins inserter
	// keepRollups: the writer keeps the rollups current, so Extent may
	// read them.
	keepRollups bool
	// versions orders this store's rollup recomputes.
	versions *versionClock
	// onRollupError counts a recompute that could not be stored (the
	// writer's Stats); set once at open.
	onRollupError func(error)
}

// where builds the range/class filter; all values are bound.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, args ...any) {
	w.conds = append(w.conds, cond)
	w.args = append(w.args, args...)
}

func (w *where) String() string {
	if len(w.conds) == 0 {
		return "1 = 1"
	}
	return strings.Join(w.conds, " AND ")
}

func baseWhere(r TimeRange, class string) *where {
	w := &where{}
	// No condition for no bound: reading start_ns costs ClickHouse 18.16
	// ~45 ms over 10M records (it compresses poorly without codecs).
	if r.From != 0 {
		w.add("start_ns >= ?", r.From)
	}
	if r.To != 0 {
		w.add("start_ns < ?", r.To)
	}
	if class != "" {
		w.add("class = ?", class)
	}
	return w
}

func kindTable(k Kind) (Kind, table, error) {
	switch k {
	case "", Transactions:
		return Transactions, txTable, nil
	case Pageviews:
		return Pageviews, pvTable, nil
	}
	return "", table{}, fmt.Errorf("kind %q: want transactions or pageviews", k)
}

func componentCol(k Kind, comp string) (string, error) {
	if comp == "" {
		comp = "total"
	}
	if !slices.Contains(Components(k), comp) {
		return "", fmt.Errorf("component %q not valid for %s (want one of %v)", comp, k, Components(k))
	}
	return componentColumn(comp), nil
}

// Counters runs one query per table with the same sums as the rollups.
func (q *querier) Counters(ctx context.Context, r TimeRange, class string) (Counters, error) {
	var c Counters
	w := baseWhere(r, class)
	for _, rk := range rollupKinds(q.d) {
		var n int64
		vals := make([]int64, len(rk.exprs))
		dest := []any{&n}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		sqlText := fmt.Sprintf("SELECT count(*), %s FROM %s WHERE %s", strings.Join(rk.exprs, ", "), q.d.table(rk.t.name), w)
		if err := q.db.QueryRowContext(ctx, sqlText, w.args...).Scan(dest...); err != nil {
			return c, fmt.Errorf("counters %s: %w", rk.t.name, err)
		}
		sums := make(map[string]int64, len(vals))
		for i, name := range rk.names {
			sums[name] = vals[i]
		}
		addCounters(&c, rk.name, n, sums)
	}
	return c, nil
}

func (q *querier) TopSlow(ctx context.Context, tq TopQuery) ([]TopRow, error) {
	_, t, err := kindTable(tq.Kind)
	if err != nil {
		return nil, err
	}
	// A URL is keyed by the (host, url) pair: grouping on two columns
	// costs half of grouping on their concatenation (58 vs 131 ms over 10M
	// in DuckDB), and two hosts whose names run into the path differently
	// are two sites anyway.
	var key, order string
	switch tq.By {
	case "url", "":
		key, order = "host, url", "host ASC, url ASC"
	case "server", "client":
		key, order = tq.By+" AS k, ''", "k ASC"
	default:
		return nil, fmt.Errorf("top slow by %q: want url, server or client", tq.By)
	}
	if tq.Limit <= 0 {
		tq.Limit = 20
	}
	w := baseWhere(tq.Range, tq.Class)
	d := q.d
	group := "host, url"
	if tq.By == "server" || tq.By == "client" {
		group = "k"
	} else if d.pairKey != nil {
		key, group, order = d.pairKey("host", "url")
	}
	sqlText := fmt.Sprintf("SELECT %s, count(*) AS n, %s AS mean, max(total) AS mx FROM %s WHERE %s GROUP BY %s HAVING count(*) >= ? ORDER BY mean DESC, %s LIMIT ?",
		key, d.intDiv(d.sum("total"), "count(*)"), d.table(t.name), w, group, order)
	rows, err := q.db.QueryContext(ctx, sqlText, append(w.args, max(tq.MinCount, 1), tq.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("top slow query: %w", err)
	}
	defer rows.Close()
	var out []TopRow
	for rows.Next() {
		var r TopRow
		var path string
		if err := rows.Scan(&r.Key, &path, &r.Count, &r.Mean, &r.Max); err != nil {
			return nil, fmt.Errorf("top slow scan: %w", err)
		}
		r.Key += path
		if tq.By == "server" || tq.By == "client" {
			if a := keyAddr(r.Key); a.IsValid() {
				r.Key = a.String()
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (q *querier) Classes(ctx context.Context, r TimeRange) ([]string, error) {
	set := map[string]bool{}
	w := baseWhere(r, "")
	for _, t := range tables {
		cs, err := queryStrings(ctx, q.db, fmt.Sprintf("SELECT DISTINCT class FROM %s WHERE %s", q.d.table(t.name), w), w.args...)
		if err != nil {
			return nil, fmt.Errorf("classes of %s: %w", t.name, err)
		}
		for _, c := range cs {
			set[c] = true
		}
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, nil
}

// existingIDs is shared: both engines answer it with one bound range query.
func (q *querier) existingIDs(ctx context.Context, t table, lo, hi int64, ids map[string]bool) (map[string]bool, error) {
	rows, err := q.db.QueryContext(ctx, fmt.Sprintf("SELECT id FROM %s WHERE start_ns >= ? AND start_ns <= ?", q.d.table(t.name)), lo, hi)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		if ids[id] {
			have[id] = true
		}
	}
	return have, rows.Err()
}

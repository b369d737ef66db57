package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
)

// querier answers the queries of both engines over database/sql. It also
// keeps the rollups it reads right: a stale minute it finds is recomputed
// and stored through ins.
type querier struct {
	// pool is the engine's connection pool, asked for at each query:
	// DuckDB replaces it when it reopens an invalidated database.
	pool func() *sql.DB
	d    dialect
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
	// pending, set at open when the writer keeps the rollups, lists the
	// minutes of a table in [from, to) whose rollups the writer has not
	// stored yet (writer.pendingMinutes); nil: none known.
	pending func(table string, from, to int64) []int64
	// rawRows counts the records the counting queries read (RawRowsRead).
	rawRows atomic.Int64
	// betweenRollupQueries, for tests, runs between a rollup recompute's
	// count and histogram queries; nil in use.
	betweenRollupQueries func()
}

// RawRowsRead is how many records the queries that aggregate the record
// tables have read: counts over a range, rollup recomputes and checks,
// Counters and Histogram (not percentiles, searches or Classes; whole-table
// counts come from metadata and read none). A measure of work that should
// not grow with the store where rollups answer (the web's /metrics tests).
func (q *querier) RawRowsRead() int64 { return q.rawRows.Load() }

func (q *querier) db() *sql.DB { return q.pool() }

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

// sensor keeps one sensor's records ("": every sensor's).
func (w *where) sensor(sensor string) {
	if sensor != "" {
		w.add("sensor = ?", sensor)
	}
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

// componentColumn is the column holding a valid component: its own name,
// but for rtt.
func componentColumn(comp string) string {
	if comp == "rtt" {
		return "rtt_client"
	}
	return comp
}

// Counters runs one query per table with the same sums as the rollups.
func (q *querier) Counters(ctx context.Context, r TimeRange, class string) (Counters, error) {
	return q.SensorCounters(ctx, r, class, "")
}

// SensorCounters is Counters of one sensor's records ("": all).
func (q *querier) SensorCounters(ctx context.Context, r TimeRange, class, sensor string) (Counters, error) {
	var c Counters
	w := baseWhere(r, class)
	w.sensor(sensor)
	for _, rk := range rollupKinds(q.d) {
		var n int64
		vals := make([]int64, len(rk.exprs))
		dest := []any{&n}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		sqlText := fmt.Sprintf("SELECT count(*), %s FROM %s WHERE %s", strings.Join(rk.exprs, ", "), q.d.table(rk.t.name), w)
		if err := q.db().QueryRowContext(ctx, sqlText, w.args...).Scan(dest...); err != nil {
			return c, fmt.Errorf("counters %s: %w", rk.t.name, err)
		}
		q.rawRows.Add(n)
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
	w.sensor(tq.Sensor)
	d := q.d
	group := "host, url"
	if tq.By == "server" || tq.By == "client" {
		group = "k"
	} else if d.pairKey != nil {
		key, group, order = d.pairKey("host", "url")
	}
	sqlText := fmt.Sprintf("SELECT %s, count(*) AS n, %s AS mean, max(total) AS mx FROM %s WHERE %s GROUP BY %s HAVING count(*) >= ? ORDER BY mean DESC, %s LIMIT ?",
		key, d.intDiv(d.sum("total"), "count(*)"), d.table(t.name), w, group, order)
	out, err := queryAll(ctx, q.db(), sqlText, append(w.args, max(tq.MinCount, 1), tq.Limit), func(rows *sql.Rows) (r TopRow, err error) {
		var path string
		if err := rows.Scan(&r.Key, &path, &r.Count, &r.Mean, &r.Max); err != nil {
			return r, err
		}
		r.Key += path
		if tq.By == "server" || tq.By == "client" {
			if a := keyAddr(r.Key); a.IsValid() {
				r.Key = a.String()
			}
		}
		return r, nil
	})
	if err != nil {
		return nil, fmt.Errorf("top slow: %w", err)
	}
	return out, nil
}

func (q *querier) Classes(ctx context.Context, r TimeRange) ([]string, error) {
	set := map[string]bool{}
	w := baseWhere(r, "")
	for _, t := range tables {
		cs, err := queryStrings(ctx, q.db(), fmt.Sprintf("SELECT DISTINCT class FROM %s WHERE %s", q.d.table(t.name), w), w.args...)
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
	return existingIDsIn(ctx, q.db(), q.d.table(t.name), lo, hi, ids)
}

// existingIDsIn answers existingIDs from table (quoted) over db.
func existingIDsIn(ctx context.Context, db *sql.DB, table string, lo, hi int64, ids map[string]bool) (map[string]bool, error) {
	have := map[string]bool{}
	err := eachRow(ctx, db, fmt.Sprintf("SELECT id FROM %s WHERE start_ns >= ? AND start_ns <= ?", table), []any{lo, hi},
		func(rows *sql.Rows) error {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			if ids[id] {
				have[id] = true
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return have, nil
}

// queryAll runs query and returns what scan makes of each row.
func queryAll[T any](ctx context.Context, db *sql.DB, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	var out []T
	err := eachRow(ctx, db, query, args, func(rows *sql.Rows) error {
		v, err := scan(rows)
		if err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// marks is n comma-separated placeholders.
func marks(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// eachRow runs query and calls fn on each row; it closes the rows.
func eachRow(ctx context.Context, db *sql.DB, query string, args []any, fn func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

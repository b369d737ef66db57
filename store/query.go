package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// dialect holds the few spellings in which ClickHouse 18.16 and DuckDB
// differ. Everything else in the queries is one text, so that both engines
// compute the same integers.
type dialect struct {
	table   func(name string) string
	intDiv  func(a, b string) string
	bitAnd  func(a string, mask int) string
	boolInt func(cond string) string
	sum     func(x string) string // int64, 0 on no rows
	strpos  string                // position(haystack, needle), 1-based, 0 = absent
	ln      string                // natural logarithm
	// pairsText aggregates integer columns b and c into "b:c,b:c,..."
	pairsText func(b, c string) string
	elem      string // 1-based array element
	// addsBools: comparisons are integers that can be added directly.
	addsBools bool
	// pct selects group columns, n and the list of exact quantiles of col.
	// hist, if set, replaces the comparison-sum bucket expression: it
	// returns SQL selecting (group columns..., key, count), the groups
	// being sel ("expr AS name, ...") grouped by by ("name, ..."), and
	// maps a key to a bucket, or "" when it has no faster form for these
	// edges.
	hist func(from, where, col string, edges []int64, sel, by string) (string, []any, func(int64) int)
	// discrete, if set, is the engine's quantile aggregate over col at the
	// given levels with nearest-rank semantics (index ceil(q*n)-1); used
	// for Percentiles with per-class levels that pick our index exactly.
	discrete func(col string, levels []string) string
	// groups are "expr AS name" pairs: exprs[i] named names[i].
	pct func(from, where string, exprs, names []string, col string, qs []float64) string
	// pairKey, if set, groups by a pair of strings faster than the pair:
	// it returns the select list of the two, the group key and the order
	// of the two.
	pairKey func(a, b string) (sel, group, order string)
	// pruneRollups, if set, deletes the rollup rows of kind in rs older
	// than version (best effort: readers keep the newest anyway).
	// ClickHouse's ReplacingMergeTree(version) does this in its merges.
	pruneRollups func(ctx context.Context, q *querier, kind string, rs []TimeRange, version int64)
}

func chBoolInt(c string) string   { return "toInt64(" + c + ")" }
func duckBoolInt(c string) string { return "CAST(" + c + " AS BIGINT)" }

func formatQ(q float64) string { return strconv.FormatFloat(q, 'g', -1, 64) }

var chDialect = func(db string) dialect {
	d := dialect{
		table:   func(n string) string { return "`" + db + "`." + n },
		intDiv:  func(a, b string) string { return "intDiv(" + a + ", " + b + ")" },
		bitAnd:  func(a string, m int) string { return "bitAnd(" + a + ", " + strconv.Itoa(m) + ")" },
		boolInt: func(c string) string { return "toInt64(" + c + ")" },
		sum:     func(x string) string { return "toInt64(sum(" + x + "))" },
		strpos:  "position",
		ln:      "log",
		// 18.16 groups a pair of strings by serialising it; their 64-bit
		// hash is a number (top URLs over 10M: 317 -> 237 ms). Two pairs
		// would share a row only on a hash collision (~n^2/2^65).
		pairKey: func(a, b string) (string, string, string) {
			return "any(" + a + ") AS pa, any(" + b + ") AS pb", "cityHash64(" + a + ", " + b + ")", "pa ASC, pb ASC"
		},
		pairsText: func(b, c string) string {
			return "arrayStringConcat(groupArray(concat(toString(" + b + "), ':', toString(" + c + "))), ',')"
		},
		elem:      "arrayElement",
		addsBools: true,
		pct: func(from, where string, exprs, names []string, col string, qs []float64) string {
			levels := make([]string, len(qs))
			for i, q := range qs {
				levels[i] = formatQ(q)
			}
			g := strings.Join(names, ", ")
			return fmt.Sprintf("SELECT %s, count() AS n, quantilesExact(%s)(%s) AS qs FROM %s WHERE %s GROUP BY %s ORDER BY %s",
				aliased(exprs, names), strings.Join(levels, ", "), col, from, where, g, g)
		},
	}
	d.hist = func(from, where, col string, edges []int64, sel, by string) (string, []any, func(int64) int) {
		return logHist(d.boolInt, d.ln, d.elem, from, where, col, edges, sel, by)
	}
	return d
}

var duckDialect = dialect{
	discrete: func(col string, levels []string) string {
		return "quantile_disc(" + col + ", [" + strings.Join(levels, ", ") + "])"
	},
	// DuckDB's histogram(v, boundaries) counts v into the first boundary
	// >= v (one binary search per value, instead of one comparison per
	// edge). For integers v < e  <=>  v <= e-1, so boundaries e[i+1]-1
	// give exactly bucket i = [e[i], e[i+1]); values past the last
	// boundary land in its overflow key, our open last bucket.
	hist: func(from, where, col string, edges []int64, sel, by string) (string, []any, func(int64) int) {
		// Integer literals, not parameters: they are int64s formatted here
		// (nothing to inject), and binding 1600 parameters cost more than
		// the query over a few minutes of records.
		marks := make([]string, len(edges)-1)
		idx := make(map[int64]int, len(edges))
		for i := range marks {
			marks[i] = strconv.FormatInt(edges[i+1]-1, 10)
			idx[edges[i+1]-1] = i
		}
		last := len(edges) - 1
		sqlText := fmt.Sprintf("SELECT %s, unnest(map_keys(h)) AS k, unnest(map_values(h)) AS c FROM (SELECT %s, histogram(%s, CAST([%s] AS BIGINT[])) AS h FROM %s WHERE %s GROUP BY %s) ORDER BY %s",
			by, sel, col, strings.Join(marks, ", "), from, where, by, by)
		return sqlText, nil, func(k int64) int {
			if i, ok := idx[k]; ok {
				return i
			}
			return last
		}
	},
	table: func(n string) string { return n },
	pruneRollups: func(ctx context.Context, q *querier, kind string, rs []TimeRange, version int64) {
		for _, r := range rs {
			q.db.ExecContext(ctx, "DELETE FROM rollups WHERE kind = ? AND minute >= ? AND minute < ? AND version < ?", kind, r.From, r.To, version)
		}
	},
	intDiv:  func(a, b string) string { return "(" + a + " // " + b + ")" },
	bitAnd:  func(a string, m int) string { return "(" + a + " & " + strconv.Itoa(m) + ")" },
	boolInt: duckBoolInt,
	sum:     func(x string) string { return "CAST(coalesce(sum(" + x + "), 0) AS BIGINT)" },
	strpos:  "strpos",
	ln:      "ln",
	pairsText: func(b, c string) string {
		return "string_agg(CAST(" + b + " AS VARCHAR) || ':' || CAST(" + c + " AS VARCHAR), ',')"
	},
	elem: "list_element",
	pct: func(from, where string, exprs, names []string, col string, qs []float64) string {
		// ClickHouse's quantileExact index, min(floor(q*n), n-1), in float64.
		picks := make([]string, len(qs))
		for i, q := range qs {
			picks[i] = fmt.Sprintf("s[LEAST(CAST(floor(CAST(%s AS DOUBLE) * n) AS BIGINT), n - 1) + 1]", formatQ(q))
		}
		g := strings.Join(names, ", ")
		return fmt.Sprintf("SELECT %s, n, [%s] AS qs FROM (SELECT %s, count(*) AS n, list_sort(list(%s)) AS s FROM %s WHERE %s GROUP BY %s) ORDER BY %s",
			g, strings.Join(picks, ", "), aliased(exprs, names), col, from, where, g, g)
	},
}

// logHist computes the bucket of log-spaced edges (as made by LogEdges)
// from a logarithm instead of one comparison per edge (ClickHouse 18.16:
// 515 -> ~330 ms for 100 edges over 10M rows; DuckDB's binary-searching
// histogram() is faster than this there, 127 vs 234 ms).
// The float guess is corrected by one exact integer comparison with each
// neighbouring edge, so the answer is the comparison-sum's exactly:
// rounding in LogEdges moves an edge by less than 1 ns, far less than a
// bucket, so the guess is never off by more than one. Other edges return
// "" (the caller's generic form).
func logHist(boolInt func(string) string, ln, elem, from, where, col string, edges []int64, sel, by string) (string, []any, func(int64) int) {
	m := len(edges)
	if m < 3 || edges[0] != 0 || !slices.Equal(LogEdges(edges[1], edges[m-1], m-2), edges) {
		return "", nil, nil
	}
	guess, fixed := logBucket(boolInt, ln, elem, col, edges)
	sqlText := fmt.Sprintf("SELECT %s, %s AS b, count(*) AS c FROM (SELECT %s, %s, %s AS b0 FROM %s WHERE %s) GROUP BY %s, b ORDER BY %s, b",
		by, fixed, sel, col, guess, from, where, by, by)
	return sqlText, nil, func(b int64) int { return int(b) }
}

// logBucket is logHist's bucket of col for edges made by LogEdges: guess
// (to be selected AS b0) and fixed, its exact correction (reads b0).
func logBucket(boolInt func(string) string, ln, elem, col string, edges []int64) (guess, fixed string) {
	m := len(edges)
	lo := edges[1]
	logR := math.Log(float64(edges[m-1])/float64(lo)) / float64(m-2)
	arr := make([]string, 0, m+1)
	for _, e := range edges {
		arr = append(arr, strconv.FormatInt(e, 10))
	}
	// Sentinel: the upper neighbour of the last bucket is never reached.
	arr = append(arr, strconv.FormatInt(math.MaxInt64, 10))
	e := "[" + strings.Join(arr, ", ") + "]"
	last := strconv.Itoa(m - 1)
	// Bucket b (0-based) is [edges[b], edges[b+1]) = [e[b+1], e[b+2]) in
	// 1-based SQL arrays; bucket 0 also takes values below 0.
	guess = fmt.Sprintf("CAST(least(greatest(floor(%s(greatest(%s, 1) / %d) / %s) + 1, 0), %s) AS BIGINT)",
		ln, col, lo, strconv.FormatFloat(logR, 'g', -1, 64), last)
	fixed = fmt.Sprintf("greatest(least(b0 - %s + %s, %s), 0)",
		boolInt(fmt.Sprintf("%s < %s(%s, b0 + 1)", col, elem, e)), boolInt(fmt.Sprintf("%s >= %s(%s, b0 + 2)", col, elem, e)), last)
	return guess, fixed
}

func aliased(exprs, names []string) string {
	out := make([]string, len(exprs))
	for i := range exprs {
		out[i] = exprs[i] + " AS " + names[i]
	}
	return strings.Join(out, ", ")
}

type querier struct {
	db *sql.DB
	d  dialect
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
	c, ok := componentColumns[k][comp]
	if !ok {
		return "", fmt.Errorf("component %q not valid for %s (want one of %v)", comp, k, Components(k))
	}
	return c, nil
}

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
	rows, err := q.db.QueryContext(ctx, sqlText, append(bargs, w.args...)...)
	if err != nil {
		return nil, fmt.Errorf("histogram query: %w", err)
	}
	defer rows.Close()
	var out []ClassHistogram
	for rows.Next() {
		var class string
		var b, c int64
		if err := rows.Scan(&class, &b, &c); err != nil {
			return nil, fmt.Errorf("histogram scan: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].Class != class {
			out = append(out, ClassHistogram{Class: class, Edges: hq.Edges, Counts: make([]int64, len(hq.Edges))})
		}
		h := &out[len(out)-1]
		h.Counts[bucketOf(b)] += c
		h.Total += c
	}
	return out, rows.Err()
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
	w := baseWhere(pq.Range, pq.Class)
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
	rows, err := q.db.QueryContext(ctx, sqlText, args...)
	if err != nil {
		return nil, fmt.Errorf("percentile query: %w", err)
	}
	defer rows.Close()
	var out []SeriesPoint
	for rows.Next() {
		var p SeriesPoint
		var vals int64List
		dest := []any{&p.Class}
		if series {
			dest = append(dest, &p.T)
		}
		dest = append(dest, &p.Count, &vals)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("percentile scan: %w", err)
		}
		p.Values = []int64(vals)
		out = append(out, p)
	}
	return out, rows.Err()
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
	w := baseWhere(pq.Range, pq.Class)
	tbl := q.d.table(t.name)
	rows, err := q.db.QueryContext(ctx, fmt.Sprintf("SELECT class, count(*) FROM %s WHERE %s GROUP BY class ORDER BY class", tbl, w), w.args...)
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
	err = q.db.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s", strings.Join(aggs, ", "), tbl, w), append(args, w.args...)...).Scan(dest...)
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
	w := baseWhere(pq.Range, pq.Class)
	tbl := q.d.table(t.name)
	// Without series, t is a constant 0 and groups are classes.
	group, by := "0", "class"
	if series {
		b := strconv.FormatInt(int64(pq.Bucket), 10)
		group, by = q.d.intDiv("start_ns", b)+" * "+b, "class, t"
	}
	rows, err := q.db.QueryContext(ctx, fmt.Sprintf("SELECT class, %s AS t, count(*) AS n FROM %s WHERE %s GROUP BY %s ORDER BY %s", group, tbl, w, by, by), w.args...)
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
	rows, err = q.db.QueryContext(ctx, fmt.Sprintf("SELECT class, %s AS t, count(*) AS n, %s AS qs FROM %s WHERE %s GROUP BY %s ORDER BY %s",
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

func (q *querier) Search(ctx context.Context, sq SearchQuery) (SearchResult, error) {
	var res SearchResult
	k, t, err := kindTable(sq.Kind)
	if err != nil {
		return res, err
	}
	w := baseWhere(sq.Range, sq.Class)
	if sq.Client != "" {
		cond, args, err := clientCond(sq.Client)
		if err != nil {
			return res, err
		}
		w.add(cond, args...)
	}
	if sq.URLContains != "" {
		w.add(q.d.strpos+"(url, ?) > 0", sq.URLContains)
	}
	if sq.Status != 0 {
		w.add("status = ?", sq.Status)
	}
	if sq.MinTotal > 0 {
		w.add("total >= ?", sq.MinTotal)
	}
	if sq.Limit <= 0 {
		sq.Limit = 50
	}
	if sq.Limit > 10000 {
		sq.Limit = 10000
	}
	if sq.Offset < 0 {
		sq.Offset = 0
	}
	tbl := q.d.table(t.name)
	if err := q.db.QueryRowContext(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE %s", tbl, w), w.args...).Scan(&res.Total); err != nil {
		return res, fmt.Errorf("search count: %w", err)
	}
	// Two steps: order and page over (start_ns, id) only, then read whole
	// rows for that page. 18.16 has no lazy column reads, so one step would
	// read every column of every match before the LIMIT.
	rows, err := q.db.QueryContext(ctx, fmt.Sprintf("SELECT id, start_ns FROM %s WHERE %s ORDER BY start_ns DESC, id ASC LIMIT ? OFFSET ?", tbl, w),
		append(w.args, sq.Limit, sq.Offset)...)
	if err != nil {
		return res, fmt.Errorf("search: %w", err)
	}
	var ids []string
	pos := map[string]int{}
	var lo, hi int64
	for rows.Next() {
		var id string
		var st int64
		if err := rows.Scan(&id, &st); err != nil {
			rows.Close()
			return res, fmt.Errorf("search: %w", err)
		}
		if len(ids) == 0 {
			lo, hi = st, st
		}
		lo, hi = min(lo, st), max(hi, st)
		pos[id] = len(ids)
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("search: %w", err)
	}
	if len(ids) == 0 {
		return res, nil
	}
	args := []any{lo, hi}
	for _, id := range ids {
		args = append(args, id)
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
	rows, err = q.db.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE start_ns >= ? AND start_ns <= ? AND id IN (%s)", t.selectList(), tbl, marks), args...)
	if err != nil {
		return res, fmt.Errorf("search rows: %w", err)
	}
	defer rows.Close()
	txs := make([]*reconstruct.Transaction, len(ids))
	pvs := make([]*pageview.Pageview, len(ids))
	for rows.Next() {
		var sensor string
		if k == Transactions {
			tx, err := scanTx(rows, &sensor)
			if err != nil {
				return res, err
			}
			txs[pos[tx.ID]] = tx
		} else {
			pv, err := scanPv(rows, &sensor)
			if err != nil {
				return res, err
			}
			pvs[pos[pv.ID]] = pv
		}
	}
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("search rows: %w", err)
	}
	for i := range ids {
		if k == Transactions && txs[i] != nil {
			res.Transactions = append(res.Transactions, txs[i])
		}
		if k == Pageviews && pvs[i] != nil {
			res.Pageviews = append(res.Pageviews, pvs[i])
		}
	}
	return res, nil
}

func (q *querier) PageviewByID(ctx context.Context, id string) (*PageviewDetail, error) {
	var sensor string
	row := q.db.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE id = ? LIMIT 1", pvTable.selectList(), q.d.table(pvTable.name)), id)
	pv, err := scanPv(row, &sensor)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("pageview %q: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("pageview %q: %w", id, err)
	}
	det := &PageviewDetail{Pageview: pv}
	// Exact membership: the pageview stage stamps every transaction it
	// forwards with its pageview id. No time or client window is added,
	// because an object's transaction may start before the pageview does
	// (a connection opened in advance) and a window would silently drop it.
	rows, err := q.db.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE pageview_id = ? ORDER BY start_ns, id",
		txTable.selectList(), q.d.table(txTable.name)), pv.ID)
	if err != nil {
		return nil, fmt.Errorf("pageview transactions: %w", err)
	}
	connIDs := map[string]bool{}
	for rows.Next() {
		tx, err := scanTx(rows, &sensor)
		if err != nil {
			rows.Close()
			return nil, err
		}
		det.Transactions = append(det.Transactions, tx)
		connIDs[tx.ConnectionID] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pageview transactions: %w", err)
	}
	if len(connIDs) == 0 {
		return det, nil
	}
	ids := make([]string, 0, len(connIDs))
	for id := range connIDs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err = q.db.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE id IN (%s) ORDER BY start_ns, id",
		connTable.selectList(), q.d.table(connTable.name), marks), args...)
	if err != nil {
		return nil, fmt.Errorf("pageview connections: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		c, err := scanConn(rows, &sensor)
		if err != nil {
			return nil, err
		}
		det.Connections = append(det.Connections, c)
	}
	return det, rows.Err()
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

package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
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
	// than version that also match also (the sensors recomputed).
	// Readers keep the newest anyway, so a failure costs space, not
	// answers. ClickHouse's ReplacingMergeTree(version) does this in its
	// merges.
	pruneRollups func(ctx context.Context, db *sql.DB, kind string, rs []TimeRange, version int64, also *where) error
}

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
	pruneRollups: func(ctx context.Context, db *sql.DB, kind string, rs []TimeRange, version int64, also *where) error {
		for _, r := range rs {
			w := &where{}
			w.add("kind = ?", kind)
			w.add("minute >= ?", r.From)
			w.add("minute < ?", r.To)
			w.add("version < ?", version)
			w.conds = append(w.conds, also.conds...)
			w.args = append(w.args, also.args...)
			if _, err := db.ExecContext(ctx, "DELETE FROM rollups WHERE "+w.String(), w.args...); err != nil {
				return fmt.Errorf("prune %s rollups: %w", kind, err)
			}
		}
		return nil
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

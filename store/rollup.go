package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
)

// Per-minute rollups let the overview answer over millions of records
// without scanning them: on ClickHouse 18.16 with 2 cores the overview's
// ten scans of 10M rows cost 2 s, while a day of rollups is ~1440 rows per
// class and kind.
//
// A rollup row is a pure function of the raw rows of one (kind, minute,
// class): their count, first and last start, minimum and maximum total,
// the exact sums that the breakdown and the counters need, and a histogram
// of total over RollupEdges. It is recomputed from the raw table, never
// accumulated, so it is right whatever happened before:
//   - the writer recomputes the minutes a batch touched after inserting it;
//     a failed recompute fails the batch, which is retried (its records are
//     then duplicates, but its minutes are recomputed all the same);
//   - rows carry the time of their computation as version and readers keep
//     the newest, so two recomputes racing leave the later one, which read
//     everything the earlier one did;
//   - a reader compares each range's raw count with the rollups' and
//     recomputes the minutes that differ (a crash between insert and
//     recompute, a store written before rollups existed, a batch in flight).
//
// Counts, sums, counters and histograms on RollupEdges' grid are exact.
// Percentiles are not: each is the geometric middle of the fine bucket
// holding the contract's index (see PercentileQuery), clamped to the
// group's minimum and maximum, within RollupRelError of the exact value
// (or 1 µs below 1 µs).

// rollupGrain is the rollups' time step.
const rollupGrain = int64(time.Minute)

// RollupEdges are the rollups' histogram buckets: 160 per decade from 1 µs
// to 10^4 s. Every 8th edge from 1 ms is LogEdges(1ms, 100s, 100)'s, so the
// overview's histogram is exact from rollups (TestOverviewEdgesOnRollupGrid).
var RollupEdges = LogEdges(int64(time.Microsecond), 1e13, 1600)

// RollupRelError bounds a rollup percentile's relative error for values of
// at least 1 µs: half a bucket, geometrically (0.72%), plus the rounding of
// the integer edges near 1 µs: 0.76%.
var RollupRelError = func() float64 {
	worst := 0.0
	for b := 1; b < len(RollupEdges)-1; b++ {
		lo, hi := RollupEdges[b], RollupEdges[b+1]-1 // integer values of bucket b
		est := float64(RollupEstimate(b, 0, math.MaxInt64))
		worst = max(worst, (est-float64(lo))/float64(lo), (float64(hi)-est)/float64(hi))
	}
	return worst
}()

var rollupTable = table{"rollups", cols(`day:d kind:s minute:i64 class:s version:i64 n:i64 first_ns:i64 last_ns:i64 lo:i64 hi:i64 sums:s hist:s`)}

// rollupKind is one raw table's rollup: the named sums it keeps.
type rollupKind struct {
	name  string // the kind column
	t     table
	hist  bool     // histogram of total
	names []string // sums, in select order
	exprs []string
}

// rollupKinds lists the kinds in a fixed order: transactions, pageviews,
// connections. The sums are also the raw Counters query's.
func rollupKinds(d dialect) []rollupKind {
	flag := func(f reconstruct.Flags) string { return d.sum(d.boolInt(d.bitAnd("flags", int(f)) + " != 0")) }
	var tx, pv rollupKind
	tx = rollupKind{name: "tx", t: txTable, hist: true}
	for _, c := range Components(Transactions) {
		tx.names = append(tx.names, c)
		tx.exprs = append(tx.exprs, d.sum(componentColumn(c)))
	}
	tx.names = append(tx.names, "retrans_bytes", "with_retrans", "incomplete", "no_response", "server_errors")
	tx.exprs = append(tx.exprs, d.sum("retrans_bytes"), d.sum(d.boolInt("retrans_bytes > 0")), flag(reconstruct.FlagIncomplete),
		flag(reconstruct.FlagNoResponse), d.sum(d.boolInt("status >= 500")))
	pv = rollupKind{name: "pv", t: pvTable, hist: true}
	for _, c := range Components(Pageviews) {
		pv.names = append(pv.names, c)
		pv.exprs = append(pv.exprs, d.sum(componentColumn(c)))
	}
	pv.names = append(pv.names, "incomplete")
	pv.exprs = append(pv.exprs, flag(reconstruct.FlagIncomplete))
	conn := rollupKind{name: "conn", t: connTable,
		names: []string{"syn_losses", "synack_losses", "syn_loss_gap", "synack_loss_gap", "retrans_bytes", "with_retrans", "incomplete", "reset"},
		exprs: []string{d.sum("syn_losses"), d.sum("synack_losses"), d.sum("syn_loss_gap"), d.sum("synack_loss_gap"),
			d.sum("retrans_bytes"), d.sum(d.boolInt("retrans_bytes > 0")), flag(reconstruct.FlagIncomplete), flag(reconstruct.FlagReset)}}
	return []rollupKind{tx, pv, conn}
}

func rollupKindOf(d dialect, t table) (rollupKind, error) {
	for _, rk := range rollupKinds(d) {
		if rk.t.name == t.name {
			return rk, nil
		}
	}
	return rollupKind{}, fmt.Errorf("no rollup for table %s", t.name)
}

// addCounters adds one kind's count and sums to c.
func addCounters(c *Counters, kind string, n int64, s map[string]int64) {
	switch kind {
	case "tx":
		c.Transactions += n
		c.TxRetransBytes += s["retrans_bytes"]
		c.TxWithRetrans += s["with_retrans"]
		c.IncompleteTx += s["incomplete"]
		c.NoResponseTx += s["no_response"]
		c.ServerErrors += s["server_errors"]
	case "pv":
		c.Pageviews += n
		c.IncompletePageviews += s["incomplete"]
	case "conn":
		c.Connections += n
		c.SYNLosses += s["syn_losses"]
		c.SYNACKLosses += s["synack_losses"]
		c.SYNLossGap += s["syn_loss_gap"]
		c.SYNACKLossGap += s["synack_loss_gap"]
		c.ConnRetransBytes += s["retrans_bytes"]
		c.ConnsWithRetrans += s["with_retrans"]
		c.IncompleteConnections += s["incomplete"]
		c.ResetConnections += s["reset"]
	}
}

type rollupKey struct {
	minute int64
	class  string
}

// rollupRow is one (minute, class) of one kind.
type rollupRow struct {
	version        int64
	n, first, last int64
	lo, hi         int64 // min and max total
	sums           map[string]int64
	hist           []bucketCount // by bucket, ascending
}

// bucketCount is one non-empty RollupEdges bucket.
type bucketCount struct {
	b int
	c int64
}

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

// computeRollups aggregates the raw rows of rs by minute and class.
func (q *querier) computeRollups(ctx context.Context, rk rollupKind, rs []TimeRange) (map[rollupKey]*rollupRow, error) {
	out := map[rollupKey]*rollupRow{}
	if len(rs) == 0 {
		return out, nil
	}
	d := q.d
	tbl := d.table(rk.t.name)
	w := rangesWhere(rs)
	m := d.intDiv("start_ns", strconv.FormatInt(rollupGrain, 10))
	lohi := "0, 0"
	if rk.hist {
		lohi = "min(total), max(total)"
	}
	sqlText := fmt.Sprintf("SELECT %s AS m, class, count(*), min(start_ns), max(start_ns), %s, %s FROM %s WHERE %s GROUP BY m, class",
		m, lohi, strings.Join(rk.exprs, ", "), tbl, w)
	rows, err := q.db.QueryContext(ctx, sqlText, w.args...)
	if err != nil {
		return nil, fmt.Errorf("rollup %s: %w", rk.t.name, err)
	}
	vals := make([]int64, len(rk.exprs))
	for rows.Next() {
		var k rollupKey
		r := &rollupRow{sums: make(map[string]int64, len(rk.names))}
		dest := []any{&k.minute, &k.class, &r.n, &r.first, &r.last, &r.lo, &r.hi}
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
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rollup %s: %w", rk.t.name, err)
	}
	if !rk.hist || len(out) == 0 {
		return out, nil
	}
	// The buckets are counted per (minute, class, bucket) and each
	// (minute, class) returns its pairs as one text: shipping the ~150
	// rows per minute and class to Go instead cost more than the query.
	guess, fixed := logBucket(d.boolInt, d.ln, d.elem, "total", RollupEdges)
	sqlText = fmt.Sprintf("SELECT m, class, %s FROM (SELECT m, class, %s AS b, count(*) AS c FROM (SELECT %s AS m, class, total, %s AS b0 FROM %s WHERE %s) GROUP BY m, class, b) GROUP BY m, class",
		d.pairsText("b", "c"), fixed, m, guess, tbl, w)
	rows, err = q.db.QueryContext(ctx, sqlText, w.args...)
	if err != nil {
		return nil, fmt.Errorf("rollup histogram %s: %w", rk.t.name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k rollupKey
		var text string
		if err := rows.Scan(&k.minute, &k.class, &text); err != nil {
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
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rollup histogram %s: %w", rk.t.name, err)
	}
	return out, nil
}

// versionClock gives a store's rollup recomputes their versions: the wall
// clock in ns, strictly increasing where the clock repeats a value.
type versionClock struct{ last atomic.Int64 }

func (c *versionClock) next() int64 {
	for {
		old := c.last.Load()
		v := max(time.Now().UnixNano(), old+1)
		if c.last.CompareAndSwap(old, v) {
			return v
		}
	}
}

// refreshRollups recomputes the whole minutes rs (aligned to rollupGrain)
// of t and stores them. gone lists keys whose raw rows no longer exist; they
// get an empty row so that readers stop counting them.
func (q *querier) refreshRollups(ctx context.Context, t table, rs []TimeRange, gone []rollupKey) error {
	if len(rs) == 0 {
		return nil
	}
	rk, err := rollupKindOf(q.d, t)
	if err != nil {
		return err
	}
	version := q.versions.next() // before reading: a later insert gets a later recompute
	rows, err := q.computeRollups(ctx, rk, rs)
	if err != nil {
		return err
	}
	return q.storeRollups(ctx, rk, rs, rows, gone, version)
}

// storeRollups writes rows (computed over the whole minutes rs, reading
// after version was taken) and an empty row for each key of gone that has
// none.
func (q *querier) storeRollups(ctx context.Context, rk rollupKind, rs []TimeRange, rows map[rollupKey]*rollupRow, gone []rollupKey, version int64) error {
	for _, k := range gone {
		if rows[k] == nil {
			rows[k] = &rollupRow{}
		}
	}
	if err := insertRollups(ctx, q.ins, rk, rk.name, rows, version); err != nil {
		return err
	}
	// A failed prune leaves older rows that readers skip; the hours are
	// still refreshed, and the failure is returned for the counters.
	pruneErr := q.pruneRollups(ctx, rk.name, rs, version)
	keys := make([]rollupKey, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	return errors.Join(pruneErr, q.refreshHours(ctx, rk, keys))
}

// pruneRollups deletes the rows of kind in rs older than version, where
// the engine does not do so itself.
func (q *querier) pruneRollups(ctx context.Context, kind string, rs []TimeRange, version int64) error {
	if q.d.pruneRollups == nil {
		return nil
	}
	return q.d.pruneRollups(ctx, q.db, kind, rs, version)
}

// rollupHour is the coarser level: an hour row merges the hour's minute
// rows, so that a month's overview reads ~720 rows per class and kind
// instead of ~43,000 (a day of transaction minutes is ~9 MB of text).
const rollupHour = int64(time.Hour)

func hourKind(kind string) string { return kind + "h" }

// refreshHours recomputes, from their minute rows, the hour rows of the
// hours that keys' minutes fall in.
func (q *querier) refreshHours(ctx context.Context, rk rollupKind, keys []rollupKey) error {
	set := map[int64]bool{}
	for _, k := range keys {
		set[floorDiv(k.minute, rollupHour)] = true
	}
	if len(set) == 0 {
		return nil
	}
	hours := make([]int64, 0, len(set))
	for h := range set {
		hours = append(hours, h)
	}
	sort.Slice(hours, func(i, j int) bool { return hours[i] < hours[j] })
	version := q.versions.next() // before reading the minutes, as for them
	for i := 0; i < len(hours); {
		j := i + 1
		for j < len(hours) && hours[j] == hours[j-1]+1 {
			j++
		}
		run := TimeRange{From: hours[i] * rollupHour, To: (hours[j-1] + 1) * rollupHour}
		i = j
		minutes, err := q.readRollups(ctx, rk.name, run.From, run.To)
		if err != nil {
			return err
		}
		old, err := q.readRollups(ctx, hourKind(rk.name), run.From, run.To)
		if err != nil {
			return err
		}
		agg := map[rollupKey]*rollupRow{}
		for k, r := range minutes {
			if r.n == 0 {
				continue
			}
			hk := rollupKey{floorDiv(k.minute, rollupHour) * rollupHour, k.class}
			if agg[hk] == nil {
				agg[hk] = &rollupRow{sums: map[string]int64{}}
			}
			agg[hk].merge(r)
		}
		for k := range old {
			if agg[k] == nil {
				agg[k] = &rollupRow{} // its minutes are gone
			}
		}
		if err := insertRollups(ctx, q.ins, rk, hourKind(rk.name), agg, version); err != nil {
			return err
		}
		if err := q.pruneRollups(ctx, hourKind(rk.name), []TimeRange{run}, version); err != nil {
			return err
		}
	}
	return nil
}

// merge adds r's records to a.
func (a *rollupRow) merge(r *rollupRow) {
	a.mergeTotals(r)
	idx := make(map[int]int, len(a.hist))
	for i, x := range a.hist {
		idx[x.b] = i
	}
	for _, x := range r.hist {
		if i, ok := idx[x.b]; ok {
			a.hist[i].c += x.c
			continue
		}
		idx[x.b] = len(a.hist)
		a.hist = append(a.hist, x)
	}
}

// mergeTotals adds r's count, extremes and sums to a (a.sums not nil).
func (a *rollupRow) mergeTotals(r *rollupRow) {
	if a.n == 0 || r.first < a.first {
		a.first = r.first
	}
	if a.n == 0 || r.last > a.last {
		a.last = r.last
	}
	if a.n == 0 || r.lo < a.lo {
		a.lo = r.lo
	}
	if a.n == 0 || r.hi > a.hi {
		a.hi = r.hi
	}
	a.n += r.n
	for k, v := range r.sums {
		a.sums[k] += v
	}
}

// insertRollups writes rows of kind (rk's sums) with version.
func insertRollups(ctx context.Context, ins inserter, rk rollupKind, kind string, rows map[rollupKey]*rollupRow, version int64) error {
	if len(rows) == 0 {
		return nil
	}
	keys := make([]rollupKey, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].minute != keys[j].minute {
			return keys[i].minute < keys[j].minute
		}
		return keys[i].class < keys[j].class
	})
	cs := newColSet(rollupTable, len(rows))
	for _, k := range keys {
		r := rows[k]
		cs.next()
		cs.Day(k.minute)
		cs.Str(kind)
		cs.I64(k.minute)
		cs.Str(k.class)
		cs.I64(version)
		for _, v := range []int64{r.n, r.first, r.last, r.lo, r.hi} {
			cs.I64(v)
		}
		cs.Str(encodeSums(rk.names, r.sums))
		cs.Str(encodeHist(r.hist))
	}
	cs.done()
	if err := ins.insert(ctx, cs); err != nil {
		return fmt.Errorf("rollups of %s: %w", rk.t.name, err)
	}
	return nil
}

// encodeSums writes name=value pairs: readable in the table, and a sum
// added later reads as absent (0) in old rows rather than as another's.
func encodeSums(names []string, s map[string]int64) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(s[n], 10))
	}
	return b.String()
}

func decodeSums(s string) (map[string]int64, error) {
	out := map[string]int64{}
	if s == "" {
		return out, nil
	}
	for _, f := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(f, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("rollup sums %q: bad field %q", s, f)
		}
		out[k] = n
	}
	return out, nil
}

// encodeHist writes the non-empty buckets as bucket:count pairs.
func encodeHist(h []bucketCount) string {
	var sb strings.Builder
	for i, x := range h {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(x.b))
		sb.WriteByte(':')
		sb.WriteString(strconv.FormatInt(x.c, 10))
	}
	return sb.String()
}

// decodeHist appends the pairs of s to dst. It is on the overview's path
// (a day is ~4000 rows of ~150 pairs each), hence no splitting.
func decodeHist(dst []bucketCount, s string) ([]bucketCount, error) {
	bad := func() ([]bucketCount, error) { return dst, fmt.Errorf("rollup histogram %.40q: malformed", s) }
	if s != "" {
		dst = slices.Grow(dst, strings.Count(s, ",")+1)
	}
	for i := 0; i < len(s); {
		var b, c int64
		j := i
		for ; j < len(s) && s[j] >= '0' && s[j] <= '9'; j++ {
			b = b*10 + int64(s[j]-'0')
		}
		if j == i || j-i > 6 || j >= len(s) || s[j] != ':' || b >= int64(len(RollupEdges)) {
			return bad()
		}
		k := j + 1
		for j = k; j < len(s) && s[j] >= '0' && s[j] <= '9'; j++ {
			c = c*10 + int64(s[j]-'0')
		}
		if j == k || j-k > 18 || (j < len(s) && s[j] != ',') {
			return bad()
		}
		dst = append(dst, bucketCount{int(b), c})
		i = j + 1
	}
	return dst, nil
}

// readRollups returns the newest row of each (minute, class) of kind with
// minute in [from, to) (to 0: no bound).
func (q *querier) readRollups(ctx context.Context, kind string, from, to int64) (map[rollupKey]*rollupRow, error) {
	w := &where{}
	w.add("kind = ?", kind)
	if from != 0 {
		w.add("minute >= ?", from)
	}
	if to != 0 {
		w.add("minute < ?", to)
	}
	rows, err := q.db.QueryContext(ctx, fmt.Sprintf("SELECT minute, class, version, n, first_ns, last_ns, lo, hi, sums, hist FROM %s WHERE %s",
		q.d.table(rollupTable.name), w), w.args...)
	if err != nil {
		return nil, fmt.Errorf("read rollups: %w", err)
	}
	defer rows.Close()
	// Newest version first, texts decoded only for the winners.
	type raw struct {
		rollupRow
		sums, hist string
	}
	newest := map[rollupKey]*raw{}
	for rows.Next() {
		var k rollupKey
		var r raw
		if err := rows.Scan(&k.minute, &k.class, &r.version, &r.n, &r.first, &r.last, &r.lo, &r.hi, &r.sums, &r.hist); err != nil {
			return nil, fmt.Errorf("read rollups: %w", err)
		}
		if old := newest[k]; old != nil && old.version >= r.version {
			continue
		}
		newest[k] = &r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read rollups: %w", err)
	}
	out := make(map[rollupKey]*rollupRow, len(newest))
	for k, r := range newest {
		row := r.rollupRow
		if row.sums, err = decodeSums(r.sums); err != nil {
			return nil, err
		}
		if row.hist, err = decodeHist(nil, r.hist); err != nil {
			return nil, err
		}
		out[k] = &row
	}
	return out, nil
}

// minuteRuns turns record start times into runs of whole minutes, at most
// maxRuns of them (the closest runs are merged: recomputing a few minutes
// that did not change is cheaper than a query with hundreds of ranges).
func minuteRuns(starts []int64, maxRuns int) []TimeRange {
	if len(starts) == 0 {
		return nil
	}
	ms := make([]int64, len(starts))
	for i, s := range starts {
		ms[i] = floorDiv(s, rollupGrain)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i] < ms[j] })
	var runs [][2]int64 // [first, last] minute index
	for _, m := range ms {
		if n := len(runs); n > 0 && m <= runs[n-1][1]+1 {
			runs[n-1][1] = max(runs[n-1][1], m)
			continue
		}
		runs = append(runs, [2]int64{m, m})
	}
	for gap := int64(2); len(runs) > maxRuns; gap *= 2 {
		merged := runs[:1]
		for _, r := range runs[1:] {
			if last := &merged[len(merged)-1]; r[0]-last[1] <= gap {
				last[1] = r[1]
				continue
			}
			merged = append(merged, r)
		}
		runs = merged
	}
	out := make([]TimeRange, len(runs))
	for i, r := range runs {
		out[i] = TimeRange{From: r[0] * rollupGrain, To: (r[1] + 1) * rollupGrain}
	}
	return out
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// RollupBucket is the RollupEdges bucket of v (bucket 0 also takes v < 0).
func RollupBucket(v int64) int {
	return max(sort.Search(len(RollupEdges), func(i int) bool { return RollupEdges[i] > v })-1, 0)
}

// RollupEstimate is the value a rollup percentile reports for bucket b of
// a group whose values lie in [lo, hi].
func RollupEstimate(b int, lo, hi int64) int64 {
	var v int64
	switch {
	case b <= 0:
		v = RollupEdges[1] / 2
	case b >= len(RollupEdges)-1:
		v = hi
	default:
		v = int64(math.Round(math.Sqrt(float64(RollupEdges[b]) * float64(RollupEdges[b+1]))))
	}
	return min(max(v, lo), hi)
}

package store

import (
	"fmt"
	"sort"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
)

// Per-minute rollups let the overview answer over millions of records
// without scanning them: on ClickHouse 18.16 with 2 cores the overview's
// ten scans of 10M rows cost 2 s, while a day of rollups is ~1440 rows per
// class and kind.
//
// A rollup row is a pure function of the raw rows of one (kind, minute,
// class, sensor): their count, first and last start, minimum and maximum total,
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
// The sensor is part of the key so that where several sensors write into
// one store (a cluster), each writer recomputes and stores only its own
// sensor's rows, versioned by its own clock: no sensor's recompute can
// replace another's, whatever their clocks say, and readers merge the
// sensors' rows at query time (and one sensor's overview reads its rows
// alone instead of scanning its records).
//
// Counts, sums, counters and histograms on RollupEdges' grid are exact.
// Percentiles are not: each is the geometric middle of the fine bucket
// holding the contract's index (see PercentileQuery), clamped to the
// group's minimum and maximum, within RollupRelError of the exact value
// (or 1 µs below 1 µs).

// rollupGrain is the rollups' time step.
const rollupGrain = int64(time.Minute)

var rollupTable = table{"rollups", cols(`day:d kind:s minute:i64 class:s sensor:s version:i64 n:i64 first_ns:i64 last_ns:i64 lo:i64 hi:i64 sums:s hist:s`)}

// rollupKind is one raw table's rollup: the named sums it keeps.
type rollupKind struct {
	name  string // the kind column
	t     table
	hist  bool     // histogram of total
	names []string // sums, in select order
	exprs []string
	// sensors restricts every read, recompute and prune to these
	// sensors' records and rows (nil: every sensor).
	sensors []string
}

// onlySensors is rk restricted to sensors (nil: every sensor).
func (rk rollupKind) onlySensors(sensors []string) rollupKind {
	rk.sensors = sensors
	return rk
}

// sensorWhere adds rk's sensor restriction to w.
func (rk rollupKind) sensorWhere(w *where) {
	if len(rk.sensors) == 0 {
		return
	}
	args := make([]any, len(rk.sensors))
	for i, s := range rk.sensors {
		args[i] = s
	}
	w.add("sensor IN ("+marks(len(args))+")", args...)
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
	count, fields := counterFields(c, kind)
	*count += n
	for name, f := range fields {
		*f += s[name]
	}
}

// counterFields are the fields of c that a kind's count and its named sums
// (rollupKinds) add to.
func counterFields(c *Counters, kind string) (count *int64, sums map[string]*int64) {
	switch kind {
	case "tx":
		return &c.Transactions, map[string]*int64{"retrans_bytes": &c.TxRetransBytes, "with_retrans": &c.TxWithRetrans,
			"incomplete": &c.IncompleteTx, "no_response": &c.NoResponseTx, "server_errors": &c.ServerErrors}
	case "pv":
		return &c.Pageviews, map[string]*int64{"incomplete": &c.IncompletePageviews}
	case "conn":
		return &c.Connections, map[string]*int64{"syn_losses": &c.SYNLosses, "synack_losses": &c.SYNACKLosses,
			"syn_loss_gap": &c.SYNLossGap, "synack_loss_gap": &c.SYNACKLossGap, "retrans_bytes": &c.ConnRetransBytes,
			"with_retrans": &c.ConnsWithRetrans, "incomplete": &c.IncompleteConnections, "reset": &c.ResetConnections}
	}
	panic("store: no counters for rollup kind " + kind)
}

type rollupKey struct {
	minute int64
	class  string
	sensor string
}

// rollupRow is one (minute, class, sensor) of one kind.
type rollupRow struct {
	version        int64
	n, first, last int64
	lo, hi         int64 // min and max total
	sums           map[string]int64
	hist           []bucketCount // by bucket, ascending
	// torn: the count and histogram queries saw different records (see
	// computeRollups); never stored.
	torn bool
}

// bucketCount is one non-empty RollupEdges bucket.
type bucketCount struct {
	b int
	c int64
}

// rollupHour is the coarser level: an hour row merges the hour's minute
// rows, so that a month's overview reads ~720 rows per class and kind
// instead of ~43,000 (a day of transaction minutes is ~9 MB of text).
const rollupHour = int64(time.Hour)

func hourKind(kind string) string { return kind + "h" }

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

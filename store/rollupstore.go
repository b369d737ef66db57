package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// versionClock gives a store's rollup recomputes their versions: the wall
// clock in ns, strictly increasing where the clock repeats a value.
//
// A recompute takes its version before it reads the records, so that of
// two recomputes the one that read later wins; and above every version
// stored for its keys before it read (after), so that it replaces what it
// found stale even when the row it replaces came from a process whose
// clock runs ahead (another sensor, a reader, the stitcher).
type versionClock struct {
	last atomic.Int64
	skew atomic.Int64 // ns added to the wall clock: tests play a sensor whose clock is off
}

// after is the next version: the clock's, past the last one given and
// greater than stored.
func (c *versionClock) after(stored int64) int64 {
	for {
		old := c.last.Load()
		v := max(time.Now().UnixNano()+c.skew.Load(), old+1, stored+1)
		if c.last.CompareAndSwap(old, v) {
			return v
		}
	}
}

// refreshRollups recomputes the whole minutes rs (aligned to rollupGrain)
// of t, the rows of sensors (nil: every sensor), and stores them. gone
// lists keys whose raw rows no longer exist; they get an empty row so that
// readers stop counting them.
func (q *querier) refreshRollups(ctx context.Context, t table, rs []TimeRange, sensors []string, gone []rollupKey) error {
	if len(rs) == 0 {
		return nil
	}
	rk, err := rollupKindOf(q.d, t)
	if err != nil {
		return err
	}
	rk = rk.onlySensors(sensors)
	stored, err := q.storedVersion(ctx, rk, rs)
	if err != nil {
		return err
	}
	version := q.versions.after(stored) // before reading: a later insert gets a later recompute
	_, rows, err := q.computeToStore(ctx, rk, rs)
	if err != nil {
		return err
	}
	return q.storeRollups(ctx, rk, rs, rows, gone, version)
}

// storedVersion is the newest version stored for rk's minute rows (of its
// sensors) in rs; 0 if none.
func (q *querier) storedVersion(ctx context.Context, rk rollupKind, rs []TimeRange) (int64, error) {
	w := &where{}
	w.add("kind = ?", rk.name)
	conds := make([]string, len(rs))
	for i, r := range rs {
		conds[i] = "(minute >= ? AND minute < ?)"
		w.args = append(w.args, r.From, r.To)
	}
	w.conds = append(w.conds, "("+strings.Join(conds, " OR ")+")")
	rk.sensorWhere(w)
	var v int64
	if err := q.db().QueryRowContext(ctx, fmt.Sprintf("SELECT coalesce(max(version), 0) FROM %s WHERE %s", q.d.table(rollupTable.name), w), w.args...).Scan(&v); err != nil {
		return 0, fmt.Errorf("rollup versions of %s: %w", rk.t.name, err)
	}
	return v, nil
}

// newestVersion is the highest version among rows.
func newestVersion(rows map[rollupKey]*rollupRow) int64 {
	var v int64
	for _, r := range rows {
		v = max(v, r.version)
	}
	return v
}

// storeRollups writes rows (computed over the whole minutes rs, reading
// after version was taken) and an empty row for each key of gone that has
// none.
func (q *querier) storeRollups(ctx context.Context, rk rollupKind, rs []TimeRange, rows map[rollupKey]*rollupRow, gone []rollupKey, version int64) error {
	if skipsShards(ctx) {
		// Computed without a shard that is down: an undercount to answer
		// with (marked partial), never to keep.
		return nil
	}
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
	pruneErr := q.pruneRollups(ctx, rk, rk.name, rs, version)
	keys := make([]rollupKey, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	return errors.Join(pruneErr, q.refreshHours(ctx, rk, keys))
}

// pruneRollups deletes the rows of kind (of rk's sensors) in rs older
// than version, where the engine does not do so itself.
func (q *querier) pruneRollups(ctx context.Context, rk rollupKind, kind string, rs []TimeRange, version int64) error {
	if q.d.pruneRollups == nil {
		return nil
	}
	w := &where{}
	rk.sensorWhere(w)
	return q.d.pruneRollups(ctx, q.db(), kind, rs, version, w)
}

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
	for i := 0; i < len(hours); {
		j := i + 1
		for j < len(hours) && hours[j] == hours[j-1]+1 {
			j++
		}
		run := TimeRange{From: hours[i] * rollupHour, To: (hours[j-1] + 1) * rollupHour}
		i = j
		old, err := q.readRollups(ctx, rk, hourKind(rk.name), run.From, run.To)
		if err != nil {
			return err
		}
		version := q.versions.after(newestVersion(old)) // before reading the minutes, as for them
		minutes, err := q.readRollups(ctx, rk, rk.name, run.From, run.To)
		if err != nil {
			return err
		}
		agg := map[rollupKey]*rollupRow{}
		for k, r := range minutes {
			if r.n == 0 {
				continue
			}
			hk := rollupKey{minute: floorDiv(k.minute, rollupHour) * rollupHour, class: k.class, sensor: k.sensor}
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
		if err := q.pruneRollups(ctx, rk, hourKind(rk.name), []TimeRange{run}, version); err != nil {
			return err
		}
	}
	return nil
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
		if keys[i].class != keys[j].class {
			return keys[i].class < keys[j].class
		}
		return keys[i].sensor < keys[j].sensor
	})
	cs := newColSet(rollupTable, len(rows))
	for _, k := range keys {
		r := rows[k]
		cs.next()
		cs.Day(k.minute)
		cs.Str(kind)
		cs.I64(k.minute)
		cs.Str(k.class)
		cs.Str(k.sensor)
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

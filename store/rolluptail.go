package store

import (
	"context"
	"maps"
	"slices"
)

// tailRollups answers the whole minutes [from, to) from the stored
// rollups plus a recompute of the tail: the minutes the writer has stored
// records in but not rolled up yet (q.pending). Its cost is the rollup
// rows and the tail's records, not the stored records: a live store always
// has a tail (the writer recomputes it after rollupDelay), and checking
// the rollups minute by minute against the records would read all of them
// at every call.
//
// The writer notes a minute before inserting into it and forgets it only
// once its rollups are stored, so a record stored before the tail is
// taken is in a rollup read after it or in a recomputed minute: the
// answer counts at least the records counted before, and at most those
// counted after (records keep coming). Anything else means rollups the
// writer does not know to be stale (a crash, a failed recompute, another
// writer): ok is false and the caller checks them.
//
// The tail is computed as tail says (rk, or rk without its histogram when
// the caller needs none); it answers this call only and is not stored.
func (q *querier) tailRollups(ctx context.Context, rk, tail rollupKind, from, to int64, hours bool) (map[rollupKey]*rollupRow, int, bool, error) {
	before, err := q.rawCount(ctx, rk, from, to)
	if err != nil {
		return nil, 0, false, err
	}
	var runs []TimeRange
	if q.pending != nil {
		runs = minuteRuns(q.pending(rk.t.name, from, to), 64)
	}
	rows, err := q.readTiered(ctx, rk, from, to, hours, runs)
	if err != nil {
		return nil, 0, false, err
	}
	fresh, err := q.computeRollups(ctx, tail, runs)
	if err != nil {
		return nil, 0, false, err
	}
	recomputed := 0
	for _, r := range runs {
		recomputed += int((r.To - r.From) / rollupGrain)
	}
	maps.DeleteFunc(rows, func(k rollupKey, _ *rollupRow) bool { return inRuns(k.minute, runs) })
	maps.Copy(rows, fresh)
	n := totalN(rows)
	if n == before {
		return rows, recomputed, true, nil
	}
	if len(runs) == 0 || n < before {
		return nil, 0, false, nil
	}
	after, err := q.rawCount(ctx, rk, from, to)
	if err != nil {
		return nil, 0, false, err
	}
	return rows, recomputed, n <= after, nil
}

// readTiered reads the stored rollups of the whole minutes [from, to):
// hour rows for its whole hours when hours is set, but minute rows for
// the hours that runs touch, whose minutes the caller replaces.
func (q *querier) readTiered(ctx context.Context, rk rollupKind, from, to int64, hours bool, runs []TimeRange) (map[rollupKey]*rollupRow, error) {
	hFrom := -floorDiv(-from, rollupHour) * rollupHour
	hTo := int64(0)
	if to != 0 {
		hTo = floorDiv(to, rollupHour) * rollupHour
	}
	if !hours || (to != 0 && hTo <= hFrom) {
		return q.readRollups(ctx, rk, rk.name, from, to)
	}
	rows, err := q.readRollups(ctx, rk, hourKind(rk.name), hFrom, hTo)
	if err != nil {
		return nil, err
	}
	// Minutes are read for the range's ends and for the hours of runs,
	// each hour once, consecutive hours in one query.
	split := map[int64]bool{}
	for _, r := range runs {
		for h := floorDiv(r.From, rollupHour); h*rollupHour < r.To; h++ {
			if s := h * rollupHour; s >= hFrom && (hTo == 0 || s < hTo) {
				split[s] = true
			}
		}
	}
	maps.DeleteFunc(rows, func(k rollupKey, _ *rollupRow) bool { return split[k.minute] })
	spans := []TimeRange{{From: from, To: hFrom}}
	if to != 0 {
		spans = append(spans, TimeRange{From: hTo, To: to})
	}
	ends := len(spans)
	for _, h := range sortedKeys(split) {
		if n := len(spans); n > ends && spans[n-1].To == h {
			spans[n-1].To = h + rollupHour
			continue
		}
		spans = append(spans, TimeRange{From: h, To: h + rollupHour})
	}
	for _, r := range spans {
		if r.To <= r.From {
			continue
		}
		part, err := q.readRollups(ctx, rk, rk.name, r.From, r.To)
		if err != nil {
			return nil, err
		}
		maps.Copy(rows, part)
	}
	return rows, nil
}

func inRuns(minute int64, runs []TimeRange) bool {
	for _, r := range runs {
		if minute >= r.From && minute < r.To {
			return true
		}
	}
	return false
}

func sortedKeys(set map[int64]bool) []int64 {
	out := make([]int64, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

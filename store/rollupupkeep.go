package store

import (
	"context"
	"errors"
	"sync"
	"time"
)

// The writer's share of the rollups (Options.Rollups on): it notes the
// minutes stored batches touched and recomputes them when its queue is
// empty (see writer.dirty and rollupDelay).

// sensor is the sensor name the writer's rows carry.
func (w *writer) sensor() string { return w.opts.Sensor } // Open refused longer ones (checkSensorName)

// markDirty adds the minutes the groups' records fall in.
func (w *writer) markDirty(groups []recordGroup) {
	minutes := make([]map[int64]bool, len(groups))
	for gi, g := range groups {
		minutes[gi] = touchedMinutes(g.items)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for gi, g := range groups {
		if len(minutes[gi]) == 0 {
			continue
		}
		if len(w.dirty) == 0 {
			w.dirtySince = time.Now()
		}
		d := w.dirty[g.t.name]
		if d == nil {
			d = map[int64]bool{}
			w.dirty[g.t.name] = d
		}
		for m := range minutes[gi] {
			d[m] = true
		}
	}
}

// mergeDirtyLocked adds minutes to those due for a recompute.
func (w *writer) mergeDirtyLocked(minutes map[string]map[int64]bool) {
	if len(w.dirty) == 0 {
		w.dirtySince = time.Now()
	}
	mergeMinutes(w.dirty, minutes)
}

func mergeMinutes(into, from map[string]map[int64]bool) {
	for t, ms := range from {
		if into[t] == nil {
			into[t] = map[int64]bool{}
		}
		for m := range ms {
			into[t][m] = true
		}
	}
}

// pendingMinutes lists the starts (ns) of the minutes of table in [from,
// to) (to 0: no bound) that hold records whose rollups are not stored
// yet: noted and not recomputed, being recomputed, or deferred until a
// held shard's records are stored.
func (w *writer) pendingMinutes(table string, from, to int64) []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int64
	for _, set := range []map[int64]bool{w.dirty[table], w.inRefresh[table], w.deferred[table]} {
		for m := range set {
			if s := m * rollupGrain; s >= from && (to == 0 || s < to) {
				out = append(out, s)
			}
		}
	}
	return out
}

// refreshDirty recomputes the rollups of the dirty minutes, the tables in
// parallel. A failure is counted and its minutes dropped: the records are
// stored, and readers recompute any minute whose rollup disagrees with
// them, so retrying here would only hold up the queue.
func (w *writer) refreshDirty() {
	w.mu.Lock()
	dirty := w.dirty
	w.dirty = map[string]map[int64]bool{}
	w.inRefresh = dirty
	w.refreshing = true
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var emu sync.Mutex
	var errs []error
	for _, t := range tables {
		ms := dirty[t.name]
		if len(ms) == 0 {
			continue
		}
		starts := make([]int64, 0, len(ms))
		for m := range ms {
			starts = append(starts, m*rollupGrain)
		}
		wg.Go(func() {
			t0 := time.Now()
			rs := minuteRuns(starts, 64)
			// Only this writer's sensor: another sensor's rows are its
			// writer's, versioned by its clock.
			err := w.q.refreshRollups(ctx, t, rs, []string{w.sensor()}, nil)
			w.opts.Logger.Debug("store: rollups", "table", t.name, "minutes", len(starts), "runs", len(rs), "took", time.Since(t0))
			if err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		})
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err != nil {
		w.countRollupError(err)
	}
	w.mu.Lock()
	if err != nil && w.holdingLocked() {
		// A shard's records wait: the recompute read without them (or
		// failed for its absence). Due again once they are stored.
		if w.deferred == nil {
			w.deferred = map[string]map[int64]bool{}
		}
		mergeMinutes(w.deferred, dirty)
	}
	w.refreshing = false
	w.inRefresh = nil
	w.cond.Broadcast()
	w.mu.Unlock()
}

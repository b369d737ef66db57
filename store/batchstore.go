package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// Storing one batch, in phases: classify the transactions that came
// without a class, note the minutes whose rollups to recompute, then per
// table (the three in parallel) drop the ids already stored and insert
// the rest.

// recordItem is record i of its table's slice in the batch, with what
// dedup needs; no per-record closure (an allocation each, which the GC
// then scans).
type recordItem struct {
	id    string
	start int64
	i     int
}

// recordGroup is one table's records of a batch.
type recordGroup struct {
	t      table
	items  []recordItem
	row    func(c *colSet, i int) // appends record i's row
	client func(i int) netip.Addr // record i's client: its shard in cluster mode
}

// storeBatch dedups and inserts one batch; it returns how many were
// duplicates. In cluster mode shard tryHeld (-1: none) is tried although
// its rows are held (b is its held queue's head).
func (w *writer) storeBatch(ctx context.Context, b *Batch, tryHeld int) (int, error) {
	groups := recordGroups(b, w.sensor(), w.txClasses(b))
	if w.opts.keepRollups() {
		// Before the insert, not after: readers recompute the minutes
		// noted here (tailRollups), so a record stored is always in the
		// rollups or in a minute they recompute. A failed insert leaves
		// its minutes noted, which costs one needless recompute.
		w.markDirty(groups)
	}
	if w.shards != nil {
		return w.storeSharded(ctx, b, groups, tryHeld)
	}
	// The three tables are independent: dedup and insert them in parallel,
	// which lets the server's insert work use both cores.
	items := make([][]recordItem, len(groups))
	for gi := range groups {
		items[gi] = groups[gi].items
	}
	dups, err := storeGroups(ctx, groups, items, w.existing, w.ins.insert, w.ins.chunkRows)
	if err != nil {
		return 0, err
	}
	return dups, nil
}

// txClasses gives each transaction of b its class. The pageview stage's
// class wins: it is the classifier the pageviews and connections were
// stamped with, so all three tables agree. The rest serves callers that
// write bare transactions: Options.Classify, else the connection's class
// in the same batch, else the client's last class seen.
func (w *writer) txClasses(b *Batch) []string {
	var connClass map[string]string // built only if needed
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, len(b.Transactions))
	for i, t := range b.Transactions {
		switch {
		case t.Class != "":
			out[i] = t.Class
		case w.opts.Classify != nil:
			out[i] = w.opts.Classify(t.Client)
		default:
			if connClass == nil {
				connClass = make(map[string]string, len(b.Connections))
				for _, c := range b.Connections {
					connClass[c.ID] = c.Class
				}
			}
			if c := connClass[t.ConnectionID]; c != "" {
				out[i] = c
			} else {
				out[i] = w.classOf[t.Client]
			}
		}
	}
	return out
}

// recordGroups splits b into its tables' groups.
func recordGroups(b *Batch, sensor string, txClass []string) []recordGroup {
	groups := []recordGroup{
		{t: pvTable, items: make([]recordItem, len(b.Pageviews)), row: func(c *colSet, i int) { pvRow(c, sensor, b.Pageviews[i]) },
			client: func(i int) netip.Addr { return b.Pageviews[i].Client }},
		{t: txTable, items: make([]recordItem, len(b.Transactions)), row: func(c *colSet, i int) { txRow(c, sensor, txClass[i], b.Transactions[i]) },
			client: func(i int) netip.Addr { return b.Transactions[i].Client }},
		{t: connTable, items: make([]recordItem, len(b.Connections)), row: func(c *colSet, i int) { connRow(c, sensor, b.Connections[i]) },
			client: func(i int) netip.Addr { return b.Connections[i].Client }},
	}
	for i, p := range b.Pageviews {
		groups[0].items[i] = recordItem{clip(p.ID, maxID), p.Start, i}
	}
	for i, t := range b.Transactions {
		groups[1].items[i] = recordItem{clip(t.ID, maxID), t.Start, i}
	}
	for i, c := range b.Connections {
		groups[2].items[i] = recordItem{clip(c.ID, maxID), c.FirstSeen, i}
	}
	return groups
}

// existingFunc finds which of ids are stored with start_ns in [lo, hi].
type existingFunc func(ctx context.Context, t table, lo, hi int64, ids map[string]bool) (map[string]bool, error)

func (w *writer) existing(ctx context.Context, t table, lo, hi int64, ids map[string]bool) (map[string]bool, error) {
	t0 := time.Now()
	have, err := w.q.existingIDs(ctx, t, lo, hi, ids)
	w.opts.Logger.Debug("store: dedup", "table", t.name, "ids", len(ids), "took", time.Since(t0))
	return have, err
}

// dedupItems drops the items whose id is stored already or repeats within
// the batch.
func dedupItems(ctx context.Context, g *recordGroup, items []recordItem, existing existingFunc) (keep []recordItem, dups int, err error) {
	ids := make(map[string]bool, len(items))
	lo, hi := items[0].start, items[0].start
	for _, it := range items {
		ids[it.id] = true
		lo, hi = min(lo, it.start), max(hi, it.start)
	}
	have, err := existing(ctx, g.t, lo, hi, ids)
	if err != nil {
		return nil, 0, fmt.Errorf("dedup %s: %w", g.t.name, err)
	}
	// ids doubles as the seen-set: an id is kept once, then marked false
	// so a repeat within the batch is dropped.
	keep = make([]recordItem, 0, len(items))
	for _, it := range items {
		if have[it.id] || !ids[it.id] {
			dups++
			continue
		}
		ids[it.id] = false
		keep = append(keep, it)
	}
	return keep, dups, nil
}

// insertItems inserts keep, split into concurrent inserts of chunk rows
// where the engine says so (chunk(n) > 0): the server's per-insert work
// (sort, compress, write a part) is single threaded, the client's
// encoding too.
func insertItems(ctx context.Context, g *recordGroup, keep []recordItem, chunk func(int) int, insert func(context.Context, *colSet) error) error {
	size := len(keep)
	if n := chunk(len(keep)); n > 0 {
		size = n
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for lo := 0; lo < len(keep); lo += size {
		part := keep[lo:min(lo+size, len(keep))]
		wg.Go(func() {
			cs := newColSet(g.t, len(part))
			for _, it := range part {
				g.row(cs, it.i)
			}
			cs.done()
			if err := insert(ctx, cs); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("insert %d %s: %w", cs.n, g.t.name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// touchedMinutes lists every minute the items fall in, duplicates
// included: a retried batch's records are all duplicates, but the failure
// may have come between its insert and the recompute. Records come mostly
// in time order: a map insert per change of minute, not per record.
func touchedMinutes(items []recordItem) map[int64]bool {
	ms := make(map[int64]bool)
	last := int64(-1 << 62)
	for _, it := range items {
		if m := floorDiv(it.start, rollupGrain); m != last {
			ms[m], last = true, m
		}
	}
	return ms
}

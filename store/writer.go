package store

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// inserter is what an engine gives the writer.
type inserter interface {
	// existingIDs returns which of ids are already stored in t; the ids'
	// records have start_ns within [lo, hi], which lets the engine read
	// only that slice of the table.
	existingIDs(ctx context.Context, t table, lo, hi int64, ids map[string]bool) (map[string]bool, error)
	// insert appends the rows of c to its table.
	insert(ctx context.Context, c *colSet) error
	// chunkRows(n) > 0 splits a table's n rows into concurrent inserts of
	// that size.
	chunkRows(n int) int
	// granule > 0: a batch cut by size carries whole multiples of this
	// many records of each table; the rest waits for the next batch.
	granule() int
}

var debugTiming = os.Getenv("RTMON_STORE_DEBUG") != ""

// rollupDelay is how long the writer lets dirty minutes wait while records
// keep coming: recomputing after every batch cost DuckDB ~8% of its ingest
// rate, while one recompute over a bulk load's span costs a few percent.
// Readers recompute what is not done yet (rollup.go), so the delay costs
// them a recompute of the newest minutes, not a wrong answer.
const rollupDelay = time.Minute

// writerRefreshesRollups is switched off by tests that play a writer dying
// between an insert and its rollup recompute.
var writerRefreshesRollups = true

// pending is one batch waiting to be stored: in memory, or in a spill file.
type pending struct {
	b    *Batch
	path string
	n    int
}

// writer buffers records, flushes by size or age from one goroutine (so
// batches are stored in order and the dedup check cannot race with itself),
// retries with exponential backoff, and spills to SpillDir past
// MaxBufferRows.
//
// Dedup (check-before-insert): before a batch is inserted the writer asks the
// engine which of its ids are already stored within the batch's start_ns
// range and drops those, and drops repeats inside the batch. Records with the
// same id have the same start time (ids derive from the tuple and the first
// packet time), so the range check finds every earlier copy. Queries then
// need no FINAL (slow on 18.16) and count exactly; a retry after a partially
// applied insert is harmless. ClickHouse tables are ReplacingMergeTree on
// (class, start_ns, id) as a backstop for two writers racing on one database.
type writer struct {
	ins    inserter
	q      *querier // recomputes rollups
	opts   Options
	mu     sync.Mutex
	cond   *sync.Cond
	cur    *Batch
	curAt  time.Time
	queue  []*pending
	memRow int // rows of queue entries held in memory
	seq    int
	busy   bool // flusher is storing the queue head
	closed bool
	stats  WriterStats
	err    error // last insert error, cleared on success
	// stalled: a writer waited MaxAge for room and the flusher stored
	// nothing meanwhile; cleared by the next stored batch. See add.
	stalled bool
	// lastStore is how long the last stored batch took; add waits up to
	// twice that (at least MaxAge) before declaring the engine stalled.
	lastStore time.Duration
	// classes learned from connections and pageviews, the last fallback
	// for a transaction that arrives without Class (not from the pageview
	// stage, which always sets it).
	classOf map[netip.Addr]string
	// dirty holds, per table, the minutes (index since the epoch) that
	// stored batches touched and whose rollups are not recomputed yet.
	// The flusher recomputes them when its queue is empty, so that rollup
	// work never delays a waiting batch and a bulk load pays one recompute
	// over its whole span instead of one per batch; Flush waits for it.
	dirty      map[string]map[int64]bool
	dirtySince time.Time // when dirty became non-empty
	flushing   int       // flush calls waiting
	refreshing bool
	kick       chan struct{}
	done       chan struct{}
	stop       chan struct{}
}

func newWriter(ins inserter, q *querier, opts Options) (*writer, error) {
	w := &writer{ins: ins, q: q, opts: opts, cur: &Batch{}, classOf: map[netip.Addr]string{}, dirty: map[string]map[int64]bool{},
		kick: make(chan struct{}, 1), done: make(chan struct{}), stop: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	if w.spillDir() != "" {
		if err := os.MkdirAll(w.spillDir(), 0o755); err != nil {
			return nil, fmt.Errorf("spill dir: %w", err)
		}
		// Leftovers of an earlier run go first, in file-name (= queue) order.
		files, err := filepath.Glob(filepath.Join(w.spillDir(), "seg-*.gob"))
		if err != nil {
			return nil, fmt.Errorf("spill dir: %w", err)
		}
		sort.Strings(files)
		for _, f := range files {
			var n, s int
			var ts int64
			fmt.Sscanf(filepath.Base(f), "seg-%d-%d-%d.gob", &ts, &s, &n)
			w.queue = append(w.queue, &pending{path: f, n: n})
			w.stats.SpilledFiles++
			w.stats.Queued += int64(n)
		}
	}
	go w.run()
	if len(w.queue) > 0 {
		w.signal()
	}
	return w, nil
}

func (w *writer) spillDir() string {
	if w.opts.SpillDir == "-" {
		return ""
	}
	return w.opts.SpillDir
}

func (w *writer) signal() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *writer) add(ctx context.Context, b Batch) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("store: write after Close: %w", ErrClosed)
	}
	// Backpressure only when nothing can spill.
	for w.spillDir() == "" && w.memRow >= w.opts.MaxBufferRows {
		if ctx.Err() != nil {
			return fmt.Errorf("store: buffer full (%d records) and no spill dir: %w", w.memRow, ctx.Err())
		}
		w.cond.Wait()
	}
	// A healthy engine that is only behind (a burst, or a producer faster
	// than the engine) gets a bounded wait for room before anything is
	// spilled: encoding and replaying spill files costs the CPU the engine
	// needs to catch up (a fifth of the client CPU in the ingest
	// benchmark). Spilling starts at once when inserts fail, and after
	// one wait in which nothing was stored (a hung server); the wait is
	// twice the last batch's store time, at least MaxAge, so a big batch
	// on a slow engine is not mistaken for a hang (10 s before the first
	// batch is stored, when there is no measure yet).
	if w.spillDir() != "" && w.memRow >= w.opts.MaxBufferRows && w.err == nil && !w.stalled {
		grace := max(w.opts.MaxAge, 2*w.lastStore)
		if w.lastStore == 0 {
			grace = max(grace, 10*time.Second)
		}
		deadline := time.Now().Add(grace)
		wake := time.AfterFunc(grace, func() {
			w.mu.Lock()
			w.cond.Broadcast()
			w.mu.Unlock()
		})
		for w.memRow >= w.opts.MaxBufferRows && w.err == nil && !w.stalled && ctx.Err() == nil && !w.closed {
			if !time.Now().Before(deadline) {
				w.stalled = true
				break
			}
			w.cond.Wait()
		}
		wake.Stop()
		if w.closed {
			return fmt.Errorf("store: write after Close: %w", ErrClosed)
		}
	}
	if w.cur.Len() == 0 {
		w.curAt = time.Now()
	}
	for _, c := range b.Connections {
		if c.Class != "" {
			w.classOf[c.Client] = c.Class
		}
	}
	for _, p := range b.Pageviews {
		if p.Class != "" {
			w.classOf[p.Client] = p.Class
		}
	}
	w.cur.Connections = append(w.cur.Connections, b.Connections...)
	w.cur.Transactions = append(w.cur.Transactions, b.Transactions...)
	w.cur.Pageviews = append(w.cur.Pageviews, b.Pageviews...)
	w.stats.Queued += int64(b.Len())
	if w.cur.Len() >= w.opts.BatchRows {
		w.enqueueFullLocked()
	}
	return nil
}

// enqueueFullLocked queues a batch cut by size. For an engine with a
// granule (DuckDB's row group) each table's records are cut at a whole
// multiple of it and the rest stay for the next batch: a partial row
// group left by every insert is merged and recompressed at checkpoint,
// which cost DuckDB ~10% of its ingest time (5.8 s at the end of 10M
// transactions). Flushes by age or request still store everything.
func (w *writer) enqueueFullLocked() {
	g := w.ins.granule()
	if g <= 0 {
		w.enqueueLocked()
		return
	}
	cut := func(n int) int { return n / g * g }
	b := w.cur
	head := &Batch{
		Connections:  b.Connections[:cut(len(b.Connections))],
		Transactions: b.Transactions[:cut(len(b.Transactions))],
		Pageviews:    b.Pageviews[:cut(len(b.Pageviews))],
	}
	if head.Len() == 0 {
		return
	}
	// Fresh slices for the rest: the queued batch keeps the old arrays.
	rest := &Batch{
		Connections:  append([]*reconstruct.Connection(nil), b.Connections[len(head.Connections):]...),
		Transactions: append([]*reconstruct.Transaction(nil), b.Transactions[len(head.Transactions):]...),
		Pageviews:    append([]*pageview.Pageview(nil), b.Pageviews[len(head.Pageviews):]...),
	}
	w.cur = head
	w.enqueueLocked()
	// The rest's age restarts: an age flush now would store the partial
	// row groups the cut avoids. They wait at most MaxAge more.
	w.cur = rest
	w.curAt = time.Now()
}

// enqueueLocked moves the current buffer to the queue; past the memory
// bound, the newest in-memory batches go to disk (queue order is kept, so
// replay order is too).
func (w *writer) enqueueLocked() {
	if w.cur.Len() == 0 {
		return
	}
	b := w.cur
	w.cur = &Batch{}
	w.queue = append(w.queue, &pending{b: b, n: b.Len()})
	w.memRow += b.Len()
	// Over the bound while healthy, add's wait keeps the overshoot to
	// about one batch; spill only when the engine fails or is stalled.
	if w.spillDir() != "" && w.memRow > w.opts.MaxBufferRows && (w.err != nil || w.stalled) {
		for i := len(w.queue) - 1; i >= 1 && w.memRow > w.opts.MaxBufferRows; i-- {
			// Entry 0 may be in the flusher's hands; never touch it.
			p := w.queue[i]
			if p.b == nil {
				continue
			}
			if err := w.spillLocked(p); err != nil {
				w.err = err
				break
			}
		}
	}
	w.signal()
}

func (w *writer) spillLocked(p *pending) error {
	w.seq++
	name := fmt.Sprintf("seg-%020d-%08d-%d.gob", time.Now().UnixNano(), w.seq, p.n)
	path := filepath.Join(w.spillDir(), name)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	if err := gob.NewEncoder(f).Encode(p.b); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("spill %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("spill %s: %w", tmp, err)
	}
	f.Close()
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	w.memRow -= p.n
	p.b, p.path = nil, path
	w.stats.SpilledFiles++
	w.cond.Broadcast()
	return nil
}

func loadSpill(path string) (*Batch, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay spill: %w", err)
	}
	defer f.Close()
	b := &Batch{}
	if err := gob.NewDecoder(f).Decode(b); err != nil {
		return nil, fmt.Errorf("replay spill %s: %w", path, err)
	}
	return b, nil
}

// run is the single flusher goroutine.
func (w *writer) run() {
	defer close(w.done)
	tick := time.NewTicker(w.opts.MaxAge / 4)
	defer tick.Stop()
	backoff := time.Duration(0)
	var nextTry time.Time
	for {
		var retry <-chan time.Time
		if backoff > 0 {
			retry = time.After(time.Until(nextTry))
		}
		select {
		case <-w.stop:
			return
		case <-w.kick:
		case <-tick.C:
		case <-retry:
		}
		w.mu.Lock()
		if w.cur.Len() > 0 && time.Since(w.curAt) >= w.opts.MaxAge {
			w.enqueueLocked()
		}
		w.mu.Unlock()
		if backoff > 0 && time.Now().Before(nextTry) {
			continue
		}
		backoff = w.drain(backoff)
		nextTry = time.Now().Add(backoff)
	}
}

// drain stores queue entries in order until the queue is empty or an insert
// fails; it returns the next backoff (0 after success).
func (w *writer) drain(backoff time.Duration) time.Duration {
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			if len(w.dirty) > 0 && (w.flushing > 0 || w.closed || time.Since(w.dirtySince) >= rollupDelay) {
				w.mu.Unlock()
				w.refreshDirty()
				continue
			}
			w.cond.Broadcast()
			w.mu.Unlock()
			return 0
		}
		p := w.queue[0]
		w.busy = true
		w.mu.Unlock()

		b, err := p.b, error(nil)
		if b == nil {
			b, err = loadSpill(p.path)
		}
		var dups int
		t0 := time.Now()
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			dups, err = w.store(ctx, b)
			cancel()
		}
		took := time.Since(t0)

		w.mu.Lock()
		w.busy = false
		if err != nil {
			w.err = err
			w.stats.Retries++
			w.stats.LastError = err.Error()
			w.cond.Broadcast()
			w.mu.Unlock()
			if backoff == 0 {
				backoff = 100 * time.Millisecond
			} else {
				backoff = min(backoff*2, w.opts.MaxBackoff)
			}
			return backoff
		}
		w.queue = w.queue[1:]
		if p.b != nil {
			w.memRow -= p.n
		} else {
			os.Remove(p.path)
			w.stats.SpilledFiles--
			w.stats.ReplayedFiles++
		}
		w.err = nil
		w.stalled = false
		w.lastStore = took
		w.stats.Queued -= int64(p.n)
		w.stats.Written += int64(p.n - dups)
		w.stats.Duplicates += int64(dups)
		w.cond.Broadcast()
		w.mu.Unlock()
		backoff = 0
	}
}

// store dedups and inserts one batch; it returns how many were duplicates.
func (w *writer) store(ctx context.Context, b *Batch) (int, error) {
	dups := 0
	sensor := clip(w.opts.Sensor, maxSensorOrPri)

	// Built only if some transaction lacks a class (never from the
	// pageview stage).
	var connClass map[string]string
	w.mu.Lock()
	txClass := make([]string, len(b.Transactions))
	for i, t := range b.Transactions {
		// The pageview stage's class wins: it is the classifier the
		// pageviews and connections were stamped with, so all three tables
		// agree. The rest serves callers that write bare transactions.
		if t.Class != "" {
			txClass[i] = t.Class
			continue
		}
		if w.opts.Classify != nil {
			txClass[i] = w.opts.Classify(t.Client)
			continue
		}
		if connClass == nil {
			connClass = make(map[string]string, len(b.Connections))
			for _, c := range b.Connections {
				connClass[c.ID] = c.Class
			}
		}
		if c := connClass[t.ConnectionID]; c != "" {
			txClass[i] = c
		} else {
			txClass[i] = w.classOf[t.Client]
		}
	}
	w.mu.Unlock()

	// item i is record i of its group's slice in b; no per-record closure
	// (an allocation each, which the GC then scans).
	type item struct {
		id    string
		start int64
		i     int
	}
	groups := []struct {
		t     table
		items []item
		add   func(c *colSet, i int)
	}{
		{t: pvTable, items: make([]item, len(b.Pageviews)), add: func(c *colSet, i int) { pvRow(c, sensor, b.Pageviews[i]) }},
		{t: txTable, items: make([]item, len(b.Transactions)), add: func(c *colSet, i int) { txRow(c, sensor, txClass[i], b.Transactions[i]) }},
		{t: connTable, items: make([]item, len(b.Connections)), add: func(c *colSet, i int) { connRow(c, sensor, b.Connections[i]) }},
	}
	for i, p := range b.Pageviews {
		groups[0].items[i] = item{clip(p.ID, maxID), p.Start, i}
	}
	for i, t := range b.Transactions {
		groups[1].items[i] = item{clip(t.ID, maxID), t.Start, i}
	}
	for i, c := range b.Connections {
		groups[2].items[i] = item{clip(c.ID, maxID), c.FirstSeen, i}
	}
	// The three tables are independent: dedup and insert them in parallel,
	// which lets the server's insert work use both cores.
	errs := make([]error, len(groups))
	ndup := make([]int, len(groups))
	keepRollups := w.opts.Rollups == "on" && writerRefreshesRollups
	minutes := make([]map[int64]bool, len(groups))
	var wg sync.WaitGroup
	for gi, g := range groups {
		if len(g.items) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make(map[string]bool, len(g.items))
			lo, hi := g.items[0].start, g.items[0].start
			for _, it := range g.items {
				ids[it.id] = true
				lo, hi = min(lo, it.start), max(hi, it.start)
			}
			tq := time.Now()
			have, err := w.ins.existingIDs(ctx, g.t, lo, hi, ids)
			if debugTiming {
				fmt.Fprintf(os.Stderr, "dedup %s %d: %v\n", g.t.name, len(ids), time.Since(tq))
			}
			if err != nil {
				errs[gi] = fmt.Errorf("dedup %s: %w", g.t.name, err)
				return
			}
			// ids doubles as the seen-set: an id is kept once, then
			// marked false so a repeat within the batch is dropped.
			keep := make([]item, 0, len(g.items))
			for _, it := range g.items {
				if have[it.id] || !ids[it.id] {
					ndup[gi]++
					continue
				}
				ids[it.id] = false
				keep = append(keep, it)
			}
			// Split large tables into concurrent inserts: the server's
			// per-insert work (sort, compress, write a part) is single
			// threaded, the client's encoding too.
			size := len(keep)
			if n := w.ins.chunkRows(len(keep)); n > 0 {
				size = n
			}
			var cwg sync.WaitGroup
			var cmu sync.Mutex
			for lo := 0; lo < len(keep); lo += size {
				part := keep[lo:min(lo+size, len(keep))]
				cwg.Add(1)
				go func() {
					defer cwg.Done()
					cs := newColSet(g.t, len(part))
					for _, it := range part {
						g.add(cs, it.i)
					}
					cs.done()
					ti := time.Now()
					err := w.ins.insert(ctx, cs)
					if debugTiming {
						fmt.Fprintf(os.Stderr, "insert %s %d: %v\n", g.t.name, cs.n, time.Since(ti))
					}
					if err != nil {
						cmu.Lock()
						errs[gi] = errors.Join(errs[gi], fmt.Errorf("insert %d %s: %w", cs.n, g.t.name, err))
						cmu.Unlock()
					}
				}()
			}
			cwg.Wait()
			if errs[gi] != nil || !keepRollups {
				return
			}
			// Every minute the batch touched, duplicates included: a
			// retried batch's records are all duplicates, but the failure
			// may have come between its insert and the recompute. Records
			// come mostly in time order: a map insert per change of
			// minute, not per record.
			ms := make(map[int64]bool)
			last := int64(-1 << 62)
			for _, it := range g.items {
				if m := floorDiv(it.start, rollupGrain); m != last {
					ms[m], last = true, m
				}
			}
			minutes[gi] = ms
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	for _, n := range ndup {
		dups += n
	}
	if keepRollups {
		w.mu.Lock()
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
		w.mu.Unlock()
	}
	return dups, nil
}

// refreshDirty recomputes the rollups of the dirty minutes, the tables in
// parallel. A failure is counted and its minutes dropped: the records are
// stored, and readers recompute any minute whose rollup disagrees with
// them, so retrying here would only hold up the queue.
func (w *writer) refreshDirty() {
	w.mu.Lock()
	dirty := w.dirty
	w.dirty = map[string]map[int64]bool{}
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
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			rs := minuteRuns(starts, 64)
			err := refreshRollups(ctx, w.q, w.ins, t, rs, nil)
			if debugTiming {
				fmt.Fprintf(os.Stderr, "rollups %s: %d minutes in %d runs: %v\n", t.name, len(starts), len(rs), time.Since(t0))
			}
			if err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		w.countRollupError(err)
	}
	w.mu.Lock()
	w.refreshing = false
	w.cond.Broadcast()
	w.mu.Unlock()
}

// countRollupError records a failed rollup recompute or store.
func (w *writer) countRollupError(err error) {
	w.mu.Lock()
	w.stats.RollupErrors++
	w.stats.LastError = err.Error()
	w.mu.Unlock()
}

// flush waits until everything added so far is stored.
func (w *writer) flush(ctx context.Context) error {
	w.mu.Lock()
	w.enqueueLocked()
	w.mu.Unlock()
	w.signal()
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.cond.Broadcast()
		w.mu.Unlock()
	})
	defer stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushing++
	defer func() { w.flushing-- }()
	for len(w.queue) > 0 || len(w.dirty) > 0 || w.refreshing {
		if ctx.Err() != nil {
			if len(w.queue) == 0 {
				return nil // stored; readers recompute the rollups
			}
			return fmt.Errorf("store flush: %d records still queued (last error: %v): %w", w.stats.Queued, w.err, ctx.Err())
		}
		if len(w.queue) == 0 && !w.refreshing {
			w.signal() // the flusher recomputes when it wakes with an empty queue
		}
		w.cond.Wait()
	}
	return nil
}

// close flushes within CloseTimeout, then spills what is left.
func (w *writer) close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.CloseTimeout)
	ferr := w.flush(ctx)
	cancel()
	close(w.stop)
	<-w.done
	if ferr == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var files []string
	lost := 0
	rows := 0
	for _, p := range w.queue {
		if p.b != nil && w.spillDir() != "" {
			if err := w.spillLocked(p); err != nil {
				lost += p.n
				continue
			}
		}
		if p.b != nil {
			lost += p.n
			continue
		}
		files = append(files, filepath.Base(p.path))
		rows += p.n
	}
	if lost > 0 {
		return fmt.Errorf("store close: %d records LOST (not stored, not spilled); %d records in %d spill files in %s: %v",
			lost, rows, len(files), w.spillDir(), ferr)
	}
	return fmt.Errorf("store close: %d records not stored, left in %d spill files in %s (%s); the next Open replays them: %v",
		rows, len(files), w.spillDir(), strings.Join(files, ", "), ferr)
}

func (w *writer) statsCopy() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.stats
	st.BatchRows = w.opts.BatchRows
	st.Rollups = w.opts.Rollups == "on"
	return st
}

// sink adapts the writer to pageview.Sink; errors surface from Flush/Close.
type sink struct{ w *writer }

func (s sink) Connection(c *reconstruct.Connection) {
	s.reject(s.w.add(context.Background(), Batch{Connections: []*reconstruct.Connection{c}}), 1)
}
func (s sink) Transaction(t *reconstruct.Transaction) {
	s.reject(s.w.add(context.Background(), Batch{Transactions: []*reconstruct.Transaction{t}}), 1)
}
func (s sink) Pageview(p *pageview.Pageview) {
	s.reject(s.w.add(context.Background(), Batch{Pageviews: []*pageview.Pageview{p}}), 1)
}

// reject counts records the Sink could not queue (only after Close), so
// that a loss is visible in Stats rather than silent.
func (s sink) reject(err error, n int) {
	if err == nil {
		return
	}
	s.w.mu.Lock()
	s.w.stats.Rejected += int64(n)
	s.w.stats.LastError = err.Error()
	s.w.mu.Unlock()
}

package store

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// inserter is how an engine takes rows.
type inserter interface {
	// insert appends the rows of c to its table.
	insert(ctx context.Context, c *colSet) error
	// chunkRows(n) > 0 splits a table's n rows into concurrent inserts of
	// that size.
	chunkRows(n int) int
	// granule > 0: a batch cut by size carries whole multiples of this
	// many records of each table; the rest waits for the next batch.
	granule() int
}

// rollupDelay is how long the writer lets dirty minutes wait while records
// keep coming: recomputing after every batch cost DuckDB ~8% of its ingest
// rate, while one recompute over a bulk load's span costs a few percent.
// Readers recompute what is not done yet (rollup.go), so the delay costs
// them a recompute of the newest minutes, not a wrong answer.
const rollupDelay = time.Minute

// pending is one batch waiting to be stored: in memory, or in a spill file.
type pending struct {
	b    *Batch
	path string
	n    int
	size int64 // of the spill file
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
	q      *querier // finds stored ids, recomputes rollups
	opts   Options
	stream stream // records streamed through the Sink methods
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
	// nothing meanwhile; cleared by the next stored batch. See waitForRoom.
	stalled bool
	// lastStore is how long the last stored batch took; a writer waits up
	// to twice that (at least MaxAge) before declaring the engine stalled.
	lastStore time.Duration
	// spillFailed: the last spill failed (a full disk); writers get
	// backpressure until a batch is stored again. spillNoSpace: for lack
	// of space.
	spillFailed  bool
	spillNoSpace bool
	// storeNoSpace: the last store failed for lack of space (DuckDB on a
	// full disk); cleared by the next stored batch.
	storeNoSpace bool
	// hangs: the engine can hang without failing (backend.hangs).
	hangs bool
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
	// inRefresh: the dirty minutes being recomputed (pendingMinutes).
	inRefresh  map[string]map[int64]bool
	flushing   int // flush calls waiting
	refreshing bool
	kick       chan struct{}
	done       chan struct{}
	stop       chan struct{}
	// shards: cluster mode stores rows per shard (shardheld.go); held
	// are each shard's rows that wait for it, heldErr why, and the
	// flusher retries them at heldNext. deferred: rollup minutes whose
	// recompute failed while rows were held, due once none are.
	shards      shardSink
	held        [][]*pending
	heldErr     []error
	heldBackoff time.Duration
	heldNext    time.Time
	deferred    map[string]map[int64]bool
}

func newWriter(ins inserter, q *querier, opts Options, hangs bool, shards shardSink) (*writer, error) {
	w := &writer{ins: ins, q: q, opts: opts, hangs: hangs, cur: &Batch{}, classOf: map[netip.Addr]string{}, dirty: map[string]map[int64]bool{},
		kick: make(chan struct{}, 1), done: make(chan struct{}), stop: make(chan struct{}), shards: shards}
	if shards != nil {
		w.held = make([][]*pending, shards.shardCount())
		w.heldErr = make([]error, shards.shardCount())
	}
	w.cond = sync.NewCond(&w.mu)
	w.stream.chunk = min(streamChunk, opts.BatchRows)
	if err := w.queueLeftovers(); err != nil {
		return nil, err
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

// canSpillLocked: there is a spill directory, spilling last worked, and
// the spill files are within MaxSpillBytes.
func (w *writer) canSpillLocked() bool {
	return w.spillDir() != "" && !w.spillFailed && w.stats.SpillBytes < w.opts.MaxSpillBytes
}

func (w *writer) signal() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// WriteBatch queues b (see Writer).
func (w *writer) WriteBatch(ctx context.Context, b Batch) error { return w.add(ctx, b) }

func (w *writer) add(ctx context.Context, b Batch) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("store: write after Close: %w", ErrClosed)
	}
	if err := w.waitForRoomLocked(ctx); err != nil {
		return err
	}
	w.appendLocked(b)
	return nil
}

// waitForRoomLocked holds a writer back while the memory queue is full.
// Without a spill directory it waits for the flusher (backpressure).
// With one, a healthy engine that is only behind (a burst, or a producer
// faster than the engine) gets a bounded wait for room before anything is
// spilled: encoding and replaying spill files costs the CPU the engine
// needs to catch up (a fifth of the client CPU in the ingest benchmark).
// Spilling starts at once when inserts fail, and after one wait in which
// nothing was stored (a hung server); the wait is twice the last batch's
// store time, at least MaxAge, so a big batch on a slow engine is not
// mistaken for a hang (10 s before the first batch is stored, when there
// is no measure yet). An engine that cannot hang (DuckDB) gets no such
// judgement: while it stores, writers wait; once it fails, they spill.
func (w *writer) waitForRoomLocked(ctx context.Context) error {
	if w.memRow >= w.opts.MaxBufferRows {
		// Wake at the caller's deadline: a flusher stuck in an insert
		// broadcasts nothing, and the writer would wait past it.
		stop := context.AfterFunc(ctx, func() {
			w.mu.Lock()
			w.cond.Broadcast()
			w.mu.Unlock()
		})
		defer stop()
	}
	for w.memRow >= w.opts.MaxBufferRows && (!w.canSpillLocked() || (!w.hangs && !w.failingLocked())) {
		if ctx.Err() != nil {
			return fmt.Errorf("store: buffer full (%d records), the engine behind and no room to spill: %w", w.memRow, ctx.Err())
		}
		if w.closed {
			return fmt.Errorf("store: write after Close: %w", ErrClosed)
		}
		w.cond.Wait()
	}
	if !w.canSpillLocked() || w.memRow < w.opts.MaxBufferRows || w.failingLocked() || w.stalled {
		return nil
	}
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
	defer wake.Stop()
	for w.memRow >= w.opts.MaxBufferRows && !w.failingLocked() && !w.stalled && ctx.Err() == nil && !w.closed {
		if !time.Now().Before(deadline) {
			w.stalled = true
			break
		}
		w.cond.Wait()
	}
	if w.closed {
		return fmt.Errorf("store: write after Close: %w", ErrClosed)
	}
	return nil
}

// appendLocked adds b to the current buffer and queues the buffer when it
// is full.
func (w *writer) appendLocked(b Batch) {
	if w.cur.Len() == 0 {
		w.curAt = time.Now()
	}
	for _, c := range b.Connections {
		if c.Class != "" {
			w.learnClassLocked(c.Client, c.Class)
		}
	}
	for _, p := range b.Pageviews {
		if p.Class != "" {
			w.learnClassLocked(p.Client, p.Class)
		}
	}
	w.cur.Connections = append(w.cur.Connections, b.Connections...)
	w.cur.Transactions = append(w.cur.Transactions, b.Transactions...)
	w.cur.Pageviews = append(w.cur.Pageviews, b.Pageviews...)
	w.stats.Queued += int64(b.Len())
	if w.cur.Len() >= w.opts.BatchRows {
		w.enqueueFullLocked()
	}
	if w.memRow+w.cur.Len() >= w.opts.MaxBufferRows {
		// The granule cut leaves records in cur, which only the flusher's
		// age check queues; a flusher inside a slow insert let cur grow
		// past the bound (110k records for a bound of 20k, a DuckDB on a
		// full disk, busy machine). Queued whole, the bound, spilling and
		// backpressure apply to them.
		w.enqueueLocked()
	}
}

// maxClassOf bounds the clients whose last class the writer remembers: a
// live run sees ever new clients. Past it the memory starts over; the
// classes come back with the clients' next connections.
const maxClassOf = 1 << 18

func (w *writer) learnClassLocked(client netip.Addr, class string) {
	if _, ok := w.classOf[client]; !ok && len(w.classOf) >= maxClassOf {
		clear(w.classOf)
	}
	w.classOf[client] = class
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
	// Over the bound while healthy, waitForRoomLocked keeps the overshoot
	// to about one batch; spill only when the engine fails or is stalled.
	if w.canSpillLocked() && w.memRow > w.opts.MaxBufferRows && (w.failingLocked() || w.stalled) {
		w.spillNewestLocked()
	}
	w.signal()
}

// Flush waits until everything added so far is stored (see Writer).
func (w *writer) Flush(ctx context.Context) error {
	w.takeStream()
	return w.flush(ctx)
}

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
	for len(w.queue) > 0 || w.holdingLocked() || len(w.dirty) > 0 || w.refreshing {
		if ctx.Err() != nil {
			if len(w.queue) == 0 && !w.holdingLocked() {
				return nil // stored; readers recompute the rollups
			}
			var held WriterStats
			w.heldStatsLocked(&held)
			heldText := ""
			if held.HeldRecords > 0 {
				heldText = fmt.Sprintf("%d held for shards %v; ", held.HeldRecords, held.HeldShards)
			}
			return fmt.Errorf("store flush: %d records still queued (%slast error: %v): %w",
				w.stats.Queued, heldText, w.lastErrLocked(), ctx.Err())
		}
		if len(w.queue) == 0 && !w.refreshing && len(w.dirty) > 0 {
			// The flusher recomputes when it wakes with an empty queue.
			// Held records alone are retried on their own timer: a kick
			// here would only spin the two goroutines.
			w.signal()
		}
		w.cond.Wait()
	}
	return nil
}

// close takes the streamed records, flushes within CloseTimeout, then
// spills what is left.
func (w *writer) close() error {
	if b := w.stream.close(); b.Len() > 0 {
		w.addStreamed(b, false)
	}
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
	var serr error
	if w.shards != nil {
		serr = w.shards.close()
	}
	if ferr == nil {
		return serr
	}
	return w.spillRest(ferr)
}

// Stats reports the writer's state (see Writer).
func (w *writer) Stats() WriterStats {
	staged := w.stream.staged()
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.stats
	st.Queued += int64(staged)
	st.Failing = w.failingLocked()
	w.heldStatsLocked(&st)
	st.SpillFailing = w.spillFailed
	st.DiskFull = (w.err != nil && w.storeNoSpace) || (w.spillFailed && w.spillNoSpace)
	st.BatchRows = w.opts.BatchRows
	st.Rollups = w.opts.keepRollups()
	return st
}

// countRollupError records a failed rollup recompute or store.
func (w *writer) countRollupError(err error) {
	w.mu.Lock()
	w.stats.RollupErrors++
	w.stats.LastError = err.Error()
	w.mu.Unlock()
}

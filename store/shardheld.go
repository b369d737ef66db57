package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// A sharded writer (cluster mode) stores each batch shard by shard. When
// some shards take their rows and others fail, the batch leaves the queue:
// the failed shards' rows wait in that shard's held queue, in order, and
// the shard's rows of later batches join them without being tried, so the
// shards that are up keep taking rows. The flusher retries each held
// queue's head on its own backoff; held batches count against the memory
// bound and spill like queued ones (a spill file holds one shard's rows,
// and a later Open replays it as any other). When every shard with rows
// fails (ZooKeeper down, the server unreachable), the batch stays at the
// queue's head as on one server.

// shardFailure is a batch that some shards did not take.
type shardFailure struct {
	failed map[int]error // shard -> why; errShardHeld: not tried
	dups   int           // of the shards that took their rows
	parts  map[int]*Batch
	tried  int // shards with rows
}

// errShardHeld: the shard's earlier rows wait, so this batch's are not tried.
var errShardHeld = errors.New("earlier records of this shard are held")

func (f *shardFailure) Error() string {
	var b strings.Builder
	for _, s := range slices.Sorted(maps.Keys(f.failed)) {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "shard %d: %v", s+1, f.failed[s])
	}
	return b.String()
}

// progress: some shard took its rows, or some were held without a try,
// so the batch can leave the queue.
func (f *shardFailure) progress() bool {
	fresh := 0
	for _, err := range f.failed {
		if !errors.Is(err, errShardHeld) {
			fresh++
		}
	}
	return fresh < f.tried
}

// storeSharded stores groups shard by shard; shard tryHeld (or none, -1)
// is tried even though its held queue is not empty: b is its head.
func (w *writer) storeSharded(ctx context.Context, b *Batch, groups []recordGroup, tryHeld int) (int, error) {
	n := w.shards.shardCount()
	items := make([][][]recordItem, n) // [shard][group]
	for s := range items {
		items[s] = make([][]recordItem, len(groups))
	}
	for gi, g := range groups {
		for _, it := range g.items {
			s := w.shards.shardOf(g.client(it.i))
			items[s][gi] = append(items[s][gi], it)
		}
	}
	w.mu.Lock()
	held := make([]bool, n)
	for s := range held {
		held[s] = s != tryHeld && len(w.held[s]) > 0
	}
	w.mu.Unlock()
	dups := make([]int, n)
	errs := make([]error, n)
	tried := 0
	var wg sync.WaitGroup
	for s := range n {
		if !slices.ContainsFunc(items[s], func(its []recordItem) bool { return len(its) > 0 }) {
			continue
		}
		tried++
		if held[s] {
			errs[s] = errShardHeld
			continue
		}
		wg.Go(func() { dups[s], errs[s] = w.shards.storeShard(ctx, s, groups, items[s]) })
	}
	wg.Wait()
	f := &shardFailure{failed: map[int]error{}, parts: map[int]*Batch{}, tried: tried}
	for s := range n {
		if errs[s] == nil {
			f.dups += dups[s]
			continue
		}
		f.failed[s] = errs[s]
		f.parts[s] = pickBatch(b, items[s])
	}
	if len(f.failed) == 0 {
		return f.dups, nil
	}
	return 0, f
}

// pickBatch is the records of b that items (per group, in recordGroups'
// order: pageviews, transactions, connections) name.
func pickBatch(b *Batch, items [][]recordItem) *Batch {
	out := &Batch{}
	for _, it := range items[0] {
		out.Pageviews = append(out.Pageviews, b.Pageviews[it.i])
	}
	for _, it := range items[1] {
		out.Transactions = append(out.Transactions, b.Transactions[it.i])
	}
	for _, it := range items[2] {
		out.Connections = append(out.Connections, b.Connections[it.i])
	}
	return out
}

// holdLocked takes the queue's head p, which some shards stored, out of
// the queue and appends the rest to their shards' held queues.
func (w *writer) holdLocked(p *pending, f *shardFailure, took time.Duration) {
	w.queue = w.queue[1:]
	w.releaseLocked(p)
	held := 0
	for _, s := range slices.Sorted(maps.Keys(f.parts)) {
		part := f.parts[s]
		w.held[s] = append(w.held[s], &pending{b: part, n: part.Len()})
		w.memRow += part.Len()
		held += part.Len()
		if err := f.failed[s]; !errors.Is(err, errShardHeld) {
			if w.heldErr[s] == nil {
				w.opts.Logger.Warn("store: a shard does not take its records; they are held (and spilled past the memory bound) while the other shards go on",
					"shard", s+1, "err", err)
			}
			w.heldErr[s] = err
			w.stats.Retries++
			w.stats.LastError = err.Error()
		}
	}
	w.countStoredLocked(p.n-held, f.dups)
	w.err = nil
	w.storeNoSpace = false
	w.stalled = false
	w.lastStore = took
	if w.heldNext.IsZero() {
		w.heldBackoff = 100 * time.Millisecond
		w.heldNext = time.Now().Add(w.heldBackoff)
	}
	if w.canSpillLocked() && w.memRow > w.opts.MaxBufferRows {
		w.spillNewestLocked()
	}
	w.cond.Broadcast()
}

// releaseLocked forgets a stored (or held-elsewhere) entry's memory or
// spill file.
func (w *writer) releaseLocked(p *pending) {
	if p.b != nil {
		w.memRow -= p.n
		return
	}
	os.Remove(p.path)
	w.stats.SpilledFiles--
	w.stats.SpillBytes -= p.size
	w.stats.ReplayedFiles++
}

// drainHeld retries each held queue from its head while it succeeds. A
// shard that still fails waits for the next backoff; when every shard is
// back, the rollup minutes whose recompute the outage failed are due.
func (w *writer) drainHeld() {
	failed := false
	for s := range w.held {
		for {
			w.mu.Lock()
			if len(w.held[s]) == 0 {
				w.mu.Unlock()
				break
			}
			hp := w.held[s][0]
			w.mu.Unlock()
			dups, _, err := w.storePending(hp, s)
			w.mu.Lock()
			if errors.Is(err, errBadSpill) {
				w.held[s] = w.held[s][1:]
				w.setAsideFileLocked(hp, err)
				w.mu.Unlock()
				continue
			}
			if err != nil {
				w.heldErr[s] = err
				w.stats.Retries++
				w.stats.LastError = err.Error()
				w.mu.Unlock()
				failed = true
				break
			}
			w.held[s] = w.held[s][1:]
			w.releaseLocked(hp)
			w.countStoredLocked(hp.n, dups)
			if len(w.held[s]) == 0 {
				w.heldErr[s] = nil
				w.opts.Logger.Info("store: a shard takes its records again; its held records are stored", "shard", s+1)
			}
			w.cond.Broadcast()
			w.mu.Unlock()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if failed {
		w.heldBackoff = min(max(2*w.heldBackoff, 100*time.Millisecond), w.opts.MaxBackoff)
		w.heldNext = time.Now().Add(w.heldBackoff)
		return
	}
	w.heldBackoff, w.heldNext = 0, time.Time{}
	if !w.holdingLocked() && len(w.deferred) > 0 {
		w.mergeDirtyLocked(w.deferred)
		w.deferred = nil
	}
	w.cond.Broadcast()
}

// lastErrLocked is the main queue's error, else a held shard's.
func (w *writer) lastErrLocked() error {
	if w.err != nil {
		return w.err
	}
	for _, err := range w.heldErr {
		if err != nil {
			return err
		}
	}
	return nil
}

// holdingLocked: some shard's records are held.
func (w *writer) holdingLocked() bool {
	for _, h := range w.held {
		if len(h) > 0 {
			return true
		}
	}
	return false
}

// failingLocked: the engine does not take everything it is given now.
func (w *writer) failingLocked() bool { return w.err != nil || w.holdingLocked() }

// heldStatsLocked fills the held part of st.
func (w *writer) heldStatsLocked(st *WriterStats) {
	for s, h := range w.held {
		if len(h) == 0 {
			continue
		}
		st.HeldShards = append(st.HeldShards, s+1)
		for _, p := range h {
			st.HeldRecords += int64(p.n)
		}
	}
}

// spillHeldLocked writes held batches to disk, newest first, while the
// memory bound is exceeded; each queue's head may be in the flusher's
// hands. It reports false when a spill failed.
func (w *writer) spillHeldLocked() bool {
	for s := range w.held {
		for i := len(w.held[s]) - 1; i >= 1 && w.memRow > w.opts.MaxBufferRows; i-- {
			if p := w.held[s][i]; p.b != nil && !w.spillOrMarkLocked(p) {
				return false
			}
		}
	}
	return true
}

package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// run is the single flusher goroutine: it takes streamed records, queues
// the buffer by age, and stores the queue in order with backoff.
func (w *writer) run() {
	defer close(w.done)
	tick := time.NewTicker(w.opts.MaxAge / 4)
	defer tick.Stop()
	backoff := time.Duration(0)
	var nextTry time.Time
	for {
		var retry <-chan time.Time
		w.mu.Lock()
		heldNext := w.heldNext
		w.mu.Unlock()
		if wake := nextWake(backoff, nextTry, heldNext); !wake.IsZero() {
			retry = time.After(time.Until(wake))
		}
		select {
		case <-w.stop:
			return
		case <-w.kick:
		case <-tick.C:
			w.takeStream()
		case <-retry:
		}
		w.mu.Lock()
		if w.cur.Len() > 0 && time.Since(w.curAt) >= w.opts.MaxAge {
			w.enqueueLocked()
		}
		w.mu.Unlock()
		if !heldNext.IsZero() && !time.Now().Before(heldNext) {
			w.drainHeld()
		}
		if backoff > 0 && time.Now().Before(nextTry) {
			continue
		}
		backoff = w.drain(backoff)
		nextTry = time.Now().Add(backoff)
	}
}

// drain stores queue entries in order until the queue is empty or an insert
// fails; it returns the next backoff (0 after success). With the queue
// empty it recomputes the rollups of the minutes stored batches touched,
// when someone waits for them or they have waited rollupDelay.
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

		dups, took, err := w.storePending(p, -1)
		if err != nil && !errors.Is(err, errBadSpill) {
			err = w.heal(err)
		}

		w.mu.Lock()
		w.busy = false
		if sf := (*shardFailure)(nil); errors.As(err, &sf) && sf.progress() {
			w.holdLocked(p, sf, took)
			w.mu.Unlock()
			backoff = 0
			continue
		}
		if errors.Is(err, errBadSpill) {
			w.setAsideLocked(p, err)
			w.mu.Unlock()
			continue
		}
		if err != nil {
			w.failedLocked(err)
			w.mu.Unlock()
			if backoff == 0 {
				return 100 * time.Millisecond
			}
			return min(backoff*2, w.opts.MaxBackoff)
		}
		w.storedLocked(p, dups, took)
		w.mu.Unlock()
		backoff = 0
	}
}

// nextWake is when the flusher must retry without a kick: the queue's
// backoff or the held queues' (zero: neither).
func nextWake(backoff time.Duration, nextTry, heldNext time.Time) time.Time {
	switch {
	case backoff > 0 && (heldNext.IsZero() || nextTry.Before(heldNext)):
		return nextTry
	default:
		return heldNext
	}
}

// errBadSpill marks a spill file that cannot be read back.
var errBadSpill = errors.New("unreadable spill file")

// storePending stores one queue entry, from memory or its spill file.
// tryHeld as in storeBatch (-1: none).
func (w *writer) storePending(p *pending, tryHeld int) (dups int, took time.Duration, err error) {
	b := p.b
	if b == nil {
		if b, err = loadSpill(p.path); err != nil {
			return 0, 0, fmt.Errorf("%w: %w", errBadSpill, err)
		}
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dups, err = w.storeBatch(ctx, b, tryHeld)
	return dups, time.Since(t0), err
}

// healer is an engine that can recover from some failed stores by
// itself: DuckDB reopens a database it invalidated.
type healer interface {
	// heal reports whether it recovered the engine from err.
	heal(ctx context.Context, err error) (bool, error)
}

// heal lets the engine recover from a failed store before its retry; it
// returns err with what the recovery met.
func (w *writer) heal(err error) error {
	h, ok := w.ins.(healer)
	if !ok {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	healed, herr := h.heal(ctx, err)
	if healed {
		w.mu.Lock()
		w.stats.Reopens++
		w.mu.Unlock()
		w.opts.Logger.Warn("store: the database invalidated itself after a failed write; reopened it, the batch is retried", "err", err)
	}
	if herr != nil {
		return errors.Join(err, herr)
	}
	return err
}

// failedLocked notes a failed store; the entry stays at the queue's head.
func (w *writer) failedLocked(err error) {
	w.err = err
	w.storeNoSpace = isNoSpace(err)
	w.stats.Retries++
	w.stats.LastError = err.Error()
	w.cond.Broadcast()
}

// storedLocked removes the stored head entry p from the queue.
func (w *writer) storedLocked(p *pending, dups int, took time.Duration) {
	w.queue = w.queue[1:]
	w.releaseLocked(p)
	w.countStoredLocked(p.n, dups)
	w.err = nil
	w.storeNoSpace = false
	w.stalled = false
	w.spillFailed = false // room may be back: the next spill will tell
	w.lastStore = took
	w.cond.Broadcast()
}

// countStoredLocked counts n queued records stored, dups of them dropped
// as already stored.
func (w *writer) countStoredLocked(n, dups int) {
	w.stats.Queued -= int64(n)
	w.stats.Written += int64(n - dups)
	w.stats.Duplicates += int64(dups)
}

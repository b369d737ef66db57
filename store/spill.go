package store

import (
	"encoding/gob"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Spill files hold batches the engine could not take, one gob-encoded
// Batch each, named seg-<ns>-<seq>-<records>.gob so that file-name order
// is queue order and the record count is known without reading them.

// queueLeftovers queues the spill files of an earlier run first, in
// file-name (= queue) order.
func (w *writer) queueLeftovers() error {
	if w.spillDir() == "" {
		return nil
	}
	// The directory is made by the first spill: none, no leftovers.
	files, err := filepath.Glob(filepath.Join(w.spillDir(), "seg-*.gob"))
	if err != nil {
		return fmt.Errorf("spill dir: %w", err)
	}
	sort.Strings(files)
	for _, f := range files {
		var n, s int
		var ts int64
		fmt.Sscanf(filepath.Base(f), "seg-%d-%d-%d.gob", &ts, &s, &n)
		var size int64
		if fi, err := os.Stat(f); err == nil {
			size = fi.Size()
		}
		w.queue = append(w.queue, &pending{path: f, n: n, size: size})
		w.stats.SpilledFiles++
		w.stats.SpillBytes += size
		w.stats.Queued += int64(n)
	}
	return nil
}

// spillNewestLocked writes the newest in-memory batches to disk until the
// memory bound holds again.
// Held batches (cluster mode) go first: their shard is down, and they
// are the ones that will wait longest.
func (w *writer) spillNewestLocked() {
	if !w.spillHeldLocked() {
		return
	}
	for i := len(w.queue) - 1; i >= 1 && w.memRow > w.opts.MaxBufferRows; i-- {
		// Entry 0 may be in the flusher's hands; never touch it.
		if p := w.queue[i]; p.b != nil && !w.spillOrMarkLocked(p) {
			return
		}
	}
}

// spillOrMarkLocked spills p; on failure (a full disk) it keeps the batch
// in memory, holds writers back (waitForRoomLocked) rather than lose
// anything, and reports false.
func (w *writer) spillOrMarkLocked(p *pending) bool {
	err := w.spillLocked(p)
	if err == nil {
		return true
	}
	w.spillFailed = true
	w.spillNoSpace = isNoSpace(err)
	w.stats.SpillFailures++
	w.stats.LastError = err.Error()
	w.opts.Logger.Warn("store: spilling failed; writers wait for the engine", "err", err)
	return false
}

func (w *writer) spillLocked(p *pending) error {
	w.seq++
	name := fmt.Sprintf("seg-%020d-%08d-%d.gob", time.Now().UnixNano(), w.seq, p.n)
	path := filepath.Join(w.spillDir(), name)
	tmp := path + ".tmp"
	// Spill files hold captured URLs and addresses: only their owner may
	// list or read them. Made here, not at Open, so that a store that never
	// spills leaves no directory behind.
	if err := os.MkdirAll(w.spillDir(), 0o700); err != nil {
		return fmt.Errorf("spill dir: %w", err)
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
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
	size, _ := f.Seek(0, io.SeekCurrent)
	f.Close()
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("spill: %w", err)
	}
	w.memRow -= p.n
	p.b, p.path, p.size = nil, path, size
	w.stats.SpilledFiles++
	w.stats.SpillBytes += size
	w.cond.Broadcast()
	return nil
}

// setAsideLocked takes the unreadable spill file p, the queue's head, out
// of the queue: renamed *.corrupt for a person to look at, its records
// counted lost. Retrying it would wedge the writer forever.
func (w *writer) setAsideLocked(p *pending, err error) {
	w.queue = w.queue[1:]
	w.setAsideFileLocked(p, err)
}

// setAsideFileLocked renames p's file *.corrupt and counts its records
// lost; p is out of its queue.
func (w *writer) setAsideFileLocked(p *pending, err error) {
	if rerr := os.Rename(p.path, p.path+".corrupt"); rerr != nil {
		os.Remove(p.path)
	}
	w.stats.SpilledFiles--
	w.stats.SpillBytes -= p.size
	w.stats.Queued -= int64(p.n)
	w.stats.CorruptSpillFiles++
	w.stats.LostRecords += int64(p.n)
	w.stats.LastError = err.Error()
	w.opts.Logger.Error("store: a spill file could not be read back; set aside, its records are lost",
		"file", p.path+".corrupt", "records", p.n, "err", err)
	w.cond.Broadcast()
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

// spillRest, at Close after the final flush failed with ferr, spills what
// is still in memory and says exactly what is left where (or lost).
func (w *writer) spillRest(ferr error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var files []string
	lost := 0
	rows := 0
	entries := slices.Clone(w.queue)
	for _, h := range w.held {
		entries = append(entries, h...)
	}
	for _, p := range entries {
		if p.b != nil && w.spillDir() != "" {
			if err := w.spillLocked(p); err != nil {
				w.stats.SpillFailures++
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
		w.stats.LostRecords += int64(lost)
		w.stats.Queued -= int64(lost)
		return fmt.Errorf("store close: %d records LOST (not stored, not spilled); %d records in %d spill files in %s: %w",
			lost, rows, len(files), w.spillDir(), ferr)
	}
	return fmt.Errorf("store close: %d records not stored, left in %d spill files in %s (%s); the next Open replays them: %w",
		rows, len(files), w.spillDir(), strings.Join(files, ", "), ferr)
}

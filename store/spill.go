package store

import (
	"encoding/gob"
	"fmt"
	"os"
	"path/filepath"
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
	if err := os.MkdirAll(w.spillDir(), 0o755); err != nil {
		return fmt.Errorf("spill dir: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(w.spillDir(), "seg-*.gob"))
	if err != nil {
		return fmt.Errorf("spill dir: %w", err)
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
	return nil
}

// spillNewestLocked writes the newest in-memory batches to disk until the
// memory bound holds again.
func (w *writer) spillNewestLocked() {
	for i := len(w.queue) - 1; i >= 1 && w.memRow > w.opts.MaxBufferRows; i-- {
		// Entry 0 may be in the flusher's hands; never touch it.
		p := w.queue[i]
		if p.b == nil {
			continue
		}
		if err := w.spillLocked(p); err != nil {
			w.err = err
			return
		}
	}
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

// spillRest, at Close after the final flush failed with ferr, spills what
// is still in memory and says exactly what is left where (or lost).
func (w *writer) spillRest(ferr error) error {
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
		return fmt.Errorf("store close: %d records LOST (not stored, not spilled); %d records in %d spill files in %s: %w",
			lost, rows, len(files), w.spillDir(), ferr)
	}
	return fmt.Errorf("store close: %d records not stored, left in %d spill files in %s (%s); the next Open replays them: %w",
		rows, len(files), w.spillDir(), strings.Join(files, ", "), ferr)
}

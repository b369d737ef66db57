package store

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
)

// openDown opens an in-memory store whose engine takes nothing, before
// any record reaches it.
func openDown(t *testing.T, o Options) Store {
	t.Helper()
	if o.CloseTimeout == 0 {
		o.CloseTimeout = 200 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 50 * time.Millisecond
	}
	st, err := Open(context.Background(), "memory:", o)
	if err != nil {
		t.Fatal(err)
	}
	w := st.(*engine).writer
	w.ins = downInserter{w.ins}
	return st
}

func txBatch(from, n int) Batch {
	var b Batch
	for i := from; i < from+n; i++ {
		b.Transactions = append(b.Transactions, &reconstruct.Transaction{ID: fmt.Sprintf("c-%d", i), ConnectionID: "c",
			Index: i, Start: 1e18 + int64(i)*1e6, End: 1e18 + int64(i)*1e6 + 1e5, Total: 1e5, Tserver: 1e5, URL: "/x?token=secret"})
	}
	return b
}

// Spill files hold captured URLs: the directory is the owner's alone
// (0700) and so is every file (0600).
func TestSpillFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spill")
	st := openDown(t, Options{SpillDir: dir})
	if err := st.WriteBatch(context.Background(), txBatch(0, 10)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err == nil {
		t.Fatal("Close with the engine down: no error")
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("spill dir %v %v: want mode 0700", fi.Mode(), err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "seg-*.gob"))
	if len(files) == 0 {
		t.Fatal("nothing spilled")
	}
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, fi.Mode(), err)
		}
	}
}

// A spill file that cannot be read back (truncated by a crash, a full
// disk, an edit) is set aside as *.corrupt with its records counted lost,
// and the files behind it are stored: it used to be retried forever and
// block them all.
func TestCorruptSpillFileIsSetAside(t *testing.T) {
	dir := t.TempDir()
	st := openDown(t, Options{SpillDir: dir})
	for i := range 3 {
		if err := st.WriteBatch(context.Background(), txBatch(i*10, 10)); err != nil {
			t.Fatal(err)
		}
		if err := st.Flush(ctxShort(t)); err == nil {
			t.Fatal("flush with the engine down: no error")
		}
	}
	_ = st.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "seg-*.gob"))
	if len(files) < 2 {
		t.Fatalf("%d spill files, want several", len(files))
	}
	if err := os.Truncate(files[0], 7); err != nil { // the oldest: the queue's head
		t.Fatal(err)
	}
	st2, err := Open(context.Background(), "memory:", Options{SpillDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if err := st2.Flush(context.Background()); err != nil {
		t.Fatalf("flush after a corrupt spill file: %v", err)
	}
	s := st2.Stats()
	if s.CorruptSpillFiles != 1 || s.LostRecords == 0 || s.SpilledFiles != 0 || s.Written != 30-s.LostRecords {
		t.Errorf("stats %+v: want one corrupt file set aside, its records lost, the rest written", s)
	}
	if _, err := os.Stat(files[0] + ".corrupt"); err != nil {
		t.Errorf("the corrupt file was not kept for a person to look at: %v", err)
	}
}

// With the spill files at MaxSpillBytes, or spilling failed, a full buffer
// holds writers back instead of growing memory or losing records.
func TestSpillBoundGivesBackpressure(t *testing.T) {
	dir := t.TempDir()
	st := openDown(t, Options{SpillDir: dir, MaxBufferRows: 10, BatchRows: 10, MaxSpillBytes: 1})
	defer st.Close()
	var blocked error
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		blocked = st.WriteBatch(ctx, txBatch(i*10, 10))
		cancel()
		if blocked != nil {
			break
		}
		// Queue what was written (the engine fails it, so Flush errs).
		_ = st.Flush(ctxShort(t))
	}
	s := st.Stats()
	if blocked == nil {
		t.Fatalf("200 records with the engine down, a 10-record buffer and no room to spill were all taken: %+v", s)
	}
	if s.SpilledFiles > 1 {
		t.Errorf("%d spill files past a 1-byte bound", s.SpilledFiles)
	}
}

func ctxShort(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// A long live run meets ever new clients: the writer's memory of their
// classes stays bounded.
func TestClassMemoryIsBounded(t *testing.T) {
	w := &writer{classOf: map[netip.Addr]string{}}
	for i := range maxClassOf + 1000 {
		w.learnClassLocked(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), "c")
	}
	if n := len(w.classOf); n > maxClassOf || n == 0 {
		t.Errorf("%d clients remembered, want 1..%d", n, maxClassOf)
	}
}

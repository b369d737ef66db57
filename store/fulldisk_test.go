package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // the "duckdb" driver, to count rows behind the store's back

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/storetest"
)

// tmpfs mounts a file system of size (mount's syntax, "8m") on a fresh
// directory: a disk that really fills. Unmounted at cleanup, after
// everything registered later (the store) is closed.
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs (the test needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

func resize(t *testing.T, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s: %v: %s", dir, err, out)
	}
}

// fullDiskCase is one way a DuckDB file meets a full disk.
type fullDiskCase struct {
	name      string
	batchRows int // small: inserts go through the WAL; large: straight to the file, and checkpoints
	perWrite  int // transactions per WriteBatch
	more      int // writes after the inserts fail
	sameFS    bool
}

// TestDuckDBFullDisk fills the file system under a DuckDB file until its
// inserts fail, keeps writing, then makes room: nothing may be lost or
// counted written before it is stored, and once there is room every
// record must be stored exactly once. Spilling to another file system
// keeps taking records; with the spill directory on the full disk too,
// writers are held back (backpressure). Large batches make DuckDB fail
// a checkpoint, which invalidates the database: the store must reopen it.
func TestDuckDBFullDisk(t *testing.T) {
	for _, c := range []fullDiskCase{
		{name: "wal", batchRows: 5000, perWrite: 2000, more: 30},
		{name: "checkpoint", batchRows: 300000, perWrite: 60000, more: 2},
		{name: "spill-on-same-disk", batchRows: 5000, perWrite: 2000, more: 30, sameFS: true},
	} {
		t.Run(c.name, func(t *testing.T) { testFullDisk(t, c) })
	}
}

func testFullDisk(t *testing.T, c fullDiskCase) {
	disk := tmpfs(t, "8m")
	path := filepath.Join(disk, "rtmon.duckdb")
	spill := filepath.Join(t.TempDir(), "spill")
	if c.sameFS {
		spill = "" // the default: next to the database file
	}
	ctx := context.Background()
	s, err := store.Open(ctx, "duckdb:"+path, store.Options{SpillDir: spill, BatchRows: c.batchRows,
		MaxBufferRows: 20000, MaxAge: 100 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			s.Close()
		}
	})
	g := storetest.NewGen(21, storetest.T0, 1e7)
	ref := storetest.NewRef()
	write := func(wait time.Duration) error {
		b := g.Next(c.perWrite)
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		if err := s.WriteBatch(wctx, b); err != nil {
			return err
		}
		ref.Add(b)
		return nil
	}
	fillUntilFailing(t, s, write)
	// Keep writing while the disk is full, more records than the memory
	// buffer holds.
	var held error
	for range c.more {
		if held = write(time.Second); held != nil {
			break
		}
	}
	if !c.sameFS {
		// The flusher queues and spills what was written by age.
		waitFor(t, "batches spilled", func() bool { return s.Stats().SpilledFiles > 0 })
	}
	st := s.Stats()
	t.Logf("disk full: %+v", st)
	if !st.Failing || !st.DiskFull || st.Retries == 0 || st.LostRecords != 0 || st.Rejected != 0 {
		t.Errorf("disk full: want failing for lack of space, retrying, nothing lost; stats %+v", st)
	}
	if stored := int64(len(ref.Conns) + len(ref.Txs) + len(ref.Pvs)); st.Written+st.Queued != stored {
		t.Errorf("written %d + queued %d != %d records taken", st.Written, st.Queued, stored)
	}
	if c.sameFS {
		if _, err := os.Stat(path + ".spill"); err != nil {
			t.Errorf("no spill directory next to the database: %v", err)
		}
		if !errors.Is(held, context.DeadlineExceeded) || !st.SpillFailing || st.SpillFailures == 0 {
			t.Errorf("spill directory on the full disk: want writers held back (got %v) and spill failures counted; stats %+v", held, st)
		}
	} else if held != nil {
		t.Errorf("spill directory on another disk: want every write taken, got %v", held)
	}
	if c.name == "checkpoint" {
		// The failed checkpoint invalidated the database: the store
		// reopens it, which may itself need room (DuckDB writes the WAL's
		// recovery file), so on a disk still full it may only have tried.
		waitFor(t, "the invalidated database reopened or tried", func() bool {
			st := s.Stats()
			return st.Reopens > 0 || strings.Contains(st.LastError, "reopen")
		})
	}

	resize(t, disk, "256m")
	fctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := s.Flush(fctx); err != nil {
		t.Fatalf("flush after making room: %v (stats %+v)", err, s.Stats())
	}
	if c.name == "checkpoint" && s.Stats().Reopens == 0 {
		t.Errorf("the invalidated database was never reopened: stats %+v", s.Stats())
	}
	closed = true
	checkStoredOnce(t, s, path, ref)
}

// checkStoredOnce: after a flush, s holds every record of ref exactly once
// and counts nothing lost or written that is not stored; it closes s and
// counts the rows in its file at path.
func checkStoredOnce(t *testing.T, s store.Store, path string, ref *storetest.Ref) {
	t.Helper()
	st := s.Stats()
	t.Logf("room again: %+v", st)
	want := int64(len(ref.Conns) + len(ref.Txs) + len(ref.Pvs))
	if st.Queued != 0 || st.SpilledFiles != 0 || st.Failing || st.LostRecords != 0 || st.Written+st.Duplicates != want {
		t.Errorf("after flush: want %d records written or found stored, nothing queued or lost; stats %+v", want, st)
	}
	r := store.TimeRange{From: storetest.T0}
	if got, err := s.Counters(context.Background(), r, ""); err != nil || got != ref.Counters(r, "") {
		t.Errorf("counters %+v (%v)\nwant %+v", got, err, ref.Counters(r, ""))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rows := countRows(t, path)
	for table, n := range map[string]int{"connections": len(ref.Conns), "transactions": len(ref.Txs), "pageviews": len(ref.Pvs)} {
		if rows[table] != [2]int64{int64(n), int64(n)} {
			t.Errorf("%s: %d rows, %d distinct ids; want %d of each", table, rows[table][0], rows[table][1], n)
		}
	}
	if rows["connections"][0]+rows["transactions"][0]+rows["pageviews"][0] < st.Written {
		t.Errorf("written %d, but only %v rows stored", st.Written, rows)
	}
}

// Close on a full disk with nowhere to spill cannot keep what is queued:
// the loss is counted in LostRecords, not only told in Close's error.
func TestDuckDBCloseOnFullDiskCountsLoss(t *testing.T) {
	disk := tmpfs(t, "8m")
	ctx := context.Background()
	s, err := store.Open(ctx, "duckdb:"+filepath.Join(disk, "rtmon.duckdb"), store.Options{BatchRows: 5000,
		MaxAge: 100 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, CloseTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	g := storetest.NewGen(22, storetest.T0, 1e7)
	fillUntilFailing(t, s, func(wait time.Duration) error {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		return s.WriteBatch(wctx, g.Next(2000))
	})
	queued := s.Stats().Queued
	err = s.Close()
	st := s.Stats()
	if !errors.Is(err, context.DeadlineExceeded) || st.LostRecords != queued || st.Queued != 0 || st.SpillFailures == 0 {
		t.Errorf("close on a full disk: %v; stats %+v; want the %d queued records counted lost", err, st, queued)
	}
}

// fillUntilFailing writes until the store's inserts fail (the disk is
// full), waiting after each write until it is stored or failed.
func fillUntilFailing(t *testing.T, s store.Store, write func(time.Duration) error) {
	t.Helper()
	for i := 0; ; i++ {
		if i == 200 {
			t.Fatalf("200 writes and the 8 MiB disk is not full: %+v", s.Stats())
		}
		if err := write(time.Minute); err != nil {
			t.Fatalf("write %d while the disk had room: %v", i, err)
		}
		var st store.WriterStats
		waitFor(t, "the write stored or failing", func() bool {
			st = s.Stats()
			return st.Queued == 0 || st.Failing
		})
		if st.Failing {
			return
		}
	}
}

// waitFor polls cond with a deadline generous for a busy machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 2 minutes for %s", what)
		}
	}
}

// countRows reads, per record table, the rows and distinct ids stored in
// the DuckDB file at path (closed by the store).
func countRows(t *testing.T, path string) map[string][2]int64 {
	t.Helper()
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string][2]int64{}
	for _, table := range []string{"connections", "transactions", "pageviews"} {
		var n, ids int64
		if err := db.QueryRow(fmt.Sprintf("SELECT count(*), count(DISTINCT id) FROM %s", table)).Scan(&n, &ids); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		out[table] = [2]int64{n, ids}
	}
	return out
}

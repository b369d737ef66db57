package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/storetest"
)

func TestDuckDBMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := store.Open(context.Background(), "memory:", store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, nil)
}

func TestDuckDBFileConformance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rtmon.duckdb")
	open := func(t *testing.T) store.Store {
		s, err := store.Open(context.Background(), "duckdb:"+path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storetest.Run(t, open, open)
}

func TestDuckDBTTL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ttl.duckdb")
	storetest.RunTTL(t, func(t *testing.T, ttl time.Duration) store.Store {
		s, err := store.Open(context.Background(), "duckdb:"+path, store.Options{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestDuckDBLargeBatch writes batches of several row groups and checks
// every record is stored once with the right class; and that a writer far ahead of a healthy engine
// waits instead of spilling (the first 500k-record batch exceeds
// MaxBufferRows while the writer keeps adding).
func TestDuckDBLargeBatch(t *testing.T) {
	ctx := context.Background()
	spill := t.TempDir()
	// The writer tells a slow engine from a hung one by wall-clock time (it
	// waits max(MaxAge, twice the last batch) for room): a generous MaxAge
	// keeps that judgement out of the test's way on a busy machine, where
	// one batch may take several times the one before.
	s, err := store.Open(ctx, "duckdb:"+filepath.Join(t.TempDir(), "big.duckdb"),
		store.Options{SpillDir: spill, BatchRows: 500000, MaxBufferRows: 50000, MaxAge: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := storetest.NewGen(5, storetest.T0, 1e6)
	ref := storetest.NewRef()
	for range 40 {
		b := g.Next(10000)
		ref.Add(b)
		if err := s.WriteBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if want := int64(len(ref.Conns) + len(ref.Txs) + len(ref.Pvs)); st.Written != want || st.Duplicates != 0 {
		t.Fatalf("stats %+v, want Written %d", st, want)
	}
	if st.SpilledFiles != 0 || st.ReplayedFiles != 0 {
		t.Errorf("healthy engine spilled: %+v", st)
	}
	r := store.TimeRange{From: storetest.T0}
	for _, class := range []string{"", "gold", "bronze"} {
		got, err := s.Counters(ctx, r, class)
		if err != nil {
			t.Fatal(err)
		}
		if want := ref.Counters(r, class); got != want {
			t.Errorf("counters %q = %+v\nwant %+v", class, got, want)
		}
	}
}

package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/storetest"
)

// TestBackToBackCopiesStoredOnce queues the same records several times
// without a flush in between, so that a copy is deduplicated while the
// previous one is still being inserted (the writer prepares the next batch
// during an insert), and checks every record is stored exactly once.
func TestBackToBackCopiesStoredOnce(t *testing.T) {
	for _, url := range []string{"memory:", needCH(t).URL(freshDB())} {
		t.Run(url[:6], func(t *testing.T) {
			ctx := context.Background()
			s, err := store.Open(ctx, url, store.Options{BatchRows: 1000, SpillDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			g := storetest.NewGen(7, storetest.T0, int64(time.Second))
			b := g.Next(3000)
			b2 := g.Next(3000)
			for _, x := range []store.Batch{b, b, b2, b, b2, b2} {
				if err := s.WriteBatch(ctx, x); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for _, k := range []store.Kind{store.Transactions, store.Pageviews} {
				e, err := s.Extent(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				want := len(b.Transactions) + len(b2.Transactions)
				if k == store.Pageviews {
					want = len(b.Pageviews) + len(b2.Pageviews)
				}
				if e.N != int64(want) {
					t.Errorf("%s stored %d, want %d", k, e.N, want)
				}
			}
			st := s.Stats()
			if want := int64(2*b.Len() + 2*b2.Len()); st.Duplicates != want || st.Written != int64(b.Len()+b2.Len()) {
				t.Errorf("stats %+v: want %d duplicates, %d written", st, want, b.Len()+b2.Len())
			}
		})
	}
}

// TestDuckDBCutsBatchesAtRowGroups: a batch cut by size stores whole row
// groups (122,880 records) of each table and keeps the rest for later; a
// flush then stores everything.
func TestDuckDBCutsBatchesAtRowGroups(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, "memory:", store.Options{BatchRows: 1000, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const rowGroup = 122880
	b := storetest.NewGen(3, storetest.T0, int64(time.Millisecond)).Next(rowGroup + 5000)
	if len(b.Pageviews) >= rowGroup || len(b.Transactions) < rowGroup {
		t.Fatalf("test data: %d transactions, %d pageviews", len(b.Transactions), len(b.Pageviews))
	}
	if err := s.WriteBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	count := func(k store.Kind) int64 {
		e, err := s.Extent(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return e.N
	}
	deadline := time.Now().Add(60 * time.Second)
	for count(store.Transactions) < rowGroup && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := count(store.Transactions); n != rowGroup {
		t.Fatalf("before flush: %d transactions stored, want one row group (%d)", n, rowGroup)
	}
	if n := count(store.Pageviews); n != 0 {
		t.Errorf("before flush: %d pageviews stored, want 0 (fewer than a row group wait)", n)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(store.Transactions); n != int64(len(b.Transactions)) {
		t.Errorf("after flush: %d transactions, want %d", n, len(b.Transactions))
	}
	if n := count(store.Pageviews); n != int64(len(b.Pageviews)) {
		t.Errorf("after flush: %d pageviews, want %d", n, len(b.Pageviews))
	}
	if st := s.Stats(); st.Written != int64(b.Len()) || st.Queued != 0 {
		t.Errorf("stats %+v, want %d written", st, b.Len())
	}
}

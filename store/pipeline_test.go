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

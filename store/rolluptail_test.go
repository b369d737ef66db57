package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/storetest"
)

// rowCounter is the store's count of records its counting queries read.
type rowCounter interface{ RawRowsRead() int64 }

// A live store always has a tail: minutes the writer has stored records in
// but not rolled up yet (it waits a minute for more). Summary recomputes
// exactly those minutes from the records and reads the rest from the
// rollups, so its answer is exact and reads the tail's records only; it
// used to check every minute against the records, reading all of them.
func TestSummaryReadsOnlyTheTail(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, "memory:", store.Options{MaxAge: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ref := storetest.NewRef()
	bulk := storetest.NewGen(31, storetest.T0, 1e7)
	for range 5 {
		b := bulk.Next(4000)
		ref.Add(b)
		if err := s.WriteBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil { // stored and rolled up
		t.Fatal(err)
	}
	// The tail, a month later: no minute shared with the bulk.
	tail := storetest.NewGen(32, storetest.T0+int64(30*24*time.Hour), 1e7).Next(300)
	ref.Add(tail)
	if err := s.WriteBatch(ctx, tail); err != nil {
		t.Fatal(err)
	}
	want := int64(len(ref.Conns) + len(ref.Txs) + len(ref.Pvs))
	waitFor(t, "the tail stored", func() bool { st := s.Stats(); return st.Queued == 0 && st.Written == want })

	for _, step := range []time.Duration{0, time.Minute} { // hour rows, minute rows
		q := store.SummaryQuery{Edges: store.LogEdges(1e6, 1e11, 100), Qs: []float64{0.5, 0.99}, Step: step}
		before := s.(rowCounter).RawRowsRead()
		got, err := s.Summary(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		read := s.(rowCounter).RawRowsRead() - before
		if got.Recomputed == 0 || read != int64(tail.Len()) {
			t.Errorf("step %v: recomputed %d minutes reading %d records; want the tail's, %d records", step, got.Recomputed, read, tail.Len())
		}
		got.Recomputed = 0
		if w := ref.Summary(q); !sameSummary(got, w) {
			t.Errorf("step %v with a tail:\n got %+v\nwant %+v", step, got, w)
		}
	}
}

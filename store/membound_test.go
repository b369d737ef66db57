package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// stuckInserter cuts batches by a granule, as DuckDB's row groups do, and
// holds every insert until released: a flusher inside a slow insert.
type stuckInserter struct {
	inserter
	entered chan struct{}
	release chan struct{}
}

func (s stuckInserter) insert(ctx context.Context, c *colSet) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return s.inserter.insert(ctx, c)
}

func (stuckInserter) granule() int { return 1000 }

// TestMemoryBoundHoldsWhileTheFlusherIsStuck: records a granule cut
// leaves in the current buffer count against MaxBufferRows too. While
// the flusher is stuck in an insert, writers are held back once the
// bound is reached (no spill directory: backpressure) instead of piling
// records up in memory; once the insert returns, everything taken is
// stored.
func TestMemoryBoundHoldsWhileTheFlusherIsStuck(t *testing.T) {
	const bound = 500
	st, err := Open(context.Background(), "memory:", Options{BatchRows: 100, MaxBufferRows: bound, MaxAge: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w := st.(*engine).writer
	stuck := stuckInserter{inserter: w.ins, entered: make(chan struct{}, 1), release: make(chan struct{})}
	w.mu.Lock()
	w.ins = stuck
	w.mu.Unlock()
	released := false
	defer func() {
		if !released {
			close(stuck.release)
		}
		st.Close()
	}()
	if err := st.WriteBatch(context.Background(), txBatch(0, 50)); err != nil {
		t.Fatal(err)
	}
	<-stuck.entered // the age flush queued them; the insert holds
	taken, held := 50, false
	for i := range 40 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := st.WriteBatch(ctx, txBatch(50+100*i, 100))
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			held = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		taken += 100
		if q := st.Stats().Queued; q > bound+100 {
			t.Fatalf("%d records held in memory, bound %d (one write over it at most)", q, bound)
		}
	}
	if !held {
		t.Fatalf("%d records taken with the flusher stuck and a bound of %d: no writer was held back", taken, bound)
	}
	close(stuck.release)
	released = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := st.Stats(); s.Written != int64(taken) || s.Queued != 0 || s.LostRecords != 0 {
		t.Errorf("after release: want the %d records taken written, none queued or lost; stats %+v", taken, s)
	}
}

package store_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/storetest"
)

// TestSummaryWhileWriting asks for the overview while batches keep
// arriving in the minutes it recomputes from the records: every class's
// histogram must hold exactly its count. (The count and the histogram were
// two queries; records written between them made buckets outgrow the
// count, and /metrics paged for a class that met its objective.)
func TestSummaryWhileWriting(t *testing.T) {
	edges := []int64{0, store.RollupEdges[300], store.RollupEdges[400], store.RollupEdges[500]}
	onEngines(t, store.Options{Rollups: "on"}, func(t *testing.T, ctx context.Context, s store.Store) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 100000; i++ {
				var b store.Batch
				for j := range 20 {
					n := i*20 + j
					b.Transactions = append(b.Transactions, &reconstruct.Transaction{ID: fmt.Sprintf("race-%d", n), ConnectionID: "c",
						Start: storetest.T0 + int64(n%60000)*int64(time.Millisecond), Total: int64(n%7+1) * int64(100*time.Millisecond),
						Class: []string{"a", "b"}[n%2], Client: netip.MustParseAddr("10.0.0.1"), Server: netip.MustParseAddr("10.0.0.2")})
				}
				if err := s.WriteBatch(ctx, b); err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		}()
		bad := 0
		for k := 0; k < 100; k++ {
			sum, err := s.Summary(ctx, store.SummaryQuery{Range: store.TimeRange{From: storetest.T0}, Edges: edges})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range sum.Histograms {
				var n int64
				for _, c := range h.Counts {
					n += c
				}
				if n != h.Total && bad < 5 {
					bad++
					t.Errorf("summary %d, class %s: buckets hold %d, count %d", k, h.Class, n, h.Total)
				}
			}
		}
		cancel()
		wg.Wait()
	})
}

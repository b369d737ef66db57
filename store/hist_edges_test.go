package store_test

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/storetest"
)

// TestHistogramAtEdges puts values exactly on, and one ns either side of,
// every edge of the UI's log-spaced histogram (and a few extremes), where a
// bucket computed from a logarithm would go wrong if its correction did not
// hold, and checks both engines against the reference.
func TestHistogramAtEdges(t *testing.T) {
	edgeSets := [][]int64{store.LogEdges(int64(time.Millisecond), int64(100*time.Second), 100), store.LogEdges(1e5, 1e10, 40),
		store.LogEdges(1, 1000, 30)}
	var b store.Batch
	n := 0
	add := func(v int64) {
		n++
		b.Transactions = append(b.Transactions, &reconstruct.Transaction{ID: fmt.Sprintf("edge-%d", n), ConnectionID: "c",
			Start: storetest.T0 + int64(n), Total: v, Class: []string{"a", "b"}[n%2], Client: netip.MustParseAddr("10.0.0.1"),
			Server: netip.MustParseAddr("10.0.0.2")})
	}
	for _, edges := range edgeSets {
		for _, e := range edges {
			add(e - 1)
			add(e)
			add(e + 1)
		}
	}
	for _, v := range []int64{-5, 0, 1, 1 << 40, 1<<62 + 12345} {
		add(v)
	}
	ref := storetest.NewRef()
	ref.Add(b)
	onEngines(t, store.Options{}, func(t *testing.T, ctx context.Context, s store.Store) {
		if err := s.WriteBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for _, edges := range edgeSets {
			q := store.HistogramQuery{Range: store.TimeRange{From: storetest.T0}, Edges: edges}
			got, err := s.Histogram(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if want := ref.Histogram(q); !reflect.DeepEqual(got, want) {
				t.Errorf("%d edges from %d: store\n%v\nreference\n%v", len(edges), edges[1], got, want)
			}
		}
	})
}

// onEngines runs f on a fresh DuckDB memory store and a fresh ClickHouse
// database, each opened with opts.
func onEngines(t *testing.T, opts store.Options, f func(t *testing.T, ctx context.Context, s store.Store)) {
	for _, url := range []string{"memory:", needCH(t).URL(freshDB())} {
		t.Run(url[:6], func(t *testing.T) {
			ctx := context.Background()
			opts.SpillDir = t.TempDir()
			s, err := store.Open(ctx, url, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			f(t, ctx, s)
		})
	}
}

package store_test

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/query"
	"github.com/rtmon/rtmon/store/storetest"
)

func TestSampleDuckDB(t *testing.T) {
	checkSample(t, func(sensor string) store.Store {
		s, err := store.Open(context.Background(), "memory:", store.Options{Sensor: sensor})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestSampleClickHouse(t *testing.T) {
	url := needCH(t).URL(freshDB())
	checkSample(t, func(sensor string) store.Store {
		s, err := store.Open(context.Background(), url, store.Options{Sensor: sensor, SpillDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// checkSample writes generated records and checks Sample against a
// reference computed from the records themselves: per class the Max
// smallest SampleKeys, their component values, the class's count; the
// sensor filter; the same answer twice.
func checkSample(t *testing.T, open func(sensor string) store.Store) {
	ctx := context.Background()
	s := open("s1")
	defer s.Close()
	g := storetest.NewGen(3, storetest.T0, 1e9)
	b := g.Next(3000)
	if err := s.WriteBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The range cuts some records off, so the filter is checked too.
	rng := query.TimeRange{From: b.Transactions[100].Start, To: b.Transactions[2500].Start}
	byClass := map[string][]*reconstruct.Transaction{}
	for _, tx := range b.Transactions {
		if tx.Start >= rng.From && tx.Start < rng.To {
			c := tx.Class
			if c == "" {
				c = storedClass(t, s, tx.ID)
			}
			byClass[c] = append(byClass[c], tx)
		}
	}
	const maxN, seed = 150, 7
	sq := query.SampleQuery{Kind: query.Transactions, Range: rng, Components: []string{"total", "tserver"}, Max: maxN, Seed: seed}
	got, err := s.Sample(ctx, sq)
	if err != nil {
		t.Fatal(err)
	}
	if names := classesOf(got); !slices.Equal(names, slices.Sorted(maps.Keys(byClass))) {
		t.Fatalf("classes %v, want %v", names, slices.Sorted(maps.Keys(byClass)))
	}
	for _, cs := range got {
		txs := byClass[cs.Class]
		slices.SortFunc(txs, func(a, b *reconstruct.Transaction) int {
			return cmp.Compare(query.SampleKey(seed, a.ID), query.SampleKey(seed, b.ID))
		})
		txs = txs[:min(maxN, len(txs))]
		var wantTotal, wantServer []int64
		for _, tx := range txs {
			wantTotal, wantServer = append(wantTotal, tx.Total), append(wantServer, tx.Tserver)
		}
		if cs.Count != int64(len(byClass[cs.Class])) || !slices.Equal(cs.Values["total"], wantTotal) || !slices.Equal(cs.Values["tserver"], wantServer) {
			t.Errorf("%s: count %d (want %d), %d values, not the %d smallest keys' records", cs.Class, cs.Count, len(byClass[cs.Class]), len(cs.Values["total"]), len(txs))
		}
	}
	again, err := s.Sample(ctx, sq)
	if err != nil || !sameSamples(got, again) {
		t.Errorf("second read differs (%v)", err)
	}
	sq.Sensor = "other"
	if none, err := s.Sample(ctx, sq); err != nil || len(none) != 0 {
		t.Errorf("sensor other: %d classes, %v; want none", len(none), err)
	}
	sq.Sensor, sq.Class = "s1", got[0].Class
	if one, err := s.Sample(ctx, sq); err != nil || len(one) != 1 || !sameSamples(one, got[:1]) {
		t.Errorf("sensor s1, class %s: %v", got[0].Class, err)
	}
	if _, err := s.Sample(ctx, query.SampleQuery{Components: []string{"total; DROP TABLE transactions"}}); err == nil {
		t.Error("an unknown component was accepted")
	}
}

func storedClass(t *testing.T, s store.Store, id string) string {
	t.Helper()
	res, err := s.Search(context.Background(), query.SearchQuery{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	for _, tx := range res.Transactions {
		if tx.ID == id {
			return tx.Class
		}
	}
	t.Fatalf("transaction %s not stored", id)
	return ""
}

func classesOf(l []query.ClassSample) []string {
	var out []string
	for _, cs := range l {
		out = append(out, cs.Class)
	}
	return out
}

func sameSamples(a, b []query.ClassSample) bool {
	return slices.EqualFunc(a, b, func(x, y query.ClassSample) bool {
		return x.Class == y.Class && x.Count == y.Count && maps.EqualFunc(x.Values, y.Values, slices.Equal)
	})
}

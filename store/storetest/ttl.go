package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
)

// RunTTL checks retention: data of the last four days is written, the
// store is reopened with a TTL of 36 h, and exactly the days before
// (now - 36 h) must be gone. open must reopen the same storage each time.
func RunTTL(t *testing.T, open func(t *testing.T, ttl time.Duration) store.Store) {
	ctx := context.Background()
	now := time.Now().UTC()
	start := now.Add(-4 * 24 * time.Hour).UnixNano()
	g := NewGen(21, start, int64(4*24*time.Hour)/1500)
	ref := NewRef()
	s := open(t, 0)
	for i := 0; i < 5; i++ {
		b := g.Next(800)
		ref.Add(b)
		if err := s.WriteBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ttl := 36 * time.Hour
	s = open(t, ttl)
	defer s.Close()
	y, m, d := now.Add(-ttl).Date()
	cutoff := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).UnixNano()
	all := store.TimeRange{From: start - int64(time.Hour)}
	got, err := s.Counters(ctx, all, "")
	if err != nil {
		t.Fatal(err)
	}
	want := ref.Counters(store.TimeRange{From: cutoff}, "")
	if got != want {
		t.Fatalf("after TTL counters = %+v\nwant (days from %v) %+v", got, time.Unix(0, cutoff).UTC(), want)
	}
	// The rollups of the expired days went with them: the summary's
	// counters (from rollups, recomputing whatever is stale) agree.
	sum, err := s.Summary(ctx, store.SummaryQuery{Range: all})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Counters != want {
		t.Fatalf("after TTL summary counters = %+v\nwant %+v", sum.Counters, want)
	}
	if before := ref.Counters(all, ""); before.Transactions == want.Transactions {
		t.Fatalf("TTL test data has nothing to expire")
	}
}

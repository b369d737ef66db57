package stitch

import (
	"context"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
)

// checkCheckpointRetention: a store's retention drops the checkpoints of
// expired days with the records they point into, and keeps recent ones.
func checkCheckpointRetention(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UnixNano()
	old, recent := now-int64(40*24*time.Hour), now-int64(time.Hour)
	st, err := store.Open(ctx, url, store.Options{SpillDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := store.StitchingOf(st)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	for name, at := range map[string]int64{"retention old": old, "retention recent": recent} {
		if err := acc.SetCheckpoint(ctx, name, at); err != nil {
			st.Close()
			t.Fatal(err)
		}
		if got, ok, err := acc.Checkpoint(ctx, name); err != nil || !ok || got != at {
			t.Errorf("checkpoint %q before retention: %d %v %v, want %d", name, got, ok, err, at)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openStoreWith(t, url, store.Options{SpillDir: "-", TTL: 30 * 24 * time.Hour})
	if acc, err = store.StitchingOf(st); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := acc.Checkpoint(ctx, "retention old"); err != nil || ok {
		t.Errorf("checkpoint of 40 days ago after a 30-day retention: %d %v %v, want none", got, ok, err)
	}
	if got, ok, err := acc.Checkpoint(ctx, "retention recent"); err != nil || !ok || got != recent {
		t.Errorf("checkpoint of an hour ago after retention: %d %v %v, want %d", got, ok, err, recent)
	}
}

func openStoreWith(t *testing.T, url string, opts store.Options) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestCheckpointRetention on DuckDB; the ClickHouse tests run it on one
// server and on a cluster.
func TestCheckpointRetention(t *testing.T) {
	checkCheckpointRetention(t, tempDuck(t, "retention"))
}

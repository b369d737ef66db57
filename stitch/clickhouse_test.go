package stitch

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/chtest"
)

// TestStitchClickHouse runs the stitching on the ClickHouse store (the
// Debian package, 18.16 here): the sensors column's migration, the delete
// and update mutations, the checkpoint table, and a second run changing
// nothing.
func TestStitchClickHouse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, err := chtest.Start(ctx, t.TempDir(), 0, 0)
	if err != nil {
		t.Fatalf("clickhouse test server: %v", err)
	}
	defer srv.Stop()
	url := srv.URL("rtmon_stitch")

	items := synthItems(t, browsing)
	ref := newReference(items)
	opts := store.Options{SpillDir: "-"}
	writeSensorsWith(t, url, items, opts)
	st, err := store.Open(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := store.TimeRange{From: ref.from - int64(time.Minute), To: ref.to + int64(time.Minute)}
	stats := run(t, st, ref.config())
	if stats.Stitched != ref.stitchedCount() {
		t.Errorf("stitched %d pageviews, %d span both sensors", stats.Stitched, ref.stitchedCount())
	}
	first := readSnapshot(t, st, r)
	ref.check(t, first)

	cfg := ref.config()
	cfg.From = 0 // resumes from the checkpoint: nothing left
	if again := run(t, st, cfg); again.Resumed != stats.Done || again.Windows != 0 {
		t.Errorf("resumed run: %+v, want resumed at %d with nothing to do", again, stats.Done)
	}
	cfg = ref.config()
	cfg.IgnoreCheckpoint = true
	run(t, st, cfg)
	if second := readSnapshot(t, st, r); !reflect.DeepEqual(first, second) {
		t.Errorf("a second run changed the store: %d pageviews, then %d", first.n, second.n)
	}
	checkCheckpointRetention(t, url)
}

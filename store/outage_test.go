package store_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/chtest"
	"github.com/rtmon/rtmon/store/storetest"
)

// ownServer starts a ClickHouse server only this test stops and restarts.
func ownServer(t *testing.T) *chtest.Server {
	needCH(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := chtest.Start(ctx, t.TempDir(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	return srv
}

func checkExactlyOnce(t *testing.T, s store.Store, ref *storetest.Ref) {
	t.Helper()
	r := store.TimeRange{From: storetest.T0}
	got, err := s.Counters(context.Background(), r, "")
	if err != nil {
		t.Fatal(err)
	}
	want := ref.Counters(r, "")
	if got != want {
		t.Fatalf("after outage counters = %+v\nwant %+v", got, want)
	}
	res, err := s.Search(context.Background(), store.SearchQuery{Range: r, Kind: store.Pageviews, Limit: 1})
	if err != nil || res.Total != int64(len(ref.Pvs)) {
		t.Fatalf("pageviews stored %d (err %v), want %d", res.Total, err, len(ref.Pvs))
	}
}

// TestClickHouseOutage stops the real server in the middle of an ingest and
// restarts it; every record must arrive exactly once, in order, via memory
// and spill files.
func TestClickHouseOutage(t *testing.T) {
	srv := ownServer(t)
	spill := t.TempDir()
	ctx := context.Background()
	s, err := store.Open(ctx, srv.URL("outage"), store.Options{SpillDir: spill, BatchRows: 10000,
		MaxBufferRows: 15000, MaxAge: 100 * time.Millisecond, MaxBackoff: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := storetest.NewGen(11, storetest.T0, 1e7)
	ref := storetest.NewRef()
	write := func(n int) {
		for i := 0; i < n; i++ {
			b := g.Next(2000)
			ref.Add(b)
			if err := s.WriteBatch(ctx, b); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	write(15)
	srv.Stop()
	write(30) // ~100k records while the server is down: memory then spill files
	st := s.Stats()
	files, _ := filepath.Glob(filepath.Join(spill, "seg-*.gob"))
	if st.Retries == 0 || len(files) == 0 {
		t.Fatalf("server down but stats %+v, %d spill files", st, len(files))
	}
	t.Logf("during outage: %+v, %d spill files", st, len(files))
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	write(15)
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := s.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	st = s.Stats()
	t.Logf("after restart: %+v", st)
	if st.ReplayedFiles == 0 || st.SpilledFiles != 0 || st.Queued != 0 {
		t.Fatalf("after flush stats %+v", st)
	}
	if files, _ := filepath.Glob(filepath.Join(spill, "*")); len(files) != 0 {
		t.Fatalf("spill files left after flush: %v", files)
	}
	checkExactlyOnce(t, s, ref)
}

// TestClickHouseCloseWhileDown: Close with the server down says what is left
// on disk; the next Open replays it.
func TestClickHouseCloseWhileDown(t *testing.T) {
	srv := ownServer(t)
	spill := t.TempDir()
	ctx := context.Background()
	opts := store.Options{SpillDir: spill, CloseTimeout: time.Second, MaxBackoff: 200 * time.Millisecond}
	s, err := store.Open(ctx, srv.URL("closedown"), opts)
	if err != nil {
		t.Fatal(err)
	}
	g := storetest.NewGen(12, storetest.T0, 1e7)
	ref := storetest.NewRef()
	b := g.Next(3000)
	ref.Add(b)
	if err := s.WriteBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	b = g.Next(3000)
	ref.Add(b)
	if err := s.WriteBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	err = s.Close()
	if err == nil || !strings.Contains(err.Error(), spill) || !strings.Contains(err.Error(), "the next Open replays them") {
		t.Fatalf("Close with server down: %v", err)
	}
	t.Logf("Close said: %.300s", err)
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open(ctx, srv.URL("closedown"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.ReplayedFiles != 1 || int(st.Written) != b.Len() {
		t.Fatalf("replay stats %+v, want 1 file of %d records", st, b.Len())
	}
	checkExactlyOnce(t, s, ref)
}

func TestOpenErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	cases := map[string]string{
		"":                                "want memory:, duckdb:PATH or clickhouse://",
		"postgres://x/y":                  "want memory:, duckdb:PATH or clickhouse://",
		"duckdb:":                         "needs a file path",
		"clickhouse://":                   "no host",
		"clickhouse://" + dead + "/db":    "unreachable",
		"clickhouse://127.0.0.1:1/bad-db": "database name",
		"duckdb:" + filepath.Join(os.DevNull, "x.db"): "duckdb",
	}
	for url, want := range cases {
		start := time.Now()
		s, err := store.Open(context.Background(), url, store.Options{ConnectTimeout: 2 * time.Second})
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", url)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want it to mention %q", url, err, want)
		}
		// ConnectTimeout is honoured: without it the driver waits 30 s.
		// The bound is far from both so a busy machine cannot decide it.
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("Open(%q) took %v with a 2 s connect timeout", url, d)
		}
	}
}

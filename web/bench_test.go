package web

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/chtest"
	"github.com/rtmon/rtmon/store/storetest"
)

// BenchmarkOverviewFirstRender times the overview from navigation to its
// first full render (every chart drawn) in headless Chromium, over a store
// holding RTMON_WEB_BENCH_TX transactions (default 1,000,000, with their
// connections and pageviews, spread over a day): the embedded DuckDB store
// and a ClickHouse server of the benchmark's own. It also reports the
// /api/overview time alone. On ClickHouse it first renders three times
// right after the load (logged: the server is still merging the load's
// parts) and then times the steady state, once merges have settled. Run
// with:
//
//	go test ./web -run '^$' -bench OverviewFirstRender -benchtime 5x
func BenchmarkOverviewFirstRender(b *testing.B) {
	b.Run("duckdb", func(b *testing.B) {
		benchOverview(b, "duckdb:"+filepath.Join(b.TempDir(), "bench.duckdb"), nil)
	})
	b.Run("clickhouse", func(b *testing.B) {
		dir := b.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		srv, err := chtest.Start(ctx, dir, 0, 0)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Stop()
		benchOverview(b, srv.URL("rtmon_bench"), func() error { return srv.WaitMerges(context.Background(), 5*time.Minute) })
	})
}

func benchOverview(b *testing.B, storeURL string, settle func() error) {
	n := 1_000_000
	if v := os.Getenv("RTMON_WEB_BENCH_TX"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	st, err := store.Open(ctx, storeURL, store.Options{Rollups: os.Getenv("RTMON_BENCH_ROLLUPS")})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	res, err := storetest.Ingest(ctx, st, n, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("ingested %d transactions (%d records) in %v", res.Transactions, res.Records, res.Elapsed)
	// No answer cache: every iteration is a cold render.
	_, ts := newTestServer(b, Config{Store: st, CacheTTL: -1})

	// The API alone, for the split between store and browser.
	start := time.Now()
	resp, err := http.Get(ts.URL + "/api/overview")
	if err != nil {
		b.Fatal(err)
	}
	readAll(b, resp)
	if resp.StatusCode != 200 {
		b.Fatalf("api: %d", resp.StatusCode)
	}
	b.Logf("/api/overview (first, cold): %v", time.Since(start))

	tb := newTab(b)
	tb.open(ts.URL+"/", `#overview[data-rendered="1"]`) // warm the browser
	render := func(i int) {
		tb.run(chromedp.Navigate(ts.URL+"/?bench="+strconv.Itoa(i)), chromedp.WaitReady(chromedp.CSS(`#overview[data-rendered="1"]`)))
	}
	if settle != nil {
		for i := range 3 {
			t0 := time.Now()
			render(-1 - i)
			b.Logf("render while merging: %v", time.Since(t0))
		}
		t0 := time.Now()
		if err := settle(); err != nil {
			b.Fatal(err)
		}
		b.Logf("merges settled after %v more", time.Since(t0))
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		render(i)
		i++
	}
	b.StopTimer()
	var rows int
	tb.eval(`document.querySelectorAll('#percentiles tbody tr').length`, &rows)
	if rows == 0 {
		b.Fatal("overview rendered no classes")
	}
	tb.screenshot("bench-overview-" + strings.TrimPrefix(b.Name(), "BenchmarkOverviewFirstRender/"))
}

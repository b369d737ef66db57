package web

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/query"
	"github.com/rtmon/rtmon/store/storetest"
)

// statsQuerier reports the writer stats it is given, over a real store.
type statsQuerier struct {
	query.Querier
	mu sync.Mutex
	st query.WriterStats
}

func (q *statsQuerier) Stats() query.WriterStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.st
}

func (q *statsQuerier) set(st query.WriterStats) {
	q.mu.Lock()
	q.st = st
	q.mu.Unlock()
}

// A store that cannot write for lack of disk space says so where an SRE
// looks: /metrics, /healthz, the overview (its cached computation must
// not keep the state from before the failure) and the live status strip.
// Once it stores again the state clears.
func TestStoreFailureIsShown(t *testing.T) {
	q := &statsQuerier{Querier: knownCapture(t), st: query.WriterStats{Written: 10, Rollups: true}}
	feed := NewLiveFeed()
	_, ts := newTestServer(t, Config{Store: q, Live: feed})
	var o Overview
	getJSON(t, ts.URL+"/api/overview", &o) // cached as of Written 10
	if o.StoreState != "" {
		t.Fatalf("healthy store shown as %q", o.StoreState)
	}

	full := query.WriterStats{Written: 10, Queued: 5000, Retries: 3, Failing: true, DiskFull: true, SpillFailing: true,
		SpillFailures: 2, Reopens: 1, LastError: "No space left on device", Rollups: true}
	q.set(full)
	body := string(readAll(t, get(t, ts.URL+"/metrics")))
	for _, want := range []string{"rtmon_store_insert_failing 1", "rtmon_store_disk_full 1", "rtmon_store_spill_failing 1",
		"rtmon_store_spill_failures_total 2", "rtmon_store_reopens_total 1", "rtmon_store_retries_total 3", "rtmon_store_lost_records_total 0"} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	if h := string(readAll(t, get(t, ts.URL+"/healthz"))); !strings.Contains(h, "disk full") {
		t.Errorf("healthz %q does not say the disk is full", h)
	}
	var failing Overview
	getJSON(t, ts.URL+"/api/overview", &failing)
	if o = failing; o.StoreState != "disk full" || !o.Store.Failing || o.Store.Queued != 5000 {
		t.Errorf("overview shows state %q, stats %+v; want the store's now", o.StoreState, o.Store)
	}
	if p := StatsFrom(capture.Stats{}, reconstruct.Stats{}, full); p.StoreState != "disk full" {
		t.Errorf("live status strip state %q", p.StoreState)
	}

	q.set(query.WriterStats{Written: 5010, LastError: full.LastError, SpillFailures: 2, Reopens: 1, Rollups: true})
	body = string(readAll(t, get(t, ts.URL+"/metrics")))
	for _, want := range []string{"rtmon_store_insert_failing 0", "rtmon_store_disk_full 0", "rtmon_store_spill_failing 0"} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("after recovery metrics lack %q", want)
		}
	}
	var after Overview // store_state is omitted when empty: decode into a fresh value
	getJSON(t, ts.URL+"/api/overview", &after)
	if after.StoreState != "" {
		t.Errorf("recovered store still shown as %q", after.StoreState)
	}
}

// rowCounter is the store's count of records its counting queries read.
type rowCounter interface{ RawRowsRead() int64 }

// metricsStore holds bulk batches of 4000 transactions (with their
// connections and pageviews), stored and rolled up, and a tail of 300 a
// month later, stored but not rolled up yet (the writer waits a minute),
// as in a live run. It returns the tail's record count.
func metricsStore(t testing.TB, bulk int) (store.Store, int) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:", store.Options{MaxAge: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g := storetest.NewGen(41, storetest.T0, 1e7)
	for range bulk {
		if err := st.WriteBatch(ctx, g.Next(4000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	tail := storetest.NewGen(42, storetest.T0+int64(30*24*time.Hour), 1e7).Next(300)
	written := st.Stats().Written + int64(tail.Len())
	if err := st.WriteBatch(ctx, tail); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); st.Stats().Written != written; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("tail not stored: %+v", st.Stats())
		}
	}
	return st, tail.Len()
}

// rollupsOff hides that the writer keeps the rollups: /metrics then reads
// the records, the full scan the rollups' answer must equal.
type rollupsOff struct{ query.Querier }

func (q rollupsOff) Stats() query.WriterStats {
	st := q.Querier.Stats()
	st.Rollups = false
	return st
}

// storeLines scrapes /metrics from a fresh server (no cached reads) and
// returns its histogram and per-class counter lines, without the
// histograms' sums (the full scan approximates them).
func storeLines(t *testing.T, q query.Querier) []string {
	t.Helper()
	_, ts := newTestServer(t, Config{Store: q})
	var out []string
	for line := range strings.Lines(string(readAll(t, get(t, ts.URL+"/metrics")))) {
		if strings.HasPrefix(line, "rtmon_") && !strings.HasPrefix(line, "rtmon_store_") && !strings.Contains(line, "_sum{") {
			out = append(out, line)
		}
	}
	return out
}

// /metrics reads the histograms and per-class counters from the rollups:
// a scrape reads the same records (the tail the writer has not rolled up)
// whether the store holds 10 or 100 thousand, and its numbers are a full
// scan's. It used to scan every record at every scrape (at most once per
// 10 s).
func TestMetricsScrapeCostIsConstant(t *testing.T) {
	var reads []int64
	for _, bulk := range []int{2, 20} {
		st, tail := metricsStore(t, bulk)
		stored := st.Stats().Written
		n0 := st.(rowCounter).RawRowsRead()
		got := storeLines(t, st)
		read := st.(rowCounter).RawRowsRead() - n0
		reads = append(reads, read)
		full := storeLines(t, rollupsOff{st})
		scanned := st.(rowCounter).RawRowsRead() - n0 - read
		t.Logf("%d records stored: a scrape read %d from the records (tail %d); a full scan %d", stored, read, tail, scanned)
		if read == 0 || read > 2*int64(tail) || scanned < stored {
			t.Errorf("%d records stored, tail %d: the scrape read %d records, the full scan %d", stored, tail, read, scanned)
		}
		if len(got) < 20 || strings.Join(got, "") != strings.Join(full, "") {
			t.Errorf("from the rollups:\n%s\nfrom the records:\n%s", strings.Join(got, ""), strings.Join(full, ""))
		}
	}
	if reads[0] != reads[1] {
		t.Errorf("records read per scrape grew with the store: %v", reads)
	}
}

// BenchmarkMetricsScrape times the store's part of a /metrics scrape (one
// read, as a scrape past the 10 s cache makes) over 10x and 100x the
// records, from the rollups and, for comparison, from the records:
//
//	go test ./web -run '^$' -bench MetricsScrape
func BenchmarkMetricsScrape(b *testing.B) {
	for _, bulk := range []int{3, 30} {
		st, _ := metricsStore(b, bulk)
		for _, src := range []struct {
			name string
			q    query.Querier
		}{{"rollups", st}, {"records", rollupsOff{st}}} {
			b.Run(fmt.Sprintf("records=%dk/%s", st.Stats().Written/1000, src.name), func(b *testing.B) {
				n0 := st.(rowCounter).RawRowsRead()
				for b.Loop() {
					c := &storeCollector{st: src.q}
					c.storeMetrics()
				}
				b.ReportMetric(float64(st.(rowCounter).RawRowsRead()-n0)/float64(b.N), "records-read/op")
			})
		}
	}
}

// TestStatsFromCarriesTLSCounters: the tracker's HTTPS counters reach the
// live page and /metrics (issue 14's counters).
func TestStatsFromCarriesTLSCounters(t *testing.T) {
	tr := reconstruct.Stats{TLSConnections: 9, TLSDecrypted: 6, TLSKeyless: 3, TLSNoKey: 2, TLSDecryptErrors: 1}
	p := StatsFrom(capture.Stats{}, tr, query.WriterStats{})
	got := [5]int64{p.TLSConnections, p.TLSDecrypted, p.TLSKeyless, p.TLSNoKey, p.TLSDecryptErrors}
	if want := [5]int64{9, 6, 3, 2, 1}; got != want {
		t.Errorf("TLS counters %v, want %v", got, want)
	}
}

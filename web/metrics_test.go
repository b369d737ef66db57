package web

import (
	"strings"
	"sync"
	"testing"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store/query"
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

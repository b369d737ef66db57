package web

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store/query"
)

// shardDown is the known store as a cluster with shards down: the writer
// names them, and every read of a record table refuses to answer unless
// asked for a partial answer, which then names them (as the ClickHouse
// store does, see store/clickhouse_shards.go).
type shardDown struct {
	query.Querier
	down []int
}

func (s shardDown) Stats() query.WriterStats {
	st := s.Querier.Stats()
	st.ShardsDown = s.down
	if len(s.down) > 0 {
		st.HeldShards, st.HeldRecords = s.down, 1234
	}
	return st
}

func (s shardDown) reach(ctx context.Context) error {
	if len(s.down) == 0 {
		return nil
	}
	p := query.PartialFrom(ctx)
	if p == nil {
		return errors.New("shard unreachable: not a partial read")
	}
	p.Add(s.down...)
	return nil
}

func (s shardDown) Extent(ctx context.Context, k query.Kind) (query.Extent, error) {
	if err := s.reach(ctx); err != nil {
		return query.Extent{}, err
	}
	return s.Querier.Extent(ctx, k)
}

func (s shardDown) Classes(ctx context.Context, r query.TimeRange) ([]string, error) {
	if err := s.reach(ctx); err != nil {
		return nil, err
	}
	return s.Querier.Classes(ctx, r)
}

func (s shardDown) Search(ctx context.Context, q query.SearchQuery) (query.SearchResult, error) {
	if err := s.reach(ctx); err != nil {
		return query.SearchResult{}, err
	}
	return s.Querier.Search(ctx, q)
}

// With a shard down the overview and search answer from the others and
// say which shard they lack, in the JSON, the status and on the page; the
// metrics count the shards down.
func TestPartialAnswersNameMissingShards(t *testing.T) {
	known := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: shardDown{known, []int{2}}})
	var o Overview
	getJSONInto(t, ts.URL+"/api/overview", &o)
	if len(o.MissingShards) != 1 || o.MissingShards[0] != 2 || o.StoreState != "shard 2 down" || o.Counters.Transactions == 0 {
		t.Errorf("overview: missing %v, state %q, %d transactions; want shard 2 named, an answer", o.MissingShards, o.StoreState, o.Counters.Transactions)
	}
	var sr SearchResponse
	getJSONInto(t, ts.URL+"/api/search", &sr)
	all, err := known.Search(context.Background(), query.SearchQuery{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.MissingShards) != 1 || sr.MissingShards[0] != 2 || sr.Total != all.Total {
		t.Errorf("search: missing %v, %d matches; want shard 2 named and the %d the others hold", sr.MissingShards, sr.Total, all.Total)
	}
	if body := string(readAll(t, get(t, ts.URL+"/metrics"))); !strings.Contains(body, "rtmon_store_shards_down 1") ||
		!strings.Contains(body, "rtmon_store_held_records 1234") {
		t.Error("/metrics lacks rtmon_store_shards_down 1 or rtmon_store_held_records 1234")
	}

	// Every shard up: complete answers, nothing named.
	_, whole := newTestServer(t, Config{Store: shardDown{known, nil}})
	var ok Overview
	getJSONInto(t, whole.URL+"/api/overview", &ok)
	if ok.MissingShards != nil || ok.StoreState != "" {
		t.Errorf("all shards up: missing %v, state %q", ok.MissingShards, ok.StoreState)
	}

	tb := newTab(t)
	for _, page := range []string{"/", "/search", "/compare"} {
		tb.open(ts.URL+page, "")
		tb.waitFor(`document.getElementById('partial-note')`, time.Minute)
		var note struct{ Shards, Text string }
		tb.eval(`({ shards: document.getElementById('partial-note').dataset.shards, text: document.getElementById('partial-note').textContent })`, &note)
		if note.Shards != "2" || !strings.Contains(note.Text, "Shard 2 was down") {
			t.Errorf("%s: partial note %+v", page, note)
		}
		tb.clean(page + " with a shard down")
	}
	tb.open(whole.URL+"/", `#overview[data-rendered="1"]`)
	var shown bool
	tb.eval(`!!document.getElementById('partial-note')`, &shown)
	if shown {
		t.Error("a partial note with every shard up")
	}
	if resp := get(t, ts.URL+"/api/overview?last=bogus"); resp.StatusCode == http.StatusOK {
		t.Error("a bad range still answered")
	}
}

// The status names a shard that is reachable but refuses its records
// (held by the writer) apart from one that is down.
func TestStoreStateNamesHeldShards(t *testing.T) {
	for _, c := range []struct {
		st   query.WriterStats
		want string
	}{
		{query.WriterStats{ShardsDown: []int{2}, HeldShards: []int{2}, Failing: true}, "shard 2 down"},
		{query.WriterStats{HeldShards: []int{1, 2}, Failing: true}, "shards 1, 2 not taking records"},
		{query.WriterStats{Failing: true}, "failing"},
		{query.WriterStats{}, ""},
	} {
		if got := storeState(c.st); got != c.want {
			t.Errorf("storeState(%+v) = %q, want %q", c.st, got, c.want)
		}
	}
}

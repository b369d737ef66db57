package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store/query"
)

// The fake's other reads, strict unless partial, as the ClickHouse store's.

func (s shardDown) SearchConnections(ctx context.Context, q query.ConnectionSearch) (query.ConnectionResult, error) {
	if err := s.reach(ctx); err != nil {
		return query.ConnectionResult{}, err
	}
	return s.Querier.SearchConnections(ctx, q)
}

func (s shardDown) Sample(ctx context.Context, q query.SampleQuery) ([]query.ClassSample, error) {
	if err := s.reach(ctx); err != nil {
		return nil, err
	}
	return s.Querier.Sample(ctx, q)
}

// With a shard down, the comparison, the exports, the report and the
// what-if answer from the other shards and say which one they lack; with
// every shard up they name none.
func TestPartialCompareExportsReportWhatif(t *testing.T) {
	known := knownCapture(t)
	for _, down := range [][]int{{2}, nil} {
		_, ts := newTestServer(t, Config{Store: shardDown{known, down}, WhatIf: &WhatIfOptions{}})
		named := func(what string, got []int) {
			t.Helper()
			if !slices.Equal(got, down) {
				t.Errorf("%s with shards %v down: missing shards %v", what, down, got)
			}
		}
		var cmp CompareResponse
		getJSONInto(t, ts.URL+"/api/compare", &cmp)
		named("compare", cmp.MissingShards)
		if len(cmp.Classes) == 0 {
			t.Error("compare: no classes compared")
		}

		resp := get(t, ts.URL+"/export/search.csv")
		lines := strings.Count(string(readAll(t, resp)), "\n")
		if h := resp.Header.Get("X-Rtmon-Missing-Shards"); (h == "2") != (down != nil) || (down == nil && h != "") {
			t.Errorf("csv export with shards %v down: X-Rtmon-Missing-Shards %q", down, h)
		}
		if lines < 2 {
			t.Errorf("csv export: %d lines, want records", lines)
		}
		var js struct {
			Records       []json.RawMessage `json:"records"`
			MissingShards []int             `json:"missing_shards"`
		}
		if err := json.Unmarshal(readAll(t, get(t, ts.URL+"/export/search.json")), &js); err != nil {
			t.Fatal(err)
		}
		named("json export", js.MissingShards)
		if len(js.Records) == 0 {
			t.Error("json export: no records")
		}

		// The second report carries a comparison, read as partial too.
		for _, q := range []string{"inline=1", "inline=1&at=" + url.QueryEscape(time.Now().UTC().Format(time.RFC3339))} {
			resp := get(t, ts.URL+"/export/report.html?"+q)
			body := string(readAll(t, resp))
			if resp.StatusCode != http.StatusOK || strings.Contains(body, "Shard 2 was down") != (down != nil) {
				t.Errorf("report (%s) with shards %v down: status %d, partial note %v", q, down, resp.StatusCode, strings.Contains(body, "Shard 2 was down"))
			}
		}

		code, w := whatIfAPI(t, ts, url.Values{"rules": {fastSYN}})
		if code != http.StatusOK {
			t.Fatalf("whatif: %d %s", code, w.Error)
		}
		named("whatif", w.MissingShards)
		if said := slices.ContainsFunc(w.Notes, func(n string) bool { return strings.Contains(n, "Shard 2 was down") }); said != (down != nil) {
			t.Errorf("whatif notes %q with shards %v down", w.Notes, down)
		}
		if w.Loaded.Transactions == 0 {
			t.Error("whatif: nothing replayed")
		}
	}
}

// growingOutage is shardDown whose outage spreads to shard 1 after its
// first read of a record table.
type growingOutage struct {
	shardDown
	reads atomic.Int32
}

func (g *growingOutage) Search(ctx context.Context, q query.SearchQuery) (query.SearchResult, error) {
	if g.reads.Add(1) > 1 {
		if p := query.PartialFrom(ctx); p != nil {
			p.Add(1)
		}
	}
	return g.shardDown.Search(ctx, q)
}

// A shard that goes down during an export ends it early: the header named
// the shards missing at its start, so rows read without another shard
// would be a file lacking records it does not say it lacks.
func TestExportEndsWhenAnotherShardGoesDown(t *testing.T) {
	known := knownCapture(t)
	for _, path := range []string{"/export/search.csv", "/export/search.json"} {
		st := &growingOutage{shardDown: shardDown{known, []int{2}}}
		_, ts := newTestServer(t, Config{Store: st})
		resp := get(t, ts.URL+path)
		body := string(readAll(t, resp))
		if h := resp.Header.Get("X-Rtmon-Missing-Shards"); h != "2" {
			t.Errorf("%s: X-Rtmon-Missing-Shards %q, want 2", path, h)
		}
		if strings.HasSuffix(path, ".csv") {
			if n := strings.Count(body, "\n"); n > 1 {
				t.Errorf("%s: %d lines written after shard 1 went down, want the export ended before its records:\n%.300s", path, n, body)
			}
			continue
		}
		var js struct {
			Records       []json.RawMessage `json:"records"`
			MissingShards []int             `json:"missing_shards"`
			Error         string            `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &js); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(js.Records) != 0 || js.MissingShards != nil || !strings.Contains(js.Error, "shards 1, 2 went down") {
			t.Errorf("%s: %d records, missing %v, error %q after shard 1 went down; want no records and the error", path, len(js.Records), js.MissingShards, js.Error)
		}
	}
}

// outage is a store whose shards go down and come back while a server
// reads it.
type outage struct {
	query.Querier
	mu   sync.Mutex
	down []int
}

func (o *outage) set(down []int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.down = down
}

func (o *outage) now() shardDown {
	o.mu.Lock()
	defer o.mu.Unlock()
	return shardDown{o.Querier, o.down}
}

func (o *outage) Stats() query.WriterStats { return o.now().Stats() }

func (o *outage) Search(ctx context.Context, q query.SearchQuery) (query.SearchResult, error) {
	return o.now().Search(ctx, q)
}

func (o *outage) SearchConnections(ctx context.Context, q query.ConnectionSearch) (query.ConnectionResult, error) {
	return o.now().SearchConnections(ctx, q)
}

// The what-if keeps records read without a shard only while it is down:
// once it is back, the next answer replays every shard's clients, however
// long the cache would keep a complete read.
func TestWhatifDropsPartialReadWhenShardIsBack(t *testing.T) {
	st := &outage{Querier: knownCapture(t), down: []int{2}}
	_, ts := newTestServer(t, Config{Store: st, WhatIf: &WhatIfOptions{CacheTTL: time.Hour}})
	q := url.Values{"rules": {fastSYN}}
	if _, w := whatIfAPI(t, ts, q); !slices.Equal(w.MissingShards, []int{2}) {
		t.Fatalf("with shard 2 down: missing shards %v", w.MissingShards)
	}
	if _, w := whatIfAPI(t, ts, q); !slices.Equal(w.MissingShards, []int{2}) {
		t.Errorf("still down: missing shards %v, want the cached partial read", w.MissingShards)
	}
	st.set(nil)
	if _, w := whatIfAPI(t, ts, q); w.MissingShards != nil || w.Loaded.Transactions == 0 {
		t.Errorf("shard back: missing shards %v, %d transactions; want a complete read", w.MissingShards, w.Loaded.Transactions)
	}
}

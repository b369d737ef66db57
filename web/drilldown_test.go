package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/rtmon/rtmon/store"
)

// searchAPI asks /api/search and decodes the answer.
func searchAPI(t *testing.T, base, q string) SearchResponse {
	t.Helper()
	resp := get(t, base+"/api/search?"+q)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", q, resp.StatusCode, body)
	}
	var r SearchResponse
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// The component range filter is a histogram bucket: min inclusive, max
// exclusive, ms rounded to the bucket's exact ns.
func TestSearchComponentRangeIsAHistogramBucket(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	ctx := context.Background()
	for _, c := range []struct {
		kind store.Kind
		comp string
	}{{store.Transactions, "total"}, {store.Transactions, "tserver"}, {store.Transactions, "rtt"}, {store.Pageviews, "tconn"}} {
		hs, err := st.Histogram(ctx, store.HistogramQuery{Kind: c.kind, Component: c.comp, Edges: histEdges})
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, h := range hs {
			for i := 1; i+1 < len(h.Edges); i++ {
				if h.Counts[i] == 0 {
					continue
				}
				q := url.Values{"kind": {string(c.kind)}, "class": {h.Class}, "comp": {c.comp},
					"min": {msString(h.Edges[i])}, "max": {msString(h.Edges[i+1])}, "limit": {"1"}}
				if r := searchAPI(t, ts.URL, q.Encode()); r.Total != h.Counts[i] {
					t.Errorf("%s %s %s bucket %d: search %d, histogram %d", c.kind, c.comp, h.Class, i, r.Total, h.Counts[i])
				}
				checked++
			}
		}
		if checked == 0 {
			t.Errorf("%s %s: no bucket with records", c.kind, c.comp)
		}
	}
	for _, q := range []string{"comp=bogus&min=1", "kind=transactions&comp=tother&min=1", "min=5&max=5", "min=9&max=2",
		"max=NaN", "max=-1", "max=1e308", "id=" + strings.Repeat("x", 200)} {
		resp := get(t, ts.URL+"/api/search?"+q)
		if body := readAll(t, resp); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", q, resp.StatusCode, body)
		}
	}
}

// msString writes ns as the page does (ns / 1e6, shortest form).
func msString(ns int64) string {
	b, _ := json.Marshal(float64(ns) / 1e6)
	return string(b)
}

// Each object of a pageview links to exactly its transaction.
func TestPageviewObjectsLinkToTheirTransaction(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	all, err := st.Search(context.Background(), store.SearchQuery{Kind: store.Pageviews, Limit: 5})
	if err != nil || len(all.Pageviews) == 0 {
		t.Fatal(err, "no pageviews")
	}
	n := 0
	for _, pv := range all.Pageviews {
		var r struct {
			Transactions []struct{ ID string }
			Search       map[string]string `json:"search"`
		}
		if err := json.Unmarshal(readAll(t, get(t, ts.URL+"/api/pageview/"+url.PathEscape(pv.ID))), &r); err != nil {
			t.Fatal(err)
		}
		for _, tx := range r.Transactions {
			link, ok := strings.CutPrefix(r.Search[tx.ID], "/search?")
			if !ok {
				t.Fatalf("object %s: link %q", tx.ID, r.Search[tx.ID])
			}
			res := searchAPI(t, ts.URL, link)
			if res.Total != 1 || len(res.Transactions) != 1 || res.Transactions[0].ID != tx.ID {
				t.Errorf("object %s: its link finds %d transactions", tx.ID, res.Total)
			}
			n++
		}
	}
	if n == 0 {
		t.Error("no objects checked")
	}
}

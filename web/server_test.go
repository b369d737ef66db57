package web

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
)

func TestSecurityHeadersOnEveryKindOfResponse(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	for _, path := range []string{"/", "/search", "/pageview/x", "/api/meta", "/api/overview", "/assets/style.css", "/metrics", "/healthz", "/nope", "/export/search.csv"} {
		resp := get(t, ts.URL+path)
		readAll(t, resp)
		if got := resp.Header.Get("Content-Security-Policy"); got != CSP {
			t.Errorf("%s: CSP %q", path, got)
		}
		if !strings.Contains(CSP, "script-src 'self'") || strings.Contains(CSP, "unsafe-inline") {
			t.Fatalf("CSP too weak: %s", CSP)
		}
		for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
			if got := resp.Header.Get(h); got != want {
				t.Errorf("%s: %s = %q, want %q", path, h, got, want)
			}
		}
	}
}

func TestReadOnlyOnlyGETAndHEAD(t *testing.T) {
	st := knownCapture(t)
	s, ts := newTestServer(t, Config{Store: st, Live: NewLiveFeed()})
	before := st.Stats().Written
	paths := map[string]bool{}
	for _, r := range s.engine.Routes() {
		// The one write, an annotation, needs Config.Annotations
		// (annotations_test.go); without it, it is refused below.
		if r.Method != http.MethodGet && r.Method != http.MethodHead && (r.Method != http.MethodPost || r.Path != "/api/annotations") {
			t.Errorf("route %s %s changes state?", r.Method, r.Path)
		}
		paths[strings.NewReplacer(":id", "x", "*file", "app.js", "*rest", "y").Replace(r.Path)] = true
	}
	for path := range paths {
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			req, _ := http.NewRequest(m, ts.URL+path, strings.NewReader("{}"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			want := http.StatusMethodNotAllowed
			if m == "POST" && path == "/api/annotations" {
				want = http.StatusNotImplemented
			}
			if resp.StatusCode != want {
				t.Errorf("%s %s: %d, want %d", m, path, resp.StatusCode, want)
			}
		}
		req, _ := http.NewRequest("HEAD", ts.URL+path, nil)
		if path == "/api/live" {
			continue // a stream; HEAD would wait for events
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if resp.StatusCode == http.StatusMethodNotAllowed {
			t.Errorf("HEAD %s: 405", path)
		}
	}
	if after := st.Stats().Written; after != before {
		t.Errorf("requests wrote %d records", after-before)
	}
}

func TestRefusesExposedListenWithoutAuth(t *testing.T) {
	st := knownCapture(t)
	for _, listen := range []string{"0.0.0.0:0", ":8080", "[::]:0", "192.0.2.1:80", "example.test:80"} {
		if _, err := NewServer(Config{Store: st, Listen: listen}); err == nil || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("%s without auth: err %v", listen, err)
		}
		if _, err := NewServer(Config{Store: st, Listen: listen, Token: "t0ken"}); err != nil {
			t.Errorf("%s with token: %v", listen, err)
		}
		if _, err := NewServer(Config{Store: st, Listen: listen, BasicAuth: "u:p"}); err != nil {
			t.Errorf("%s with basic auth: %v", listen, err)
		}
	}
	for _, listen := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0", "127.0.0.2:9"} {
		if _, err := NewServer(Config{Store: st, Listen: listen}); err != nil {
			t.Errorf("%s: %v", listen, err)
		}
	}
	if _, err := NewServer(Config{Store: st, BasicAuth: "nocolon"}); err == nil {
		t.Error("basic auth without a colon accepted")
	}
	s, err := NewServer(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Listen != "127.0.0.1:8080" {
		t.Errorf("default listen %s", s.cfg.Listen)
	}
}

func TestTokenAuth(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st, Listen: "0.0.0.0:0", Token: "s3cret"})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(path string, mod func(*http.Request)) *http.Response {
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		if mod != nil {
			mod(req)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		return resp
	}
	for _, p := range []string{"/", "/api/meta", "/metrics", "/export/search.csv", "/assets/style.css"} {
		if r := do(p, nil); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without token: %d", p, r.StatusCode)
		}
		if r := do(p, func(q *http.Request) { q.Header.Set("Authorization", "Bearer wrong") }); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s wrong token: %d", p, r.StatusCode)
		}
		if r := do(p, func(q *http.Request) { q.Header.Set("Authorization", "Bearer s3cret") }); r.StatusCode != http.StatusOK {
			t.Errorf("%s with token: %d", p, r.StatusCode)
		}
	}
	if r := do("/healthz", nil); r.StatusCode != http.StatusOK {
		t.Errorf("/healthz needs no token: %d", r.StatusCode)
	}
	// ?token= once, then the cookie carries it (and is not the token).
	r := do("/search?kind=pageviews&token=s3cret", nil)
	if r.StatusCode != http.StatusSeeOther || len(r.Cookies()) != 1 || r.Header.Get("Location") != "/search?kind=pageviews" {
		t.Fatalf("?token: %d cookies %v location %q", r.StatusCode, r.Cookies(), r.Header.Get("Location"))
	}
	ck := r.Cookies()[0]
	if ck.Value == "s3cret" || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie %+v", ck)
	}
	if r := do("/api/meta", func(q *http.Request) { q.AddCookie(ck) }); r.StatusCode != http.StatusOK {
		t.Errorf("with cookie: %d", r.StatusCode)
	}
	if r := do("/api/meta", func(q *http.Request) { q.AddCookie(&http.Cookie{Name: authCookie, Value: "forged"}) }); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("forged cookie: %d", r.StatusCode)
	}
}

func TestBasicAuth(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st, Listen: "0.0.0.0:0", BasicAuth: "sre:pa:ss"})
	req, _ := http.NewRequest("GET", ts.URL+"/api/meta", nil)
	resp, _ := http.DefaultClient.Do(req)
	readAll(t, resp)
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
		t.Errorf("no credentials: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	req.SetBasicAuth("sre", "wrong")
	resp, _ = http.DefaultClient.Do(req)
	readAll(t, resp)
	if resp.StatusCode != 401 {
		t.Errorf("wrong password: %d", resp.StatusCode)
	}
	req.SetBasicAuth("sre", "pa:ss")
	resp, _ = http.DefaultClient.Do(req)
	readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Errorf("right password: %d", resp.StatusCode)
	}
}

func getJSON(t testing.TB, url string, v any) {
	t.Helper()
	resp := get(t, url)
	b := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

func TestOverviewAPIIsTheStoresAnswer(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	ctx := context.Background()
	var o Overview
	getJSON(t, ts.URL+"/api/overview?class=premium&last=45s", &o)
	ext, err := dataExtent(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	r := store.TimeRange{From: ext.To - int64(45*time.Second)}
	if o.Range != r {
		t.Fatalf("range %+v, want %+v", o.Range, r)
	}
	hs, _ := st.Histogram(ctx, store.HistogramQuery{Range: r, Class: "premium", Edges: histEdges})
	if !reflect.DeepEqual(o.Histograms, hs) || len(hs) != 1 || hs[0].Total == 0 {
		t.Errorf("histograms differ or empty:\n%+v\n%+v", o.Histograms, hs)
	}
	ps, _ := st.Percentiles(ctx, store.PercentileQuery{Range: r, Class: "premium", Qs: quantiles})
	if !reflect.DeepEqual(o.Percentiles, ps) {
		t.Errorf("percentiles %+v, want %+v", o.Percentiles, ps)
	}
	k, _ := st.Counters(ctx, r, "premium")
	if o.Counters != k {
		t.Errorf("counters %+v, want %+v", o.Counters, k)
	}
	top, _ := st.TopSlow(ctx, store.TopQuery{Range: r, Class: "premium", By: "client", Limit: 10})
	if !reflect.DeepEqual(o.Top["client"], top) {
		t.Errorf("top clients %+v, want %+v", o.Top["client"], top)
	}
	if o.Pipeline != nil {
		t.Error("pipeline stats on a stored capture")
	}
	for _, last := range []string{"7d", "24h", "90s"} {
		resp := get(t, ts.URL+"/api/overview?last="+last)
		if b := readAll(t, resp); resp.StatusCode != 200 {
			t.Errorf("last=%s: %d %s", last, resp.StatusCode, b)
		}
	}
	// Bad parameters are 400s with a message, not 500s.
	for _, q := range []string{"kind=x", "component=nope", "last=yesterday", "last=xd", "last=-5m", "from=2026-01-02&to=2026-01-01"} {
		resp := get(t, ts.URL+"/api/overview?"+q)
		b := readAll(t, resp)
		if resp.StatusCode != 400 || !bytes.Contains(b, []byte(`"error"`)) {
			t.Errorf("%s: %d %s", q, resp.StatusCode, b)
		}
	}
}

func TestSearchAPIAndExports(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	ctx := context.Background()
	want, err := st.Search(ctx, store.SearchQuery{Kind: store.Transactions, MinTotal: 300e6, Limit: 20, Offset: 20})
	if err != nil {
		t.Fatal(err)
	}
	var got SearchResponse
	getJSON(t, ts.URL+"/api/search?min=300&limit=20&page=2", &got)
	if got.Total != want.Total || len(got.Transactions) != len(want.Transactions) || got.Total < 40 {
		t.Fatalf("search total %d/%d rows %d/%d", got.Total, want.Total, len(got.Transactions), len(want.Transactions))
	}
	for i := range got.Transactions {
		if got.Transactions[i].ID != want.Transactions[i].ID || got.Transactions[i].Total != want.Transactions[i].Total {
			t.Errorf("row %d: %s/%d want %s/%d", i, got.Transactions[i].ID, got.Transactions[i].Total, want.Transactions[i].ID, want.Transactions[i].Total)
		}
	}
	all, _ := st.Search(ctx, store.SearchQuery{Kind: store.Transactions, MinTotal: 300e6, Limit: 10000})

	// CSV: a header and one row per match, same ids in the same order.
	resp := get(t, ts.URL+"/export/search.csv?min=300")
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") {
		t.Errorf("csv disposition %q", cd)
	}
	rows, err := csv.NewReader(bytes.NewReader(readAll(t, resp))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// The layout is export's, the record files' own.
	var hdr bytes.Buffer
	hw, _ := export.TransactionCSV(&hdr)
	hw.Flush()
	header, _ := csv.NewReader(&hdr).Read()
	if int64(len(rows)-1) != all.Total || !reflect.DeepEqual(rows[0], header) {
		t.Fatalf("csv: %d rows for %d matches; header %v, want %v", len(rows)-1, all.Total, rows[0], header)
	}
	total := slices.Index(header, "total_ns")
	for i, tx := range all.Transactions {
		if rows[i+1][0] != tx.ID || rows[i+1][total] != strconv.FormatInt(tx.Total, 10) {
			t.Errorf("csv row %d: %v, want %s %d", i, rows[i+1][:2], tx.ID, tx.Total)
		}
	}
	// JSON of pageviews.
	var js struct {
		Kind    string               `json:"kind"`
		Records []*pageview.Pageview `json:"records"`
	}
	getJSON(t, ts.URL+"/export/search.json?kind=pageviews&class=standard", &js)
	pvs, _ := st.Search(ctx, store.SearchQuery{Kind: store.Pageviews, Class: "standard", Limit: 10000})
	if js.Kind != "pageviews" || int64(len(js.Records)) != pvs.Total || pvs.Total == 0 {
		t.Fatalf("json: %s %d records, want %d", js.Kind, len(js.Records), pvs.Total)
	}
	for i, p := range pvs.Pageviews {
		if js.Records[i].ID != p.ID || js.Records[i].Total != p.Total || js.Records[i].Class != "standard" {
			t.Errorf("json record %d: %+v", i, js.Records[i])
		}
	}
	// Transactions export as JSON too.
	var txjs struct {
		Records []*reconstruct.Transaction `json:"records"`
	}
	getJSON(t, ts.URL+"/export/search.json?min=300", &txjs)
	if int64(len(txjs.Records)) != all.Total {
		t.Errorf("json transactions %d, want %d", len(txjs.Records), all.Total)
	}
	// Client prefixes in both forms the store takes.
	for _, client := range []string{"198.51.100.0/29", "198.51.100.*"} {
		var pr SearchResponse
		getJSON(t, ts.URL+"/api/search?client="+url.QueryEscape(client), &pr)
		sr, _ := st.Search(ctx, store.SearchQuery{Client: client})
		if pr.Total != sr.Total || pr.Total == 0 || len(pr.Links) != len(pr.Transactions) {
			t.Errorf("client %s: %d results, store %d", client, pr.Total, sr.Total)
		}
	}
	for _, q := range []string{"status=abc", "min=-1", "client=not-an-ip", "kind=conns"} {
		resp := get(t, ts.URL+"/export/search.csv?"+q)
		readAll(t, resp)
		if resp.StatusCode != 400 {
			t.Errorf("csv %s: %d", q, resp.StatusCode)
		}
	}
}

// checkHAR checks the fields HAR 1.2 requires.
func checkHAR(t testing.TB, b []byte, entries int) {
	t.Helper()
	var h map[string]any
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatalf("har: %v", err)
	}
	need := func(m map[string]any, where string, keys ...string) {
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				t.Errorf("har %s: missing %q", where, k)
			}
		}
	}
	log, _ := h["log"].(map[string]any)
	if log == nil {
		t.Fatal("har: no log")
	}
	need(log, "log", "version", "creator", "entries")
	if log["version"] != "1.2" {
		t.Errorf("har version %v", log["version"])
	}
	cr, _ := log["creator"].(map[string]any)
	need(cr, "creator", "name", "version")
	pages, _ := log["pages"].([]any)
	for _, p := range pages {
		need(p.(map[string]any), "page", "startedDateTime", "id", "title", "pageTimings")
	}
	es, _ := log["entries"].([]any)
	if len(es) != entries {
		t.Errorf("har: %d entries, want %d", len(es), entries)
	}
	for i, e := range es {
		em := e.(map[string]any)
		w := fmt.Sprintf("entry %d", i)
		need(em, w, "startedDateTime", "time", "request", "response", "cache", "timings")
		rq, _ := em["request"].(map[string]any)
		need(rq, w+" request", "method", "url", "httpVersion", "cookies", "headers", "queryString", "headersSize", "bodySize")
		rs, _ := em["response"].(map[string]any)
		need(rs, w+" response", "status", "statusText", "httpVersion", "cookies", "headers", "content", "redirectURL", "headersSize", "bodySize")
		if ct, _ := rs["content"].(map[string]any); ct != nil {
			need(ct, w+" content", "size", "mimeType")
		}
		tm, _ := em["timings"].(map[string]any)
		need(tm, w+" timings", "send", "wait", "receive")
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(em["startedDateTime"])); err != nil {
			t.Errorf("%s: startedDateTime: %v", w, err)
		}
	}
}

func TestHARExport(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	res, _ := st.Search(context.Background(), store.SearchQuery{Kind: store.Pageviews, Limit: 1, MinTotal: 1})
	if len(res.Pageviews) == 0 {
		t.Fatal("no pageviews stored")
	}
	det, err := st.PageviewByID(context.Background(), res.Pageviews[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	resp := get(t, ts.URL+"/export/har/"+url.PathEscape(det.Pageview.ID)+".har")
	b := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("har: %d %s", resp.StatusCode, b)
	}
	checkHAR(t, b, len(det.Transactions))
	resp = get(t, ts.URL+"/export/har/nonexistent.har")
	readAll(t, resp)
	if resp.StatusCode != 404 {
		t.Errorf("missing pageview: %d", resp.StatusCode)
	}
}

func TestMetricsAreTheStoresHistograms(t *testing.T) {
	st := knownCapture(t)
	feed := NewLiveFeed()
	feed.Publish(LiveEvent{Pipeline: PipelineStats{CaptureDrops: 17, Evictions: 3, StoreQueued: 5, TrackerMemory: 4096, MemoryEvictions: 2,
		TLSConnections: 9, TLSDecrypted: 6, TLSKeyless: 3, TLSNoKey: 2, TLSDecryptErrors: 1}})
	_, ts := newTestServer(t, Config{Store: st, Live: feed})
	body := string(readAll(t, get(t, ts.URL+"/metrics")))
	hs, _ := st.Histogram(context.Background(), store.HistogramQuery{Edges: promBuckets})
	if len(hs) != 2 {
		t.Fatalf("want 2 classes, got %d", len(hs))
	}
	for _, h := range hs {
		line := fmt.Sprintf(`rtmon_response_time_seconds_count{class="%s",kind="transactions"} %d`, h.Class, h.Total)
		if !strings.Contains(body, line) {
			t.Errorf("missing %q", line)
		}
		// The bucket ending at 1 s holds everything below 1 s.
		var below int64
		for i, e := range h.Edges {
			if i+1 < len(h.Edges) && h.Edges[i+1] <= int64(time.Second) {
				below += h.Counts[i]
			}
			_ = e
		}
		le := fmt.Sprintf(`rtmon_response_time_seconds_bucket{class="%s",kind="transactions",le="0.999999999"} %d`, h.Class, below)
		if !strings.Contains(body, le) {
			t.Errorf("missing %q", le)
		}
	}
	k, _ := st.Counters(context.Background(), store.TimeRange{}, "premium")
	for _, want := range []string{"rtmon_capture_drops_total 17", "rtmon_evictions_total 3", "rtmon_tracker_memory_bytes 4096",
		"rtmon_memory_evictions_total 2", "rtmon_tls_connections_total 9", "rtmon_tls_decrypted_total 6",
		"rtmon_tls_keyless_total 3", "rtmon_tls_no_key_total 2", "rtmon_tls_decrypt_errors_total 1",
		fmt.Sprintf(`rtmon_syn_losses_total{class="premium"} %d`, k.SYNLosses), "rtmon_store_backlog_records 0",
		"rtmon_store_spill_bytes 0", "rtmon_store_corrupt_spill_files_total 0", "rtmon_store_lost_records_total 0"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	resp := get(t, ts.URL+"/healthz")
	if b := readAll(t, resp); resp.StatusCode != 200 || string(b) != "ok\n" {
		t.Errorf("healthz %d %q", resp.StatusCode, b)
	}
}

func TestPlaceholderWithoutBundle(t *testing.T) {
	st := knownCapture(t)
	saved := bundle
	bundle = fstest.MapFS{"dist/PLACEHOLDER.txt": {Data: []byte("x")}}
	defer func() { bundle = saved }()
	_, ts := newTestServer(t, Config{Store: st})
	b := string(readAll(t, get(t, ts.URL+"/")))
	if !strings.Contains(b, "make ui") || strings.Contains(b, "app.js") {
		t.Errorf("placeholder page: %s", b)
	}
	if resp := get(t, ts.URL+"/assets/app.js"); resp.StatusCode != 404 {
		t.Errorf("app.js without bundle: %d", resp.StatusCode)
	}
	var _ fs.FS = bundle
}

func TestLiveFeedObserve(t *testing.T) {
	feed := NewLiveFeed()
	ch, first, cancel := feed.subscribe()
	defer cancel()
	if first != nil {
		t.Fatal("event before any publish")
	}
	var sink nullSink
	obs := feed.Observe(&sink)
	tx := &reconstruct.Transaction{Start: 100, Total: 5e6, Tconn: 1e6, Class: "premium"}
	obs.Transaction(tx)
	obs.Connection(&reconstruct.Connection{Class: "premium", SYNLosses: 2, LastSeen: 50})
	obs.Pageview(&pageview.Pageview{Class: "standard", Start: 10, Total: 7})
	feed.PublishObserved(func() PipelineStats { return PipelineStats{CaptureDrops: 9} })
	select {
	case js := <-ch:
		var ev LiveEvent
		if err := json.Unmarshal(js, &ev); err != nil {
			t.Fatal(err)
		}
		if len(ev.Classes) != 2 || ev.Classes[0].Class != "premium" || ev.Classes[0].Transactions != 1 || ev.Classes[0].SYNLosses != 2 ||
			len(ev.Classes[0].Points) != 1 || ev.Classes[1].Pageviews != 1 || ev.Pipeline.CaptureDrops != 9 || ev.Time != 100+5e6 {
			t.Errorf("event %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	if sink.tx != 1 || sink.conn != 1 || sink.pv != 1 {
		t.Errorf("records not passed on: %+v", sink)
	}
	// Points are per event; counters are cumulative.
	feed.PublishObserved(nil)
	ev, _ := feed.Latest()
	if len(ev.Classes[0].Points) != 0 || ev.Classes[0].Transactions != 1 {
		t.Errorf("second event %+v", ev.Classes[0])
	}
	// A subscriber that does not read never blocks Publish.
	for range 100 {
		feed.Publish(LiveEvent{})
	}
}

type nullSink struct{ tx, conn, pv int }

func (n *nullSink) Connection(*reconstruct.Connection)   { n.conn++ }
func (n *nullSink) Transaction(*reconstruct.Transaction) { n.tx++ }
func (n *nullSink) Pageview(*pageview.Pageview)          { n.pv++ }

func TestSSEStream(t *testing.T) {
	st := knownCapture(t)
	feed := NewLiveFeed()
	_, ts := newTestServer(t, Config{Store: st, Live: feed})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/api/live", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		feed.Publish(LiveEvent{Time: 42, Pipeline: PipelineStats{Evictions: 4}})
	}()
	buf := make([]byte, 4096)
	var got []byte
	for !bytes.Contains(got, []byte("\n\n")) {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatalf("read: %v (%q)", err, got)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.HasPrefix(got, []byte("event: live\ndata: {\"time\":42,")) || !bytes.Contains(got, []byte(`"evictions":4`)) {
		t.Errorf("event %q", got)
	}
	// Without a feed there is no stream.
	_, ts2 := newTestServer(t, Config{Store: st})
	r2 := get(t, ts2.URL+"/api/live")
	readAll(t, r2)
	if r2.StatusCode != 404 {
		t.Errorf("no feed: %d", r2.StatusCode)
	}
}

func TestReportHTMLIsSelfContained(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	resp := get(t, ts.URL+"/export/report.html?last=1h")
	b := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	doc := string(b)
	for _, bad := range []string{"<script", "src=", "href=", "@import", "url("} {
		if strings.Contains(doc, bad) {
			t.Errorf("report references something outside itself: %q", bad)
		}
	}
	ps, _ := st.Percentiles(context.Background(), store.PercentileQuery{Qs: quantiles})
	for _, p := range ps {
		if !strings.Contains(doc, "<td>"+p.Class+"</td><td class=\"n\">"+fmt.Sprint(p.Count)+"</td><td class=\"n\">"+fmtMS(p.Values[0])+"</td>") {
			t.Errorf("report lacks %s's count %d and p50 %s", p.Class, p.Count, fmtMS(p.Values[0]))
		}
	}
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), reportStyleHash) {
		t.Errorf("report CSP %q", resp.Header.Get("Content-Security-Policy"))
	}
}

func TestLiveFeedTapCountsBeforeTheGrouper(t *testing.T) {
	feed := NewLiveFeed()
	var sink nullSink
	tapped := feed.Tap(&sink, func(a netip.Addr) string {
		if a == netip.MustParseAddr("198.51.100.1") {
			return "premium"
		}
		return "standard"
	})
	obs := feed.Observe(&sink)
	tx := &reconstruct.Transaction{Client: netip.MustParseAddr("198.51.100.1"), Start: 10, Total: 3}
	tapped.Transaction(tx)
	tapped.Connection(&reconstruct.Connection{Client: netip.MustParseAddr("198.51.100.2"), SYNACKLosses: 1})
	// The same records after the grouper are not counted twice.
	tx.Class = "premium"
	obs.Transaction(tx)
	obs.Connection(&reconstruct.Connection{Class: "standard", SYNACKLosses: 1})
	obs.Pageview(&pageview.Pageview{Class: "premium", Total: 5})
	feed.PublishObserved(nil)
	ev, _ := feed.Latest()
	if len(ev.Classes) != 2 || ev.Classes[0].Transactions != 1 || ev.Classes[0].Pageviews != 1 || len(ev.Classes[0].Points) != 2 ||
		ev.Classes[1].Connections != 1 || ev.Classes[1].SYNACKLosses != 1 {
		t.Errorf("event %+v", ev)
	}
	if sink.tx != 2 || sink.conn != 2 || sink.pv != 1 {
		t.Errorf("records not passed on: %+v", sink)
	}
}

func TestWhatIfNavSlot(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	b := string(readAll(t, get(t, ts.URL+"/")))
	if !strings.Contains(b, `data-nav="whatif"`) || strings.Contains(b, `href="/whatif"`) {
		t.Errorf("without a what-if handler the slot is shown disabled: %s", b)
	}
	if r := get(t, ts.URL+"/whatif"); r.StatusCode != 404 {
		t.Errorf("/whatif without handler: %d", r.StatusCode)
	}
	_, ts2 := newTestServer(t, Config{Store: st, WhatIf: &WhatIfOptions{}})
	if b := string(readAll(t, get(t, ts2.URL+"/"))); !strings.Contains(b, `href="/whatif"`) {
		t.Error("what-if link missing")
	}
	for _, path := range []string{"/whatif", "/whatif/"} {
		r := get(t, ts2.URL+path)
		if b := string(readAll(t, r)); r.StatusCode != 200 || !strings.Contains(b, `data-page="whatif"`) ||
			r.Header.Get("Content-Security-Policy") != CSP {
			t.Errorf("%s: %d %q, CSP %q", path, r.StatusCode, b, r.Header.Get("Content-Security-Policy"))
		}
	}
	if r := get(t, ts2.URL+"/whatif/run"); r.StatusCode != 404 {
		t.Errorf("/whatif/run: %d", r.StatusCode)
	}
}

type countingStore struct {
	store.Store
	mu    sync.Mutex
	hists int
}

func (c *countingStore) Histogram(ctx context.Context, q store.HistogramQuery) ([]store.ClassHistogram, error) {
	c.mu.Lock()
	c.hists++
	c.mu.Unlock()
	return c.Store.Histogram(ctx, q)
}

func TestOverviewCacheSharesAnswers(t *testing.T) {
	cs := &countingStore{Store: knownCapture(t)}
	_, ts := newTestServer(t, Config{Store: cs})
	var a, b, c Overview
	getJSON(t, ts.URL+"/api/overview?class=premium", &a)
	getJSON(t, ts.URL+"/api/overview?class=premium", &b)
	if cs.hists != 1 || !reflect.DeepEqual(a, b) {
		t.Errorf("same view twice: %d histogram queries", cs.hists)
	}
	getJSON(t, ts.URL+"/api/overview?class=standard", &c)
	if cs.hists != 2 || reflect.DeepEqual(a.Percentiles, c.Percentiles) {
		t.Errorf("another view: %d histogram queries", cs.hists)
	}
	_, ts2 := newTestServer(t, Config{Store: cs, CacheTTL: -1})
	getJSON(t, ts2.URL+"/api/overview?class=premium", &a)
	getJSON(t, ts2.URL+"/api/overview?class=premium", &a)
	if cs.hists != 4 {
		t.Errorf("cache disabled: %d histogram queries, want 4", cs.hists)
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	st := knownCapture(t)
	s, err := NewServer(Config{Store: st, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	u := s.URL()
	if !strings.HasPrefix(u, "http://127.0.0.1:") || strings.HasSuffix(u, ":0/") {
		t.Fatalf("URL %q", u)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	resp := get(t, u+"healthz")
	if b := readAll(t, resp); string(b) != "ok\n" {
		t.Errorf("healthz %q", b)
	}
	// An open event stream must not hold up shutdown.
	feedSrv, err := NewServer(Config{Store: st, Listen: "127.0.0.1:0", Live: NewLiveFeed()})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- feedSrv.Run(ctx2) }()
	sse, err := http.Get(feedSrv.URL() + "api/live")
	if err != nil {
		t.Fatal(err)
	}
	defer sse.Body.Close()
	cancel()
	cancel2()
	for _, ch := range []chan error{done, done2} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(6 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
	}
}

// The overview reads rollups only from a store that keeps them current.
func TestOverviewExactWithoutRollups(t *testing.T) {
	classes := testClasses(t)
	st, err := store.Open(context.Background(), "memory:", store.Options{Rollups: "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ingest(t, st, classes, knownCapturePath(t))
	_, ts := newTestServer(t, Config{Store: st, ExactBelow: 1})
	var o Overview
	getJSON(t, ts.URL+"/api/overview", &o)
	if o.Approx != 0 {
		t.Fatalf("approx %v from a store without rollups", o.Approx)
	}
	ps, _ := st.Percentiles(context.Background(), store.PercentileQuery{Range: o.Range, Qs: quantiles})
	if !reflect.DeepEqual(o.Percentiles, ps) {
		t.Errorf("percentiles %+v, want the exact %+v", o.Percentiles, ps)
	}
}

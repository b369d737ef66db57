package web

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/whatif"
)

// teeStore keeps a copy of every record the pipeline streams into the
// store, so a test can replay exactly the records the store holds without
// going through the store.
type teeStore struct {
	store.Store
	mu    sync.Mutex
	conns []*reconstruct.Connection
	txs   []*reconstruct.Transaction
	pvs   []*pageview.Pageview
}

func (s *teeStore) Connection(c *reconstruct.Connection) {
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.mu.Unlock()
	s.Store.Connection(c)
}

func (s *teeStore) Transaction(t *reconstruct.Transaction) {
	s.mu.Lock()
	s.txs = append(s.txs, t)
	s.mu.Unlock()
	s.Store.Transaction(t)
}

func (s *teeStore) Pageview(p *pageview.Pageview) {
	s.mu.Lock()
	s.pvs = append(s.pvs, p)
	s.mu.Unlock()
	s.Store.Pageview(p)
}

var (
	wiOnce sync.Once
	wiTee  *teeStore
)

// whatIfCapture is the known capture (synthetic browsers with 6% SYN and
// 3% SYN/ACK loss) ingested once more into its own store, with a copy of
// every record.
func whatIfCapture(t *testing.T) *teeStore {
	t.Helper()
	knownCapture(t) // writes the capture file
	wiOnce.Do(func() {
		classes := testClasses(t)
		tee := &teeStore{Store: openStoreShared(t, classes)}
		ingest(t, tee, classes, knownPath)
		// The loader's order, so units starting together line up alike.
		slices.SortFunc(tee.txs, func(a, b *reconstruct.Transaction) int {
			return cmp.Or(cmp.Compare(a.Start, b.Start), strings.Compare(a.ID, b.ID))
		})
		slices.SortFunc(tee.pvs, func(a, b *pageview.Pageview) int {
			return cmp.Or(cmp.Compare(a.Start, b.Start), strings.Compare(a.ID, b.ID))
		})
		slices.SortFunc(tee.conns, func(a, b *reconstruct.Connection) int {
			return cmp.Or(cmp.Compare(a.FirstSeen, b.FirstSeen), strings.Compare(a.ID, b.ID))
		})
		wiTee = tee
	})
	if wiTee == nil {
		t.Fatal("what-if capture failed in an earlier test")
	}
	return wiTee
}

// openStoreShared is openStore for a store that outlives the test that
// opened it (closed when the process ends).
func openStoreShared(t *testing.T, classes *pageview.Classes) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "memory:", store.Options{
		Classify: func(a netip.Addr) string { n, _ := classes.Classify(a); return n },
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

var premiumHigh = map[string]whatif.Priority{"premium": whatif.High}

func whatIfServer(t *testing.T, st store.Store, o WhatIfOptions) *httptest.Server {
	t.Helper()
	if o.Priorities == nil {
		o.Priorities = premiumHigh
	}
	_, ts := newTestServer(t, Config{Store: st, WhatIf: &o})
	return ts
}

func whatIfAPI(t *testing.T, ts *httptest.Server, q url.Values) (int, WhatIfResponse) {
	t.Helper()
	resp := get(t, ts.URL+"/whatif/api?"+q.Encode())
	b := readAll(t, resp)
	var r WhatIfResponse
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
	} else {
		r.Error = string(b)
	}
	return resp.StatusCode, r
}

const fastSYN = "IF IP.SRC == * THEN FAST SYN GAP 200ms"

func TestWhatIfAPIIsEvaluateOverTheStoredRecords(t *testing.T) {
	tee := whatIfCapture(t)
	ts := whatIfServer(t, tee, WhatIfOptions{})
	src := fastSYN + "\n# and the other loss\nIF CLASS == premium THEN FAST SYN/ACK GAP 200ms"
	code, got := whatIfAPI(t, ts, url.Values{"rules": {src}})
	if code != http.StatusOK || got.ParseError != nil {
		t.Fatalf("status %d, %+v", code, got.Error)
	}
	if got.Loaded.Transactions != len(tee.txs) || got.Loaded.Pageviews != len(tee.pvs) || got.Loaded.Truncated {
		t.Errorf("loaded %+v, pipeline wrote %d transactions, %d pageviews", got.Loaded, len(tee.txs), len(tee.pvs))
	}
	if got.Loaded.NoConnection != 0 || got.Loaded.Connections == 0 {
		t.Errorf("connections: %+v", got.Loaded)
	}
	ds, err := whatif.NewDataset(tee.conns, tee.txs, tee.pvs)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := whatif.ParseRules(src)
	if err != nil {
		t.Fatal(err)
	}
	// The page judges the rules on what rtmon live would have reported.
	opts := whatif.Options{Priorities: premiumHigh, Edges: histEdges, ReportDelay: ds.LiveReportDelay()}
	want, err := ds.Evaluate(rules, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Classes, want.Classes) {
		t.Errorf("API classes differ from Evaluate over the pipeline's records:\n got %+v\nwant %+v", got.Classes, want.Classes)
	}
	if !reflect.DeepEqual(got.Rules, want.Rules) || got.Units != ds.Units() || got.Unit != "pageview" || got.Passes != want.Passes {
		t.Errorf("rules %q units %d %s passes %d; want %q %d %d", got.Rules, got.Units, got.Unit, got.Passes, want.Rules, ds.Units(), want.Passes)
	}
	// The capture has SYN losses: FAST SYN must help someone.
	gain := false
	for _, c := range got.Classes {
		gain = gain || c.Predicted.Mean < c.Measured.Mean && c.Affected > 0
	}
	if !gain {
		t.Errorf("FAST SYN changed nothing over a capture with SYN losses: %+v", got.Classes)
	}

	// Ranking: premium (the high class), standard candidates plus the two
	// rules as singles, and every pair, exactly as Rank orders them.
	if got.Class != "premium" {
		t.Errorf("ranked class %q, want premium", got.Class)
	}
	singles, err := ds.StandardCandidates(opts)
	if err != nil {
		t.Fatal(err)
	}
	std := len(singles)
	singles = append(singles, []whatif.Rule{rules[1]}) // rules[0] is a standard candidate
	all, err := ds.Rank(whatif.Pairs(singles), opts)
	if err != nil {
		t.Fatal(err)
	}
	var wantRank []whatif.Ranked
	for _, r := range all {
		if r.Class == "premium" {
			wantRank = append(wantRank, r)
		}
	}
	if n := len(singles); len(got.Ranking) != n+n*(n-1)/2 || !reflect.DeepEqual(got.Ranking, wantRank) {
		t.Errorf("ranking (%d rows) is not Rank's for premium (%d rows):\n got %+v\nwant %+v", len(got.Ranking), len(wantRank), got.Ranking, wantRank)
	}
	if len(got.Candidates) != std || got.Candidates[0].Rules != fastSYN {
		t.Errorf("candidates %+v", got.Candidates)
	}
	var dropSYN bool
	for _, c := range got.Candidates {
		dropSYN = dropSYN || strings.Contains(c.Rules, "CLASS == standard") && strings.Contains(c.Rules, "DROP SYN")
	}
	if !dropSYN {
		t.Errorf("no DROP SYN candidate for the low class: %+v", got.Candidates)
	}
	// Assumptions of every action used, as the model states them.
	assume := map[string]string{}
	for _, a := range got.Assumptions {
		assume[a.Action] = a.Text
	}
	for _, r := range rules {
		for _, a := range r.Actions {
			if assume[a.String()] != a.Assumptions() || a.Assumptions() == "" {
				t.Errorf("assumptions of %s: %q", a, assume[a.String()])
			}
		}
	}
	if _, ok := assume["DROP SYN"]; !ok {
		t.Error("the ranked DROP SYN candidate's assumptions are missing")
	}

	// Another class is ranked when asked; the records come from the cache.
	code, other := whatIfAPI(t, ts, url.Values{"rules": {src}, "class": {"standard"}})
	if code != http.StatusOK || other.Class != "standard" || len(other.Ranking) != len(got.Ranking) || other.Ranking[0].Class != "standard" {
		t.Errorf("class=standard: %d %q %d rows", code, other.Class, len(other.Ranking))
	}
	// No priorities in the link: the handler's default; an explicit empty
	// one makes every class low (no DROP SYN candidates).
	code, low := whatIfAPI(t, ts, url.Values{"rules": {fastSYN}, "priority": {""}})
	if code != http.StatusOK || len(low.Candidates) != 5 || low.Classes[0].Priority != whatif.Low {
		t.Errorf("priority= : %d, %d candidates, %+v", code, len(low.Candidates), low.Priorities)
	}
	// Empty rules: the prediction is the measurement.
	code, none := whatIfAPI(t, ts, url.Values{"rules": {""}})
	if code != http.StatusOK || len(none.Rules) != 0 {
		t.Fatalf("rules= : %d %+v", code, none.Rules)
	}
	for _, c := range none.Classes {
		if !reflect.DeepEqual(c.Measured, c.Predicted) || c.Affected != 0 {
			t.Errorf("no rules changed class %s", c.Class)
		}
	}
	// No rules parameter at all: the default rule.
	if code, def := whatIfAPI(t, ts, nil); code != http.StatusOK || def.RulesText != DefaultWhatIfRules || len(def.Rules) != 1 {
		t.Errorf("default: %d %q", code, def.RulesText)
	}
}

func TestWhatIfParseErrorsAndBadRequests(t *testing.T) {
	tee := whatIfCapture(t)
	ts := whatIfServer(t, tee, WhatIfOptions{})
	src := fastSYN + "\nIF RT_HIGH > 3s THEN JUMP <b>"
	_, perr := whatif.ParseRules(src)
	var want *whatif.ParseError
	if !errors.As(perr, &want) {
		t.Fatalf("test rules should not parse: %v", perr)
	}
	code, got := whatIfAPI(t, ts, url.Values{"rules": {src}})
	if code != http.StatusOK {
		t.Fatalf("parse error: status %d, want 200 (%s)", code, got.Error)
	}
	if got.ParseError == nil || got.ParseError.Line != 2 || got.ParseError.Line != want.Line || got.ParseError.Col != want.Col ||
		got.Error != perr.Error() || !strings.Contains(got.ParseError.Message, "JUMP") {
		t.Errorf("parse error %+v (%q), want %v", got.ParseError, got.Error, perr)
	}
	if len(got.Classes) != 0 || len(got.Candidates) == 0 || got.RulesText != src {
		t.Errorf("a parse error evaluates nothing but still offers candidates: %d classes, %d candidates", len(got.Classes), len(got.Candidates))
	}
	// The JSON keeps markup inert.
	b := readAll(t, get(t, ts.URL+"/whatif/api?"+url.Values{"rules": {src}}.Encode()))
	if strings.Contains(string(b), "<b>") {
		t.Errorf("raw markup in JSON: %s", b)
	}

	for _, q := range []url.Values{
		{"last": {"forever"}},
		{"from": {"yesterday"}},
		{"priority": {"premium=urgent"}},
		{"class": {"nosuchclass"}},
	} {
		if code, r := whatIfAPI(t, ts, q); code != http.StatusBadRequest || !strings.Contains(r.Error, `"error"`) {
			t.Errorf("%v: %d %s, want 400 with an error", q, code, r.Error)
		}
	}

	// Read-only: only GET and HEAD.
	for _, path := range []string{"/whatif", "/whatif/", "/whatif/api"} {
		for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
			req, _ := http.NewRequest(m, ts.URL+path, strings.NewReader("rules=x"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405", m, path, resp.StatusCode)
			}
		}
	}
	req, _ := http.NewRequest("HEAD", ts.URL+"/whatif/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Security-Policy") != CSP {
		t.Errorf("HEAD: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}

	// The page is the app shell with the what-if nav entry current.
	b = readAll(t, get(t, ts.URL+"/whatif/?rules="+url.QueryEscape(src)))
	if !strings.Contains(string(b), `data-page="whatif"`) || !strings.Contains(string(b), `href="/whatif" data-nav="whatif" aria-current="page"`) ||
		strings.Contains(string(b), "JUMP") {
		t.Errorf("page: %s", b)
	}
}

func TestWhatIfTruncatesLargeRanges(t *testing.T) {
	tee := whatIfCapture(t)
	ts := whatIfServer(t, tee, WhatIfOptions{Read: whatif.ReadLimits{MaxTransactions: 150}})
	code, got := whatIfAPI(t, ts, url.Values{"rules": {fastSYN}})
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, got.Error)
	}
	if !got.Loaded.Truncated || got.Loaded.Transactions > 150 || got.Loaded.Transactions < 100 ||
		got.Loaded.Matching != int64(len(tee.txs)) || got.Range.From == 0 || len(got.Notes) == 0 ||
		!strings.Contains(got.Notes[0], fmt.Sprint(len(tee.txs))) {
		t.Errorf("truncation: %+v range %+v notes %q", got.Loaded, got.Range, got.Notes)
	}
	// What was read is exactly the newest transactions from Range.From on.
	n := 0
	for _, tx := range tee.txs {
		if tx.Start >= got.Range.From {
			n++
		}
	}
	if n != got.Loaded.Transactions {
		t.Errorf("%d transactions from %d on, loaded %d", n, got.Range.From, got.Loaded.Transactions)
	}
}

func TestWhatIfCacheReusesRecords(t *testing.T) {
	tee := whatIfCapture(t)
	cs := &searchCounter{Store: tee}
	ts := whatIfServer(t, cs, WhatIfOptions{})
	for _, rules := range []string{fastSYN, "IF IP.SRC == * THEN SPLICE", fastSYN} {
		if code, r := whatIfAPI(t, ts, url.Values{"rules": {rules}}); code != http.StatusOK {
			t.Fatalf("%d %s", code, r.Error)
		}
	}
	if n := cs.count(); n != 2 { // one page of transactions, one of pageviews
		t.Errorf("%d searches for three evaluations of one range, want 2", n)
	}
}

type searchCounter struct {
	store.Store
	mu sync.Mutex
	n  int
}

func (s *searchCounter) Search(ctx context.Context, q store.SearchQuery) (store.SearchResult, error) {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
	return s.Store.Search(ctx, q)
}

func (s *searchCounter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func TestBrowserWhatIf(t *testing.T) {
	tee := whatIfCapture(t)
	ts := whatIfServer(t, tee, WhatIfOptions{})
	tb := newTab(t)

	q := url.Values{"rules": {fastSYN}}
	tb.open(ts.URL+"/whatif/?"+q.Encode(), `#whatif-result[data-rendered="1"]`)
	_, api := whatIfAPI(t, ts, q)
	var shown struct {
		Series []struct {
			Class               string
			Edges               []int64
			Measured, Predicted []int64
			N                   int64
		}
		Stats    map[string]map[string][2]int64
		Canvases int
		Ranking  int
		Assume   map[string]string
		Rules    string
		SYN      string
		Summary  string
	}
	tb.eval(`(() => {
	  const q = (s) => [...document.querySelectorAll(s)];
	  const stats = {};
	  for (const sec of q('.whatif-class')) {
	    stats[sec.dataset.class] = Object.fromEntries([...sec.querySelectorAll('tr[data-stat]')].map((tr) => [tr.dataset.stat, [+tr.dataset.measured, +tr.dataset.predicted]]));
	  }
	  return {
	    Series: q('.whatif-class .chart').map((c) => JSON.parse(c.dataset.series)).map((s) => ({Class: s.class, Edges: s.edges, Measured: s.measured, Predicted: s.predicted, N: s.n})),
	    Stats: stats,
	    Canvases: q('.whatif-class canvas').length,
	    Ranking: q('#ranking tbody tr[data-gain]').length,
	    Assume: Object.fromEntries(q('dl.assumptions dd').map((d) => [d.dataset.action, d.textContent])),
	    Rules: document.getElementById('rules').value,
	    SYN: document.getElementById('whatif-syn-schedules').textContent,
	    Summary: document.getElementById('whatif-summary').textContent,
	  };
	})()`, &shown)
	if len(shown.Series) != len(api.Classes) || len(api.Classes) != 2 || shown.Canvases != len(api.Classes) {
		t.Fatalf("%d charts (%d canvases) for %d classes", len(shown.Series), shown.Canvases, len(api.Classes))
	}
	for i, c := range api.Classes {
		s := shown.Series[i]
		if s.Class != c.Class || !slices.Equal(s.Edges, c.Measured.Edges) || !slices.Equal(s.Measured, c.Measured.Counts) ||
			!slices.Equal(s.Predicted, c.Predicted.Counts) || s.N != c.Measured.N {
			t.Errorf("chart %d (%s) differs from the API's counts", i, c.Class)
		}
		st := shown.Stats[c.Class]
		if st["p50"] != [2]int64{c.Measured.P50, c.Predicted.P50} || st["p90"] != [2]int64{c.Measured.P90, c.Predicted.P90} ||
			st["p99"] != [2]int64{c.Measured.P99, c.Predicted.P99} || st["mean"] != [2]int64{c.Measured.Mean, c.Predicted.Mean} {
			t.Errorf("table of %s: %v, API %+v / %+v", c.Class, st, c.Measured, c.Predicted)
		}
	}
	if shown.Ranking != len(api.Ranking) || shown.Ranking == 0 {
		t.Errorf("ranking rows %d, API %d", shown.Ranking, len(api.Ranking))
	}
	r, _ := whatif.ParseRule(fastSYN)
	if a := r.Actions[0]; shown.Assume[a.String()] != a.Assumptions() {
		t.Errorf("assumptions shown for %s: %q", a, shown.Assume[a.String()])
	}
	if shown.Rules != fastSYN {
		t.Errorf("textarea %q", shown.Rules)
	}
	// The window and the report delay the prediction assumed: pageviews,
	// which rtmon live reports 8 s after they end.
	if api.Window != int64(30*time.Second) || api.ReportDelay != int64(8*time.Second) ||
		!strings.Contains(shown.Summary, "RT conditions over 30.0 s, each unit seen 8.00 s after it ended") {
		t.Errorf("window %v, report delay %v; summary %q", time.Duration(api.Window), time.Duration(api.ReportDelay), shown.Summary)
	}
	// Every class's SYN schedule, as the API says where it came from.
	for _, s := range api.SYNSchedules {
		if !strings.Contains(shown.SYN, s.Class+": ") || !strings.Contains(shown.SYN, s.Schedule.Source) {
			t.Errorf("SYN schedules shown %q lack class %s (%s)", shown.SYN, s.Class, s.Schedule.Source)
		}
	}
	if len(api.SYNSchedules) != len(api.Classes) {
		t.Errorf("%d SYN schedules for %d classes", len(api.SYNSchedules), len(api.Classes))
	}
	tb.screenshot("whatif")
	tb.clean("whatif")

	// Picking a candidate fills the rules; Evaluate puts them in the link.
	tb.eval(`(() => { const s = document.getElementById('candidate');
	  s.value = [...s.options].find((o) => o.value.includes('SPLICE')).value; s.dispatchEvent(new Event('change')); return true; })()`, nil)
	tb.run(chromedp.Click(chromedp.CSS(`#evaluate`)))
	tb.waitFor(`new URLSearchParams(location.search).get('rules') === 'IF IP.SRC == * THEN SPLICE' && document.querySelector('#whatif-result[data-rendered="1"]')`, 60*time.Second)
	tb.clean("whatif splice")

	// The fitted queue: its card with the API's pool and one row per
	// class, each class's band, the choice kept in the form.
	qq := url.Values{"rules": {fastSYN}, "model": {"queue"}}
	tb.open(ts.URL+"/whatif/?"+qq.Encode(), `#whatif-result[data-rendered="1"]`)
	_, qapi := whatIfAPI(t, ts, qq)
	var qshown struct {
		Workers, Model, Heading string
		FitRows, Bands          int
		FreeBands, FreeTexts    int
		MemberRows              int
	}
	tb.eval(`(() => ({Workers: document.getElementById('whatif-queue').dataset.workers,
	  Heading: document.querySelector('#whatif-queue h2').textContent,
	  FitRows: document.querySelectorAll('#whatif-queue tbody tr[data-class]').length,
	  Bands: document.querySelectorAll('.whatif-class tr.band').length,
	  FreeBands: document.querySelectorAll('.whatif-class tr.band[data-free="1"]').length,
	  FreeTexts: [...document.querySelectorAll('.whatif-class tr.band')].filter((r) => r.textContent.includes('every SYN judged by the model')).length,
	  MemberRows: document.querySelectorAll('.whatif-class tr.members').length,
	  Model: document.getElementById('model').value}))()`, &qshown)
	if qapi.Queue == nil || qshown.Workers != fmt.Sprint(qapi.Queue.Workers) || qshown.FitRows != len(qapi.Queue.Fit) ||
		qshown.Bands != len(qapi.Classes) || qshown.Model != "queue" ||
		!strings.Contains(qshown.Heading, fmt.Sprintf("service times per URL vary by %.1f%%", 100*qapi.Queue.ServiceSpread)) {
		t.Errorf("queue model shown as %+v, API %+v", qshown, qapi.Queue)
	}
	// FAST SYN against a fitted backlog rests on the model judging every
	// SYN: the bands say so where the API does.
	freeBands, pooled := 0, 0
	for _, c := range qapi.Classes {
		if c.BandFree {
			freeBands++
		}
		if c.MembersP90 != nil {
			pooled++
		}
	}
	if qshown.MemberRows != pooled || (pooled > 0) != (qapi.Members > 1) {
		t.Errorf("%d classes show a pooled p90 range, the API has %d (%d members)", qshown.MemberRows, pooled, qapi.Members)
	}
	if qshown.FreeBands != freeBands || qshown.FreeTexts != freeBands || (qapi.Queue != nil && qapi.Queue.Backlog > 0) != (freeBands == len(qapi.Classes)) {
		t.Errorf("%d bands shown as the free null replay's (%d say so), the API has %d of %d (backlog %d)", qshown.FreeBands, qshown.FreeTexts,
			freeBands, len(qapi.Classes), qapi.Queue.Backlog)
	}
	tb.clean("whatif queue")

	// An invalid rule: its line:column error, as text, and nothing else.
	bad := fastSYN + "\nIF RT_HIGH > 3s THEN <img src=x onerror=alert(1)>"
	_, perr := whatif.ParseRules(bad)
	var pe *whatif.ParseError
	if !errors.As(perr, &pe) {
		t.Fatalf("should not parse: %v", perr)
	}
	tb.open(ts.URL+"/whatif/?"+url.Values{"rules": {bad}}.Encode(), `#parse-error`)
	var got struct {
		Text      string
		Imgs      int
		Charts    int
		Line, Col string
		Rules     string
	}
	tb.eval(`(() => { const e = document.getElementById('parse-error');
	  return {Text: e.textContent, Imgs: document.querySelectorAll('main img').length, Charts: document.querySelectorAll('.whatif-class').length,
	    Line: e.dataset.line, Col: e.dataset.col, Rules: document.getElementById('rules').value}; })()`, &got)
	wantText := fmt.Sprintf("Line %d, column %d: expected %s, found %s", pe.Line, pe.Col, pe.Expected, pe.Found)
	if !strings.Contains(got.Text, wantText) || !strings.Contains(got.Text, "<img src=x onerror=alert(1)>") || got.Imgs != 0 ||
		got.Charts != 0 || got.Line != "2" || got.Col != fmt.Sprint(pe.Col) || got.Rules != bad {
		t.Errorf("parse error shown as %+v, want text %q", got, wantText)
	}
	tb.screenshot("whatif-error")
	var csp []string
	tb.eval(`window.__csp || []`, &csp)
	if len(csp) > 0 || len(tb.problems) > 0 {
		t.Errorf("parse error page: CSP %v, problems %v", csp, tb.problems)
	}
}

func TestWhatIfReadsConnectionsInBulk(t *testing.T) {
	tee := whatIfCapture(t)
	opened := map[string]bool{}
	for _, tx := range tee.txs {
		if tx.Tconn > 0 {
			opened[tx.ConnectionID] = true
		}
	}
	lossy := 0
	for _, c := range tee.conns {
		if opened[c.ID] && c.SYNLosses+c.SYNACKLosses > 0 {
			lossy++
		}
	}
	if lossy == 0 {
		t.Fatal("the capture has no lossy handshakes")
	}
	// The store's bulk read finds every connection a transaction opened,
	// lossy handshakes included.
	recs, err := whatif.ReadStore(context.Background(), tee, store.TimeRange{}, whatif.ReadLimits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range recs.Connections {
		delete(opened, c.ID)
	}
	if len(opened) > 0 || recs.Loaded.NoConnection != 0 {
		t.Errorf("%d connections opened by a transaction were not read: %v", len(opened), slices.Collect(maps.Keys(opened)))
	}
	// A bound on connections is kept and said.
	small := whatif.ReadLimits{MaxConnections: 3}
	cut, err := whatif.ReadStore(context.Background(), tee, store.TimeRange{}, small)
	if err != nil {
		t.Fatal(err)
	}
	code, got := whatIfAPI(t, whatIfServer(t, tee, WhatIfOptions{Read: small}), url.Values{"rules": {fastSYN}})
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, got.Error)
	}
	if l := got.Loaded; l != cut.Loaded || l.Connections != 3 || !l.ConnectionsTruncated || l.NoConnection == 0 || len(got.Notes) != 2 {
		t.Errorf("with at most 3 connections: %+v (ReadStore %+v), notes %q", l, cut.Loaded, got.Notes)
	}
	ts := whatIfServer(t, tee, WhatIfOptions{})
	code, got = whatIfAPI(t, ts, url.Values{"rules": {fastSYN}})
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, got.Error)
	}
	if got.Loaded != recs.Loaded || len(got.Notes) != 0 {
		t.Errorf("page loaded %+v (ReadStore %+v), notes %q", got.Loaded, recs.Loaded, got.Notes)
	}
	// The page replays what was read, which holds every connection FAST
	// SYN acts on: its prediction is the one over all connections.
	ds, err := whatif.NewDataset(tee.conns, tee.txs, tee.pvs)
	if err != nil {
		t.Fatal(err)
	}
	rules, _ := whatif.ParseRules(fastSYN)
	want, err := ds.Evaluate(rules, whatif.Options{Priorities: premiumHigh, Edges: histEdges, ReportDelay: ds.LiveReportDelay()})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range got.Classes {
		if !reflect.DeepEqual(c.Predicted, want.Classes[i].Predicted) {
			t.Errorf("class %s: FAST SYN over the connections read differs from over all", c.Class)
		}
	}
}

// TestWhatIfQueueModel: model=queue replays with the fitted queueing
// server, as Evaluate does over the same records, and says so; an unknown
// model is a 400.
func TestWhatIfQueueModel(t *testing.T) {
	tee := whatIfCapture(t)
	ts := whatIfServer(t, tee, WhatIfOptions{})
	code, got := whatIfAPI(t, ts, url.Values{"rules": {fastSYN}, "model": {"queue"}})
	if code != http.StatusOK || got.ParseError != nil {
		t.Fatalf("status %d, %+v", code, got.Error)
	}
	ds, err := whatif.NewDataset(tee.conns, tee.txs, tee.pvs)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := whatif.ParseRules(fastSYN)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ds.Evaluate(rules, whatif.Options{Priorities: premiumHigh, Edges: histEdges, ServerModel: whatif.ServerQueue, ReportDelay: ds.LiveReportDelay()})
	if err != nil {
		t.Fatal(err)
	}
	if got.ServerModel != whatif.ServerQueue || got.Queue == nil || !reflect.DeepEqual(got.Queue, want.Queue) {
		t.Errorf("server model %q, queue %+v; want queue %+v", got.ServerModel, got.Queue, want.Queue)
	}
	if !reflect.DeepEqual(got.Classes, want.Classes) {
		t.Errorf("API classes differ from Evaluate with the queue model:\n got %+v\nwant %+v", got.Classes, want.Classes)
	}
	for _, c := range got.Classes {
		if c.Band == nil {
			t.Errorf("class %s has no band", c.Class)
		}
	}
	if code, _ := whatIfAPI(t, ts, url.Values{"rules": {fastSYN}, "model": {"magic"}}); code != http.StatusBadRequest {
		t.Errorf("model=magic: status %d, want 400", code)
	}
}

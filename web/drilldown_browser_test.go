package web

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/synth"
)

// Drill-down (issue #17): from a chart or a table cell of the overview to
// the transactions behind it, with every page's state in its URL.

// classTxs is every stored transaction of class (all classes for ""), read
// with the search filters that predate drill-down; the tests filter them in
// Go, independently of the filters under test.
func classTxs(t *testing.T, st store.Store, class string) []*reconstruct.Transaction {
	t.Helper()
	res, err := st.Search(context.Background(), store.SearchQuery{Class: class, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Total > 10000 || res.Total == 0 {
		t.Fatalf("class %q: %d transactions; the tests read them all in one page", class, res.Total)
	}
	return res.Transactions
}

// searchShown is what the search page shows after a drill-down.
type searchShown struct {
	Query string
	Total int64
	IDs   []string
}

const readSearch = `(() => ({Query: location.search, Total: +document.getElementById('result-summary').dataset.total,
  IDs: [...document.querySelectorAll('#result-table tbody tr')].map((tr) => tr.dataset.id)}))()`

// waitSearch waits for the search page reached by a drill-down.
func waitSearch(tb *tab) (searchShown, url.Values) {
	tb.t.Helper()
	tb.waitFor(`location.pathname === '/search' && document.body.dataset.ready === '1' && !!document.getElementById('result-summary')`, 30*time.Second)
	var s searchShown
	tb.eval(readSearch, &s)
	q, err := url.ParseQuery(s.Query[1:])
	if err != nil {
		tb.t.Fatal(err)
	}
	return s, q
}

// checkShown compares the page with want (newest first, as search orders):
// the same total, and the first page's ids.
func checkShown(t *testing.T, what string, s searchShown, want []*reconstruct.Transaction) {
	t.Helper()
	sort.Slice(want, func(i, j int) bool {
		if want[i].Start != want[j].Start {
			return want[i].Start > want[j].Start
		}
		return want[i].ID < want[j].ID
	})
	var ids []string
	for _, tx := range want[:min(len(want), 50)] {
		ids = append(ids, tx.ID)
	}
	if s.Total != int64(len(want)) || len(want) == 0 || !reflect.DeepEqual(s.IDs, ids) {
		t.Errorf("%s: page shows %d (%d rows), the stored data has %d", what, s.Total, len(s.IDs), len(want))
	}
}

// point is a position in the viewport, from the page.
type point struct{ X, Y float64 }

// histPoint scrolls the chart in box into view and returns where the
// middle of bucket i is drawn.
func histPoint(tb *tab, box string, i int) point {
	tb.t.Helper()
	var p point
	tb.eval(fmt.Sprintf(`(() => { const box = document.getElementById(%q); box.scrollIntoView({block: 'center'});
	  const u = box.uplot; const e = JSON.parse(document.getElementById('hist-chart').dataset.series)[0].edges;
	  const mid = Math.sqrt(e[%d] * e[%d]) / 1e6; const r = u.over.getBoundingClientRect();
	  return {X: r.left + u.valToPos(mid, 'x'), Y: r.top + r.height / 2}; })()`, box, i, i+1), &p)
	return p
}

func TestBrowserDrilldownHistogramBucket(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	tb := newTab(t)

	// One class: a click on a bucket goes straight to its transactions.
	tb.open(ts.URL+"/?class=premium", `#overview[data-rendered="1"]`)
	var d overviewDOM
	tb.eval(readOverview, &d)
	if len(d.Hist) != 1 || d.Hist[0].Class != "premium" {
		t.Fatalf("histograms %+v", d.Hist)
	}
	h := d.Hist[0]
	i := fullestBucket(h.Counts, 1, len(h.Counts)-1)
	p := histPoint(tb, "hist-chart", i)
	tb.run(chromedp.MouseClickXY(p.X, p.Y))
	s, q := waitSearch(tb)
	if q.Get("class") != "premium" || q.Get("min") == "" || q.Get("max") == "" {
		t.Fatalf("bucket link %s", s.Query)
	}
	lo, hi := h.Edges[i], h.Edges[i+1]
	var want []*reconstruct.Transaction
	for _, tx := range classTxs(t, st, "premium") {
		if tx.Total >= lo && tx.Total < hi {
			want = append(want, tx)
		}
	}
	if int64(len(want)) != h.Counts[i] {
		t.Fatalf("bucket %d: the histogram counts %d, the stored data has %d", i, h.Counts[i], len(want))
	}
	checkShown(t, "premium bucket", s, want)
	tb.screenshot("drilldown-bucket")
	tb.clean("bucket drill-down")

	// All classes, on the CDF: the click offers each class with its count
	// in that bucket; the second click opens that class's transactions.
	tb.open(ts.URL+"/", `#overview[data-rendered="1"]`)
	d = overviewDOM{}
	tb.eval(readOverview, &d)
	std := -1
	for j, hh := range d.Hist {
		if hh.Class == "standard" {
			std = j
		}
	}
	if len(d.Hist) < 2 || std < 0 {
		t.Fatalf("histograms %+v", d.Hist)
	}
	h = d.Hist[std]
	i = fullestBucket(h.Counts, 1, len(h.Counts)-1)
	p = histPoint(tb, "cdf-chart", i)
	tb.run(chromedp.MouseClickXY(p.X, p.Y))
	tb.waitFor(`!!document.querySelector('#drill-menu a[data-class="standard"]')`, 10*time.Second)
	var label string
	tb.eval(`document.querySelector('#drill-menu a[data-class="standard"]').textContent`, &label)
	if label != fmt.Sprintf("standard (%d)", h.Counts[i]) {
		t.Errorf("menu entry %q, the bucket holds %d", label, h.Counts[i])
	}
	tb.screenshot("drilldown-menu")
	tb.run(chromedp.Click(chromedp.CSS(`#drill-menu a[data-class="standard"]`)))
	s, q = waitSearch(tb)
	want = want[:0]
	for _, tx := range classTxs(t, st, "standard") {
		if tx.Total >= h.Edges[i] && tx.Total < h.Edges[i+1] {
			want = append(want, tx)
		}
	}
	if q.Get("class") != "standard" {
		t.Errorf("menu link %s", s.Query)
	}
	checkShown(t, "standard bucket from the menu", s, want)
	tb.clean("bucket menu")
}

// A drag across the distribution selects whole buckets: search gets the
// edges around the dragged durations and shows the records counted in them.
func TestBrowserDrilldownHistogramDrag(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	tb := newTab(t)
	tb.open(ts.URL+"/?class=premium", `#overview[data-rendered="1"]`)
	var d overviewDOM
	tb.eval(readOverview, &d)
	h := d.Hist[0]
	g := dragAcross(tb, "hist-chart") // x in ms
	s, q := waitSearch(tb)
	edge := func(k string) int {
		ms, err := strconv.ParseFloat(q.Get(k), 64)
		for i, e := range h.Edges {
			if err == nil && int64(math.Round(ms*1e6)) == e {
				return i
			}
		}
		t.Fatalf("%s=%s is not a bucket edge (%s)", k, q.Get(k), s.Query)
		return 0
	}
	lo, hi := edge("min"), edge("max")
	// The dragged ends lie in the first and last bucket, give or take the
	// pixel the selection is rounded to.
	px := func(ms float64) float64 { return ms * math.Pow(g.To/g.From, 1/(g.X2-g.X1)) }
	if float64(h.Edges[lo])/1e6 > px(g.From) || float64(h.Edges[lo+1])/1e6*px(1) < g.From ||
		float64(h.Edges[hi])/1e6 < g.To/px(1) || float64(h.Edges[hi-1])/1e6 > px(g.To) {
		t.Errorf("dragged %g-%g ms, buckets from %d to %d ms", g.From, g.To, h.Edges[lo], h.Edges[hi])
	}
	var n int64
	for i := lo; i < hi; i++ {
		n += h.Counts[i]
	}
	var want []*reconstruct.Transaction
	for _, tx := range classTxs(t, st, "premium") {
		if tx.Total >= h.Edges[lo] && tx.Total < h.Edges[hi] {
			want = append(want, tx)
		}
	}
	if int64(len(want)) != n || q.Get("class") != "premium" {
		t.Errorf("buckets %d-%d: histogram %d, stored data %d (%s)", lo, hi, n, len(want), s.Query)
	}
	checkShown(t, "dragged buckets", s, want)
	tb.clean("histogram drag")
}

// fullestBucket is the index in [from, to) with the largest count.
func fullestBucket(counts []int64, from, to int) int {
	best := from
	for i := from; i < to; i++ {
		if counts[i] > counts[best] {
			best = i
		}
	}
	return best
}

func TestBrowserDrilldownTimeRange(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	tb := newTab(t)
	tb.open(ts.URL+"/?class=standard", `#overview[data-rendered="1"]`)
	g := dragAcross(tb, "series-chart")
	s, q := waitSearch(tb)
	from, to := checkDragLink(t, g, s, q, "standard")
	var vals []string
	tb.eval(`[document.getElementById('from').value, document.getElementById('to').value, document.getElementById('class').value]`, &vals)
	if vals[0] != q.Get("from") || vals[1] != q.Get("to") || vals[2] != "standard" {
		t.Errorf("search controls %v for %s", vals, s.Query)
	}
	var want []*reconstruct.Transaction
	for _, tx := range classTxs(t, st, "standard") {
		if tx.Start >= from.UnixNano() && tx.Start < to.UnixNano() {
			want = append(want, tx)
		}
	}
	checkShown(t, "dragged range", s, want)
	tb.clean("time range drill-down")
}

// dragged is a drag across a time chart: the times of its ends, from the
// page, and the time one pixel spans.
type dragged struct {
	X1, X2, Y float64
	From, To  float64 // s
	PerPx     float64 // s per pixel
}

// dragAcross drags the mouse over the middle of the chart in box.
func dragAcross(tb *tab, box string) dragged {
	tb.t.Helper()
	var g dragged
	tb.eval(fmt.Sprintf(`(() => { const box = document.getElementById(%q); box.scrollIntoView({block: 'center'});
	  const u = box.uplot; const r = u.over.getBoundingClientRect(); const a = r.width * 0.3, b = r.width * 0.6;
	  return {X1: r.left + a, X2: r.left + b, Y: r.top + r.height / 2, From: u.posToVal(a, 'x'), To: u.posToVal(b, 'x'),
	    PerPx: (u.posToVal(b, 'x') - u.posToVal(a, 'x')) / (b - a)}; })()`, box), &g)
	steps := []chromedp.Action[chromedp.Void]{chromedp.MouseEvent(chromedp.MouseMoved, g.X1, g.Y),
		chromedp.MouseEvent(chromedp.MousePressed, g.X1, g.Y, chromedp.ButtonLeft, chromedp.ClickCount(1))}
	for k := 1; k <= 8; k++ {
		steps = append(steps, chromedp.MouseEvent(chromedp.MouseMoved, g.X1+(g.X2-g.X1)*float64(k)/8, g.Y, chromedp.ButtonLeft))
	}
	steps = append(steps, chromedp.MouseEvent(chromedp.MouseReleased, g.X2, g.Y, chromedp.ButtonLeft, chromedp.ClickCount(1)))
	tb.run(steps...)
	return g
}

// The live chart (x: packet time) leads to the stored records of the
// dragged range, for the class picked in the menu.
func TestBrowserDrilldownLiveChart(t *testing.T) {
	st := knownCapture(t)
	feed := NewLiveFeed()
	_, ts := newTestServer(t, Config{Store: st, Live: feed})
	tb := newTab(t)
	tb.open(ts.URL+"/", `#overview[data-rendered="1"]`)
	// Points over the known capture's 90 s, so the range holds records.
	var ps []LivePoint
	for i := range 80 {
		ps = append(ps, LivePoint{T: synth.T(float64(i)), Kind: "transaction", Total: int64(200+i) * int64(time.Millisecond)})
	}
	feed.Publish(LiveEvent{Time: synth.T(80), Classes: []LiveClass{{Class: "premium", Transactions: 40, Points: ps[:40]},
		{Class: "standard", Transactions: 40, Points: ps[40:]}}})
	tb.waitFor(`document.getElementById('live-chart').dataset.points === '80' && !!document.getElementById('live-chart').uplot`, 20*time.Second)
	g := dragAcross(tb, "live-chart")
	tb.waitFor(`!!document.querySelector('#drill-menu a[data-class="premium"]')`, 10*time.Second)
	tb.run(chromedp.Click(chromedp.CSS(`#drill-menu a[data-class="premium"]`)))
	s, q := waitSearch(tb)
	from, to := checkDragLink(t, g, s, q, "premium")
	var want []*reconstruct.Transaction
	for _, tx := range classTxs(t, st, "premium") {
		if tx.Start >= from.UnixNano() && tx.Start < to.UnixNano() {
			want = append(want, tx)
		}
	}
	checkShown(t, "live chart range", s, want)
	tb.clean("live chart drill-down")
}

// checkDragLink checks the search link of drag g: the class, and the
// dragged times to within the pixel uPlot rounds the selection to (and the
// ms the link rounds it to).
func checkDragLink(t *testing.T, g dragged, s searchShown, q url.Values, class string) (from, to time.Time) {
	t.Helper()
	from, err1 := time.Parse(time.RFC3339Nano, q.Get("from"))
	to, err2 := time.Parse(time.RFC3339Nano, q.Get("to"))
	if err1 != nil || err2 != nil || q.Get("class") != class || q.Has("last") {
		t.Fatalf("time range link %s", s.Query)
	}
	slack := time.Duration(1.5*g.PerPx*1e9) + time.Millisecond
	wantFrom := time.Unix(0, int64(g.From*1e9))
	wantTo := time.Unix(0, int64(g.To*1e9))
	if d := from.Sub(wantFrom); d < -slack || d > slack {
		t.Errorf("from %v, dragged from %v (slack %v)", from, wantFrom, slack)
	}
	if d := to.Sub(wantTo); d < -slack || d > slack || !to.After(from) {
		t.Errorf("to %v, dragged to %v (slack %v)", to, wantTo, slack)
	}
	return from, to
}

func TestBrowserDrilldownTableCells(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	tb := newTab(t)

	// A percentile cell: that class's transactions at or above it.
	tb.open(ts.URL+"/", `#overview[data-rendered="1"]`)
	var p90 int64
	tb.eval(`+document.querySelector('#percentiles tr[data-class="standard"] td[data-q="0.9"]').dataset.ns`, &p90)
	tb.run(chromedp.Click(chromedp.CSS(`#percentiles tr[data-class="standard"] td[data-q="0.9"] a`)))
	s, _ := waitSearch(tb)
	var want []*reconstruct.Transaction
	for _, tx := range classTxs(t, st, "standard") {
		if tx.Total >= p90 {
			want = append(want, tx)
		}
	}
	checkShown(t, "p90 cell", s, want)

	// A component cell of the breakdown: Tserver above the class's mean;
	// the search page shows the filter in its controls.
	tb.open(ts.URL+"/", `#overview[data-rendered="1"]`)
	var mean int64
	tb.eval(`+document.querySelector('#breakdown tr[data-class="premium"] td[data-comp="tserver"]').dataset.ns`, &mean)
	tb.run(chromedp.Click(chromedp.CSS(`#breakdown tr[data-class="premium"] td[data-comp="tserver"] a`)))
	s, q := waitSearch(tb)
	want = want[:0]
	for _, tx := range classTxs(t, st, "premium") {
		if tx.Tserver >= mean {
			want = append(want, tx)
		}
	}
	checkShown(t, "tserver cell", s, want)
	var ctl []string
	tb.eval(`[document.getElementById('comp').value, document.getElementById('min').value]`, &ctl)
	if ctl[0] != "tserver" || ctl[1] != q.Get("min") {
		t.Errorf("search controls %v for %s", ctl, s.Query)
	}

	// The class cell: all of the class.
	tb.open(ts.URL+"/?last=1h", `#overview[data-rendered="1"]`)
	tb.run(chromedp.Click(chromedp.CSS(`#percentiles tr[data-class="premium"] td:first-child a`)))
	s, q = waitSearch(tb)
	if q.Get("last") != "1h" || q.Get("class") != "premium" {
		t.Errorf("class link %s", s.Query)
	}
	ext, _ := dataExtent(context.Background(), st)
	want = want[:0]
	for _, tx := range classTxs(t, st, "premium") {
		if tx.Start >= ext.To-int64(time.Hour) {
			want = append(want, tx)
		}
	}
	checkShown(t, "class cell", s, want)
	tb.clean("table drill-down")
}

// The controls write history: back restores the previous view, and a
// copied URL opened in a fresh browser shows the same view.
func TestBrowserDrilldownHistoryAndLinks(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	tb := newTab(t)
	tb.open(ts.URL+"/", `#overview[data-rendered="1"]`)
	change := func(id, v string) {
		tb.eval(fmt.Sprintf(`(() => { const s = document.getElementById(%q); s.value = %q; s.dispatchEvent(new Event('change')); return true; })()`, id, v), nil)
	}
	rows := func(n int, note string) string {
		// data-rendered: the charts of this view are drawn too, not only its table.
		return fmt.Sprintf(`!!document.querySelector('#overview[data-rendered="1"]') && document.querySelectorAll('#percentiles tbody tr').length === %d && document.getElementById('range-note').textContent.includes(%q)`, n, note)
	}
	change("class", "premium")
	tb.waitFor(`location.search === '?class=premium' && `+rows(1, "class premium"), 20*time.Second)
	change("component", "tserver")
	tb.waitFor(`location.search === '?class=premium&component=tserver' && `+rows(1, "tserver"), 20*time.Second)
	var shared string
	tb.eval(`location.href`, &shared)
	var pct []int64
	tb.eval(`[...document.querySelectorAll('#percentiles td[data-ns]')].map((td) => +td.dataset.ns)`, &pct)

	tb.back()
	tb.waitFor(`location.search === '?class=premium' && document.getElementById('component').value === 'total' && `+rows(1, "· total ·"), 20*time.Second)
	tb.back()
	tb.waitFor(`location.search === '' && document.getElementById('class').value === '' && `+rows(2, "all classes"), 20*time.Second)
	var d overviewDOM
	tb.eval(readOverview, &d)
	checkOverview(t, st, d, store.TimeRange{}, "")
	tb.forward()
	tb.waitFor(`location.search === '?class=premium' && document.getElementById('class').value === 'premium' && `+rows(1, "class premium"), 20*time.Second)
	tb.clean("overview history")

	// The copied URL in a fresh browser.
	fresh := newTab(t)
	fresh.open(shared, `#overview[data-rendered="1"]`)
	var sel []string
	fresh.eval(`[document.getElementById('class').value, document.getElementById('component').value]`, &sel)
	var pct2 []int64
	fresh.eval(`[...document.querySelectorAll('#percentiles td[data-ns]')].map((td) => +td.dataset.ns)`, &pct2)
	if !reflect.DeepEqual(sel, []string{"premium", "tserver"}) || !reflect.DeepEqual(pct, pct2) || len(pct) == 0 {
		t.Errorf("shared overview: controls %v, percentiles %v, were %v", sel, pct2, pct)
	}
	fresh.clean("shared overview")

	// Search: filters and page in the URL; a fresh browser shows the same
	// rows, and back returns to the previous search.
	tb.open(ts.URL+"/search?comp=tserver&min=5&page=2", `#result-table`)
	var first searchShown
	tb.eval(readSearch, &first)
	res, err := st.Search(context.Background(), store.SearchQuery{Component: "tserver", ComponentMin: 5e6, Limit: 50, Offset: 50})
	if err != nil || len(res.Transactions) == 0 || first.IDs[0] != res.Transactions[0].ID || first.Total != res.Total {
		t.Fatalf("search page 2: %v %+v", err, first)
	}
	// An upper bound inside the data: the median Tserver above 5 ms.
	var above []int64
	for _, tx := range classTxs(t, st, "") {
		if tx.Tserver >= 5e6 {
			above = append(above, tx.Tserver)
		}
	}
	sort.Slice(above, func(i, j int) bool { return above[i] < above[j] })
	maxMs := above[len(above)/2]/1e6 + 1
	tb.eval(fmt.Sprintf(`(() => { document.getElementById('max').value = '%d'; document.getElementById('search-go').click(); return true; })()`, maxMs), nil)
	tb.waitFor(fmt.Sprintf(`location.search.includes('max=%d') && !!document.getElementById('result-summary')`, maxMs), 20*time.Second)
	var narrowed searchShown
	tb.eval(readSearch, &narrowed)
	var want []*reconstruct.Transaction
	for _, tx := range classTxs(t, st, "") {
		if tx.Tserver >= 5e6 && tx.Tserver < maxMs*1e6 {
			want = append(want, tx)
		}
	}
	checkShown(t, fmt.Sprintf("tserver from 5 to %d ms", maxMs), narrowed, want)
	tb.back()
	tb.waitFor(`location.search === '?comp=tserver&min=5&page=2' && document.body.dataset.ready === '1' && !!document.getElementById('result-summary')`, 20*time.Second)
	var back searchShown
	tb.eval(readSearch, &back)
	if !reflect.DeepEqual(back, first) {
		t.Errorf("back: %+v, was %+v", back, first)
	}
	fresh.open(ts.URL+"/search"+first.Query, `#result-table`)
	var again searchShown
	fresh.eval(readSearch, &again)
	if !reflect.DeepEqual(again, first) {
		t.Errorf("shared search: %+v, was %+v", again, first)
	}
	tb.clean("search history")
	fresh.clean("shared search")
}

// Each object of a pageview's waterfall leads to its transaction.
func TestBrowserDrilldownWaterfallObject(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	tb := newTab(t)
	ctx := context.Background()
	all, err := st.Search(ctx, store.SearchQuery{Kind: store.Pageviews, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var det *store.PageviewDetail
	for _, p := range all.Pageviews {
		if p.Objects > 3 {
			if det, err = st.PageviewByID(ctx, p.ID); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if det == nil || len(det.Transactions) < 3 {
		t.Fatal("the known capture has no pageview with several objects")
	}
	obj := det.Transactions[len(det.Transactions)/2]
	tb.open(ts.URL+"/pageview/"+url.PathEscape(det.Pageview.ID), `#waterfall`)
	// The bar opens the object's entry (its state in the URL), whose link
	// leads to the transaction.
	tb.run(chromedp.Click(chromedp.CSS(`.wf-tx[data-tx="` + obj.ID + `"]`)))
	tb.waitFor(`document.getElementById('tx-`+obj.ID+`').open && location.hash === '#tx-`+obj.ID+`'`, 10*time.Second)
	var link string
	tb.eval(`location.href`, &link)
	tb.run(chromedp.Click(chromedp.CSS(`details.tx[data-id="` + obj.ID + `"] a.tx-search`)))
	s, q := waitSearch(tb)
	if s.Total != 1 || !reflect.DeepEqual(s.IDs, []string{obj.ID}) || q.Get("id") != obj.ID {
		t.Errorf("object %s: search shows %+v", obj.ID, s)
	}
	var shownTotal string
	tb.eval(`document.querySelector('#result-table tbody tr').dataset.total`, &shownTotal)
	if shownTotal != strconv.FormatInt(obj.Total, 10) {
		t.Errorf("object total %s, stored %d", shownTotal, obj.Total)
	}
	tb.clean("waterfall object link")
	// Back to the pageview with that object still open.
	tb.back()
	tb.waitFor(`location.href === `+strconv.Quote(link)+` && !!document.getElementById('tx-`+obj.ID+`') && document.getElementById('tx-`+obj.ID+`').open`, 20*time.Second)
	tb.clean("pageview back")
}

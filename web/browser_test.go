package web

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/storetest"
)

const chromiumPath = "/usr/bin/chromium"

var chromiumOnce sync.Once

// ensureChromium installs Debian's chromium if it is missing, so the
// browser tests run (never skip) on a fresh machine.
func ensureChromium(t testing.TB) {
	t.Helper()
	chromiumOnce.Do(func() {
		if _, err := os.Stat(chromiumPath); err == nil {
			return
		}
		t.Log("installing chromium with apt-get")
		install := func() error {
			cmd := exec.Command("apt-get", "install", "-y", "-qq", "chromium")
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			out, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Errorf("%w: %s", err, lastLines(string(out), 5))
			}
			return nil
		}
		if err := install(); err != nil {
			if out, err := exec.Command("apt-get", "update", "-qq").CombinedOutput(); err != nil {
				t.Fatalf("apt-get update: %v: %s", err, out)
			}
			if err := install(); err != nil {
				t.Fatalf("apt-get install chromium: %v", err)
			}
		}
	})
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("chromium not available: %v", err)
	}
}

// tab is one headless Chromium page with the flags the issue prescribes, a
// fresh profile, and every JS exception or CSP violation recorded.
type tab struct {
	t        testing.TB
	ctx      context.Context
	mu       sync.Mutex
	problems []string
	shotDir  string
}

var shotDirOnce sync.Once

func screenshotDir(t testing.TB) string {
	dir, err := filepath.Abs(filepath.Join("testdata", "screenshots"))
	if err != nil {
		t.Fatal(err)
	}
	shotDirOnce.Do(func() {
		_ = os.MkdirAll(dir, 0o755)
		t.Logf("screenshots in %s", dir)
	})
	return dir
}

func newTab(t testing.TB) *tab {
	t.Helper()
	if !HasBundle() {
		t.Fatal("the UI bundle is not built into this test binary: run `make ui` (make test does) before go test ./web")
	}
	ensureChromium(t)
	// Chromium keeps its singleton socket in a directory it makes under
	// TMPDIR and a killed browser leaves behind: one in /tmp per browser
	// otherwise. The path must stay short (a socket path holds 107
	// bytes, and Chromium aborts past it), so not under t.TempDir().
	tmp, err := os.MkdirTemp("", "rtmon-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.Env("TMPDIR=" + tmp),
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1500, 1000),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA(); os.RemoveAll(tmp) })
	tb := &tab{t: t, ctx: ctx, shotDir: screenshotDir(t)}
	if err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			tb.problem(fmt.Sprintf("exception: %s %v", e.ExceptionDetails.Text, e.ExceptionDetails.Exception))
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				tb.problem("console.error: " + strings.Join(parts, " "))
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	// Record CSP violations from the first byte of every document; this
	// script runs through the DevTools protocol, not the page, so CSP does
	// not apply to it.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `document.addEventListener('securitypolicyviolation',
			e => (window.__csp = window.__csp || []).push(e.violatedDirective + ' ' + e.blockedURI));`}); err != nil {
		t.Fatal(err)
	}
	return tb
}

func (tb *tab) problem(s string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.problems = append(tb.problems, s)
}

func (tb *tab) run(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, actions...); err != nil {
		tb.t.Fatalf("chromedp: %v (page problems: %v)", err, tb.problems)
	}
}

// open navigates and waits for the app to finish its first render.
func (tb *tab) open(u string, ready string) {
	tb.t.Helper()
	tb.run(chromedp.Navigate(u), chromedp.WaitReady(chromedp.CSS(`body[data-ready="1"]`)))
	if ready != "" {
		tb.run(chromedp.WaitReady(chromedp.CSS(ready)))
	}
}

// eval runs js in the page and decodes its value into out (nil: ignore).
func (tb *tab) eval(js string, out any) {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[json.RawMessage](js))
	if err != nil {
		tb.t.Fatalf("evaluate %.60q: %v (page problems: %v)", js, err, tb.problems)
	}
	if out != nil {
		if err := json.Unmarshal(v, out); err != nil {
			tb.t.Fatalf("evaluate %.60q: decode %s: %v", js, v, err)
		}
	}
}

// back and forward move in the tab's history once the evaluation has
// answered: a step that leaves the document can otherwise close the
// evaluation's context before it answers ("Inspected target navigated or
// closed"). Callers wait for the page they expect.
func (tb *tab) back()    { tb.t.Helper(); tb.eval(`setTimeout(() => history.back(), 0), true`, nil) }
func (tb *tab) forward() { tb.t.Helper(); tb.eval(`setTimeout(() => history.forward(), 0), true`, nil) }

// clean fails on any exception, console error or CSP violation so far.
func (tb *tab) clean(where string) {
	tb.t.Helper()
	var csp, shown []string
	tb.eval(`window.__csp || []`, &csp)
	tb.eval(`[...document.querySelectorAll('.error')].map((e) => e.textContent)`, &shown)
	if len(shown) > 0 {
		tb.t.Errorf("%s: the page shows errors: %v", where, shown)
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(csp) > 0 || len(tb.problems) > 0 {
		tb.t.Errorf("%s: CSP violations %v, problems %v", where, csp, tb.problems)
	}
	tb.problems = nil
}

func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatal(err)
	}
	path := filepath.Join(tb.shotDir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// waitFor polls a JS condition (every 25 ms) and returns how long it took.
// While a navigation is under way the condition may throw or its context
// may vanish; that counts as not yet.
func (tb *tab) waitFor(cond string, limit time.Duration) time.Duration {
	tb.t.Helper()
	start := time.Now()
	js := "(() => { try { return !!(" + cond + "); } catch (e) { return false; } })()"
	var lastErr error
	for {
		ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](js))
		if err == nil && ok {
			return time.Since(start)
		}
		lastErr = err
		if time.Since(start) > limit {
			tb.t.Fatalf("condition %q not met within %v (last error %v, problems %v)", cond, limit, lastErr, tb.problems)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// overviewDOM is what the overview page shows, read back from the DOM.
type overviewDOM struct {
	Pct []struct {
		Class  string
		Count  int64
		Values []int64
	}
	Counters map[string]string
	Hist     []struct {
		Class  string
		Edges  []int64
		Counts []int64
		Total  int64
	}
	CDF []struct {
		Class    string
		Upper    []int64
		Fraction []float64
	}
	Series []struct {
		Class  string
		T      []int64
		Count  []int64
		Values [][]int64
	}
	Breakdown []struct {
		Class string
		Count int64
		Comps map[string]int64
	}
	Top      map[string][]store.TopRow
	Canvases int
	Search   string
	Step     int64
}

const readOverview = `(() => {
  const q = (s) => [...document.querySelectorAll(s)];
  const js = (id) => JSON.parse(document.getElementById(id).dataset.series);
  const top = {};
  for (const by of ['url', 'server', 'client']) {
    top[by] = q('#top-' + by + ' tbody tr[data-key]').map((tr) => ({Key: tr.dataset.key, Count: +tr.dataset.count, Mean: +tr.dataset.mean, Max: +tr.dataset.max}));
  }
  return {
    Pct: q('#percentiles tbody tr').map((tr) => ({Class: tr.dataset.class, Count: +tr.dataset.count, Values: q('#percentiles tbody tr[data-class="' + tr.dataset.class + '"] td[data-ns]').map((td) => +td.dataset.ns)})),
    Counters: Object.fromEntries(q('.counter').map((c) => [c.dataset.counter, c.dataset.value])),
    Hist: js('hist-chart').map((h) => ({Class: h.class, Edges: h.edges, Counts: h.counts, Total: h.total})),
    CDF: js('cdf-chart').map((h) => ({Class: h.class, Upper: h.upper, Fraction: h.fraction})),
    Series: js('series-chart').map((s) => ({Class: s.class, T: s.t, Count: s.count, Values: s.values})),
    Breakdown: q('#breakdown tbody tr').map((tr) => ({Class: tr.dataset.class, Count: +tr.dataset.count, Comps: Object.fromEntries([...tr.querySelectorAll('td[data-comp]')].map((td) => [td.dataset.comp, +td.dataset.ns]))})),
    Top: top,
    Canvases: q('canvas').length,
    Search: location.search,
    Step: +document.getElementById('series-chart').dataset.step,
  };
})()`

// overviewAnswers are the store's answers an overview shows.
type overviewAnswers struct {
	ps     []store.ClassPercentiles
	hs     []store.ClassHistogram
	series []store.SeriesPoint
	sums   []store.ComponentSums
	k      store.Counters
}

// exactAnswers asks the store's exact queries.
func exactAnswers(t *testing.T, st store.Store, r store.TimeRange, class string, step int64) overviewAnswers {
	ctx := context.Background()
	var a overviewAnswers
	var err error
	if a.ps, err = st.Percentiles(ctx, store.PercentileQuery{Range: r, Class: class, Qs: quantiles}); err != nil {
		t.Fatal(err)
	}
	a.hs, _ = st.Histogram(ctx, store.HistogramQuery{Range: r, Class: class, Edges: histEdges})
	a.series, _ = st.PercentileSeries(ctx, store.PercentileQuery{Range: r, Class: class, Qs: quantiles, Bucket: time.Duration(step)})
	if a.sums, err = st.ComponentSums(ctx, store.SumQuery{Range: r, Class: class}); err != nil {
		t.Fatal(err)
	}
	a.k, _ = st.Counters(ctx, r, class)
	return a
}

// checkOverview compares every number on the overview with the store's
// exact answer for the same selection.
func checkOverview(t *testing.T, st store.Store, d overviewDOM, r store.TimeRange, class string) {
	t.Helper()
	checkOverviewWith(t, st, d, r, class, exactAnswers(t, st, r, class, d.Step))
}

// checkOverviewWith compares the overview with the answers a.
func checkOverviewWith(t *testing.T, st store.Store, d overviewDOM, r store.TimeRange, class string, a overviewAnswers) {
	t.Helper()
	ctx := context.Background()
	ps := a.ps
	if len(d.Pct) != len(ps) || len(ps) == 0 {
		t.Fatalf("percentile rows %d, store %d", len(d.Pct), len(ps))
	}
	for i, p := range ps {
		if d.Pct[i].Class != p.Class || d.Pct[i].Count != p.Count || !reflect.DeepEqual(d.Pct[i].Values, p.Values) {
			t.Errorf("percentiles row %d: page %+v, store %+v", i, d.Pct[i], p)
		}
	}
	hs := a.hs
	if len(d.Hist) != len(hs) {
		t.Fatalf("histograms %d, store %d", len(d.Hist), len(hs))
	}
	for i, h := range hs {
		g := d.Hist[i]
		if g.Class != h.Class || g.Total != h.Total || !reflect.DeepEqual(g.Edges, h.Edges) || !reflect.DeepEqual(g.Counts, h.Counts) {
			t.Errorf("histogram %s differs from the store's", h.Class)
		}
		// The CDF is the running sum over the same buckets.
		var cum int64
		for j := 0; j+1 < len(h.Edges); j++ {
			cum += h.Counts[j]
			if d.CDF[i].Upper[j] != h.Edges[j+1] || abs(d.CDF[i].Fraction[j]-float64(cum)/float64(h.Total)) > 1e-12 {
				t.Fatalf("cdf %s point %d: %d %g, want %d %g", h.Class, j, d.CDF[i].Upper[j], d.CDF[i].Fraction[j], h.Edges[j+1], float64(cum)/float64(h.Total))
			}
		}
	}
	series := a.series
	n := 0
	for _, s := range d.Series {
		for j := range s.T {
			p := series[n]
			if p.Class != s.Class || p.T != s.T[j] || p.Count != s.Count[j] || !reflect.DeepEqual(p.Values, s.Values[j]) {
				t.Fatalf("series point %d: page %s %d %v, store %+v", n, s.Class, s.T[j], s.Values[j], p)
			}
			n++
		}
	}
	if n != len(series) || n == 0 {
		t.Errorf("series points %d, store %d", n, len(series))
	}
	sums := a.sums
	if len(d.Breakdown) != len(ps) || len(sums) != len(ps) {
		t.Errorf("breakdown rows %d, store %d, for %d classes", len(d.Breakdown), len(sums), len(ps))
	}
	for i, b := range d.Breakdown {
		if i >= len(sums) {
			break
		}
		cs := sums[i]
		if b.Class != cs.Class || b.Count != cs.Count {
			t.Errorf("breakdown row %d: page %s n=%d, store %s n=%d", i, b.Class, b.Count, cs.Class, cs.Count)
		}
		if len(b.Comps) != len(breakdownComponents(store.Transactions))+1 {
			t.Errorf("breakdown %s: columns %v", b.Class, b.Comps)
		}
		var parts int64
		for comp, v := range b.Comps {
			if want := cs.Sums[comp] / cs.Count; v != want {
				t.Errorf("breakdown %s %s = %d, store mean %d", b.Class, comp, v, want)
			}
			if comp != "total" {
				parts += v
			}
		}
		// The means add up to the mean total, to within one ns of
		// rounding per component.
		if dd := b.Comps["total"] - parts; dd < 0 || dd > int64(len(b.Comps)) {
			t.Errorf("breakdown %s: components add up to %d, total %d", b.Class, parts, b.Comps["total"])
		}
	}
	k := a.k
	for name, want := range map[string]int64{"pageviews": k.Pageviews, "transactions": k.Transactions, "connections": k.Connections,
		"syn_losses": k.SYNLosses, "synack_losses": k.SYNACKLosses, "retrans_conns": k.ConnsWithRetrans, "retrans_bytes": k.ConnRetransBytes,
		"server_errors": k.ServerErrors, "incomplete": k.IncompleteTx} {
		if d.Counters[name] != fmt.Sprint(want) {
			t.Errorf("counter %s: page %q, store %d", name, d.Counters[name], want)
		}
	}
	for _, by := range []string{"url", "server", "client"} {
		top, _ := st.TopSlow(ctx, store.TopQuery{Range: r, Class: class, By: by, Limit: 10})
		if !reflect.DeepEqual(d.Top[by], top) {
			t.Errorf("top %s: page %+v, store %+v", by, d.Top[by], top)
		}
	}
	if d.Canvases < 3 {
		t.Errorf("%d chart canvases", d.Canvases)
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func TestBrowserOverview(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	tb := newTab(t)
	ctx := context.Background()

	// All data, all classes.
	tb.open(ts.URL+"/", `#overview[data-rendered="1"]`)
	var d overviewDOM
	tb.eval(readOverview, &d)
	checkOverview(t, st, d, store.TimeRange{}, "")
	if d.Counters["capture_drops"] != "" {
		t.Errorf("capture drops shown as %q for a stored capture (want n/a)", d.Counters["capture_drops"])
	}
	var shown string
	tb.eval(`document.querySelector('.counter[data-counter="capture_drops"] .v').textContent`, &shown)
	if shown != "n/a" {
		t.Errorf("capture drops text %q", shown)
	}
	// The SYN-loss peaks: some transactions took 1-1.3 s or 3-3.5 s longer
	// than the bulk; they must be in their own log buckets.
	var peak int64
	for _, h := range d.Hist {
		for i, e := range h.Edges {
			if e >= int64(time.Second) && e < int64(3500*time.Millisecond) {
				peak += h.Counts[i]
			}
		}
	}
	if peak == 0 {
		t.Error("no records in the 1-3.5 s buckets; the known capture has SYN losses")
	}
	tb.screenshot("overview")
	tb.clean("overview")

	// The slowest client's link opens its transactions in search.
	slowest := d.Top["client"][0].Key
	tb.run(chromedp.Click(chromedp.CSS(`#top-client tbody a`)))
	tb.waitFor(`location.pathname === '/search' && document.body.dataset.ready === '1' && !!document.getElementById('result-table')`, 10*time.Second)
	var got struct {
		Total   string
		Clients []string
	}
	tb.eval(`({Total: document.getElementById('result-summary').dataset.total,
	  Clients: [...document.querySelectorAll('#result-table tbody tr td:nth-child(2)')].map((td) => td.textContent)})`, &got)
	sres, _ := st.Search(ctx, store.SearchQuery{Client: slowest, Limit: 1})
	if got.Total != fmt.Sprint(sres.Total) || len(got.Clients) == 0 {
		t.Errorf("client link: %s results, store %d", got.Total, sres.Total)
	}
	for _, c := range got.Clients {
		if c != slowest {
			t.Errorf("client link: row of %s in a search for %s", c, slowest)
		}
	}
	tb.clean("top client link")
	tb.open(ts.URL+"/", `#overview[data-rendered="1"]`)

	// The class picker and range picker put the view in the URL.
	tb.eval(`(() => { const s = document.getElementById('class'); s.value = 'premium'; s.dispatchEvent(new Event('change')); return true; })()`, nil)
	tb.waitFor(`location.search.includes('class=premium') && document.querySelectorAll('#percentiles tbody tr').length === 1`, 10*time.Second)
	tb.eval(`(() => { const s = document.getElementById('range'); s.value = '1h'; s.dispatchEvent(new Event('change')); return true; })()`, nil)
	tb.waitFor(`location.search.includes('last=1h') && document.getElementById('range-note').textContent.includes('premium')`, 10*time.Second)
	var link string
	tb.eval(`location.href`, &link)
	// Open the shared link in a new load: same selection, same numbers.
	tb.open(link, `#overview[data-rendered="1"]`)
	var sel []string
	tb.eval(`[document.getElementById('class').value, document.getElementById('range').value]`, &sel)
	if !reflect.DeepEqual(sel, []string{"premium", "1h"}) {
		t.Errorf("shared link restored %v", sel)
	}
	d = overviewDOM{}
	tb.eval(readOverview, &d)
	ext, _ := dataExtent(ctx, st)
	checkOverview(t, st, d, store.TimeRange{From: ext.To - int64(time.Hour)}, "premium")
	tb.screenshot("overview-premium")
	tb.clean("overview premium")

	// The wall-screen theme.
	tb.open(ts.URL+"/?theme=dark&last=1h", `#overview[data-rendered="1"]`)
	var dark bool
	tb.eval(`document.body.classList.contains('dark') && document.querySelector('a[data-nav="search"]').getAttribute('href').includes('theme=dark')`, &dark)
	if !dark {
		t.Error("?theme=dark not applied")
	}
	tb.screenshot("overview-dark")
	tb.clean("overview dark")

	// Pageviews and another component.
	tb.open(ts.URL+"/?kind=pageviews&component=tconn&class=standard", `#overview[data-rendered="1"]`)
	var pct []int64
	tb.eval(`[...document.querySelectorAll('#percentiles td[data-ns]')].map((td) => +td.dataset.ns)`, &pct)
	want, _ := st.Percentiles(ctx, store.PercentileQuery{Kind: store.Pageviews, Class: "standard", Component: "tconn", Qs: quantiles})
	if len(want) != 1 || !reflect.DeepEqual(pct, want[0].Values) {
		t.Errorf("pageview tconn percentiles %v, store %+v", pct, want)
	}
	tb.clean("overview pageviews")

	// Report links carry the selection; both formats download and parse.
	var hrefs []string
	tb.eval(`[document.getElementById('report-html').getAttribute('href'), document.getElementById('report-pdf').getAttribute('href')]`, &hrefs)
	if !strings.Contains(hrefs[0], "class=standard") || !strings.Contains(hrefs[1], "kind=pageviews") {
		t.Errorf("report links %v", hrefs)
	}
	resp := get(t, ts.URL+hrefs[0])
	html := readAll(t, resp)
	if resp.StatusCode != 200 || !bytes.Contains(html, []byte("<svg")) || !bytes.Contains(html, []byte("<td>standard</td>")) {
		t.Errorf("report html %d", resp.StatusCode)
	}
	resp = get(t, ts.URL+hrefs[1])
	pdf := readAll(t, resp)
	if resp.StatusCode != 200 || !bytes.HasPrefix(pdf, []byte("%PDF")) {
		t.Fatalf("report pdf: %d %q", resp.StatusCode, pdf[:min(len(pdf), 200)])
	}
	if pages := len(regexp.MustCompile(`/Type\s*/Page[^s]`).FindAll(pdf, -1)); pages == 0 {
		t.Errorf("pdf has no pages")
	} else {
		t.Logf("report pdf: %d bytes, %d pages", len(pdf), pages)
	}
	// The report rendered in the browser (as saved), for a look.
	tb.run(chromedp.Navigate(ts.URL + "/export/report.html?inline=1&last=1h"))
	tb.screenshot("report")
	tb.clean("report")
}

func TestBrowserSearchPageviewAndExports(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	tb := newTab(t)
	ctx := context.Background()

	tb.open(ts.URL+"/search?kind=pageviews&min=300", `#result-table`)
	want, _ := st.Search(ctx, store.SearchQuery{Kind: store.Pageviews, MinTotal: 300e6, Limit: 50})
	var ids []string
	var total string
	tb.eval(`document.getElementById('result-summary').dataset.total`, &total)
	tb.eval(`[...document.querySelectorAll('#result-table tbody tr')].map((tr) => tr.dataset.id)`, &ids)
	if total != fmt.Sprint(want.Total) || want.Total <= 50 {
		t.Fatalf("total %s, store %d (want > 50 for paging)", total, want.Total)
	}
	for i, p := range want.Pageviews {
		if ids[i] != p.ID {
			t.Fatalf("row %d: %s, store %s", i, ids[i], p.ID)
		}
	}
	tb.screenshot("search-pageviews")
	tb.clean("search")
	// Next page.
	tb.run(chromedp.Click(chromedp.CSS(`#next`)))
	// Wait for the second page itself, not the first one still on screen.
	tb.waitFor(`location.search.includes('page=2') && document.body.dataset.ready === '1' &&
	  !!document.querySelector('#result-summary[data-page="2"]')`, 10*time.Second)
	want2, _ := st.Search(ctx, store.SearchQuery{Kind: store.Pageviews, MinTotal: 300e6, Limit: 50, Offset: 50})
	tb.eval(`[...document.querySelectorAll('#result-table tbody tr')].map((tr) => tr.dataset.id)`, &ids)
	if len(ids) != len(want2.Pageviews) || len(ids) == 0 || ids[0] != want2.Pageviews[0].ID {
		t.Errorf("page 2: rows %v, store %d", ids, len(want2.Pageviews))
	}

	// A pageview with lost SYNs, through its link.
	all, _ := st.Search(ctx, store.SearchQuery{Kind: store.Pageviews, Limit: 10000})
	var lossy string
	for _, p := range all.Pageviews {
		if p.SYNLosses > 0 && p.Objects > 2 {
			lossy = p.ID
			break
		}
	}
	if lossy == "" {
		t.Fatal("the known capture has no pageview with a lost SYN")
	}
	tb.open(ts.URL+"/search?kind=pageviews", "#result-table")
	// Navigate by clicking a real link in the table (rendered for this id).
	tb.open(ts.URL+"/search?kind=pageviews&client="+url.QueryEscape(pvClient(t, st, lossy)), "#result-table")
	tb.run(chromedp.Click(chromedp.CSS(`#result-table tr[data-id="`+lossy+`"] a.pv-link`)),
		chromedp.WaitReady(chromedp.CSS(`#waterfall`)))
	checkWaterfall(t, tb, st, lossy)
	tb.screenshot("pageview")
	tb.clean("pageview")

	// HAR from the page's link.
	var har string
	tb.eval(`document.getElementById('export-har').getAttribute('href')`, &har)
	det, _ := st.PageviewByID(ctx, lossy)
	checkHAR(t, readAll(t, get(t, ts.URL+har)), len(det.Transactions))

	// A transaction's "pageview" link finds the pageview containing it.
	tb.open(ts.URL+"/search?min=1000", "#result-table")
	var txID string
	tb.eval(`document.querySelector('#result-table tbody tr').dataset.id`, &txID)
	tb.run(chromedp.Click(chromedp.CSS(`#result-table tbody tr a.pv-link`)), chromedp.WaitReady(chromedp.CSS(`#waterfall`)))
	var inList bool
	tb.eval(`!!document.querySelector('details.tx[data-id="`+txID+`"]')`, &inList)
	if !inList {
		t.Errorf("the pageview reached from transaction %s does not list it", txID)
	}

	// CSV export downloaded by the browser, JSON by its link.
	tb.open(ts.URL+"/search?min=1000&class=standard", "#result-table")
	dl := t.TempDir()
	done := make(chan string, 1)
	if err := chromedp.ListenBrowser(tb.ctx, func(ev any) {
		if e, ok := ev.(*browser.EventDownloadProgress); ok && e.State == browser.DownloadProgressStateCompleted {
			select {
			case done <- e.GUID:
			default:
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, err := chromedp.CallBrowser(tb.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dl, EventsEnabled: &yes}); err != nil {
		t.Fatal(err)
	}
	tb.run(chromedp.Click(chromedp.CSS(`#export-csv`)))
	var guid string
	select {
	case guid = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("csv download did not complete")
	}
	b, err := os.ReadFile(filepath.Join(dl, guid))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	res, _ := st.Search(ctx, store.SearchQuery{MinTotal: 1000e6, Class: "standard", Limit: 10000})
	if int64(len(rows)-1) != res.Total || res.Total == 0 {
		t.Errorf("downloaded csv has %d rows, search %d", len(rows)-1, res.Total)
	}
	var jsonHref string
	tb.eval(`document.getElementById('export-json').getAttribute('href')`, &jsonHref)
	var js struct {
		Records []map[string]any `json:"records"`
	}
	if err := json.Unmarshal(readAll(t, get(t, ts.URL+jsonHref)), &js); err != nil || int64(len(js.Records)) != res.Total {
		t.Errorf("json export: %v, %d records, want %d", err, len(js.Records), res.Total)
	}
	tb.screenshot("search-transactions")
	tb.clean("exports")
}

func pvClient(t *testing.T, st store.Store, id string) string {
	det, err := st.PageviewByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return det.Pageview.Client.String()
}

// checkWaterfall compares the waterfall's rows and segments with the
// stored pageview: one row per connection, each transaction's phases
// contiguous from its Start to its End, the SYN-loss gap drawn.
func checkWaterfall(t *testing.T, tb *tab, st store.Store, id string) {
	t.Helper()
	det, err := st.PageviewByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Rows []string
		Tx   []struct {
			ID   string
			Segs []struct {
				Kind     string
				From, To int64
			}
		}
	}
	tb.eval(`(() => {
	  const w = document.getElementById('waterfall');
	  return {Rows: [...w.querySelectorAll('.wf-row[data-conn]')].map((r) => r.dataset.conn),
	    Tx: [...w.querySelectorAll('.wf-tx')].map((a) => ({ID: a.dataset.tx, Segs: [...a.querySelectorAll('.seg')].map((s) => ({Kind: s.dataset.kind, From: +s.dataset.from, To: +s.dataset.to}))}))};
	})()`, &wf)
	conns := map[string]bool{}
	t0 := det.Pageview.Start
	for _, tx := range det.Transactions {
		conns[tx.ConnectionID] = true
		t0 = min(t0, tx.Start)
	}
	if len(wf.Rows) != len(conns) || len(wf.Tx) != len(det.Transactions) {
		t.Fatalf("waterfall: %d rows, %d transactions; store %d connections, %d transactions", len(wf.Rows), len(wf.Tx), len(conns), len(det.Transactions))
	}
	byID := map[string]int{}
	for i, tx := range det.Transactions {
		byID[tx.ID] = i
	}
	lost := map[string]int64{}
	for _, c := range det.Connections {
		lost[c.ID] = c.SYNLossGap + c.SYNACKLossGap
	}
	sawLoss := false
	for _, g := range wf.Tx {
		tx := det.Transactions[byID[g.ID]]
		at := tx.Start - t0
		for _, s := range g.Segs {
			if s.From != at {
				t.Errorf("tx %s: %s starts at %d, want %d", tx.ID, s.Kind, s.From, at)
			}
			at = s.To
			if s.Kind == "synloss" {
				sawLoss = true
				if s.To-s.From != min(lost[tx.ConnectionID], tx.Tconn) {
					t.Errorf("tx %s: SYN-loss segment %d ns, connection lost %d", tx.ID, s.To-s.From, lost[tx.ConnectionID])
				}
			}
		}
		if at != tx.End-t0 {
			t.Errorf("tx %s: phases end at %d, want %d", tx.ID, at, tx.End-t0)
		}
	}
	if !sawLoss {
		t.Error("no SYN-loss segment in a pageview with SYN losses")
	}
	// A bar opens its transaction's headers.
	last := wf.Tx[len(wf.Tx)-1].ID
	tb.run(chromedp.Click(chromedp.CSS(`.wf-tx[data-tx="` + last + `"]`)))
	tb.waitFor(`document.getElementById('tx-`+last+`').open`, 10*time.Second)
	var headers []string
	tb.eval(`[...document.querySelectorAll('details.tx table.headers th')].map((th) => th.textContent)`, &headers)
	sort.Strings(headers)
	for _, h := range []string{"User-Agent", "Referer", "Host", "URL"} {
		if i := sort.SearchStrings(headers, h); i == len(headers) || headers[i] != h {
			t.Errorf("transaction headers lack %s", h)
		}
	}
}

// Over a store past Config.ExactBelow the overview reads the rollups: the
// page shows the store's Summary, says the percentiles are approximate,
// and its percentiles are within the stated bound of the exact ones.
func TestBrowserOverviewFromRollups(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:", store.Options{Rollups: "on"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := storetest.Ingest(ctx, st, 30000, 0); err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, Config{Store: st, ExactBelow: 1})
	tb := newTab(t)
	tb.open(ts.URL+"/", `#overview[data-rendered="1"]`)
	var d overviewDOM
	tb.eval(readOverview, &d)
	var note string
	tb.eval(`(document.getElementById('approx-note') || {}).textContent || ''`, &note)
	if !strings.Contains(note, "within ±0.76%") {
		t.Errorf("approximation note %q", note)
	}
	if d.Step%int64(time.Minute) != 0 {
		t.Fatalf("series step %d is not whole minutes", d.Step)
	}
	sum, err := st.Summary(ctx, store.SummaryQuery{Class: "", Edges: histEdges, Qs: quantiles, Step: time.Duration(d.Step)})
	if err != nil {
		t.Fatal(err)
	}
	checkOverviewWith(t, st, d, store.TimeRange{}, "", overviewAnswers{ps: sum.Percentiles, hs: sum.Histograms, series: sum.Series, sums: sum.Sums, k: sum.Counters})
	// The exact answers: same counts, histograms and sums; percentiles
	// within the bound.
	exact := exactAnswers(t, st, store.TimeRange{}, "", d.Step)
	if !reflect.DeepEqual(exact.hs, sum.Histograms) || !reflect.DeepEqual(exact.sums, sum.Sums) || exact.k != sum.Counters {
		t.Error("rollup histograms, sums or counters differ from the exact ones")
	}
	for i, p := range exact.ps {
		for j, v := range p.Values {
			got := sum.Percentiles[i].Values[j]
			if e := abs(float64(got-v)) / float64(v); e > store.RollupRelError {
				t.Errorf("%s p%g: rollups %d, exact %d (%.4f)", p.Class, quantiles[j]*100, got, v, e)
			}
		}
	}
	tb.screenshot("overview-rollups")
}

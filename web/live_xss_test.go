package web

import (
	"context"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rtmon/rtmon/store/query"
	"github.com/rtmon/rtmon/synth"
)

// The live panel and the header's pipeline strip follow the feed within
// 2 s of a Publish.
func TestBrowserLiveUpdates(t *testing.T) {
	st := knownCapture(t)
	feed := NewLiveFeed()
	_, ts := newTestServer(t, Config{Store: st, Live: feed})
	tb := newTab(t)
	tb.open(ts.URL+"/", `#overview[data-rendered="1"]`)
	tb.eval(`!!document.getElementById('live')`, nil)

	now := synth.T(100)
	points := func(n int, base int64) []LivePoint {
		var ps []LivePoint
		for i := range n {
			ps = append(ps, LivePoint{T: base + int64(i)*int64(10*time.Millisecond), Kind: "transaction",
				Total: int64(200+i) * int64(time.Millisecond), Tconn: int64(50 * time.Millisecond)})
		}
		return ps
	}
	feed.Publish(LiveEvent{Time: now, Classes: []LiveClass{
		{Class: "premium", Transactions: 10, Pageviews: 2, Points: points(10, now-int64(time.Second))},
		{Class: "standard", Transactions: 30, Pageviews: 5, SYNLosses: 1, Points: points(30, now-int64(time.Second))},
	}, Pipeline: PipelineStats{Packets: 1000, CaptureDrops: 7, Evictions: 2, StoreQueued: 120}})
	took := tb.waitFor(`(() => {
	  const p = document.querySelector('.live-class[data-class="premium"]');
	  const d = document.querySelector('#pipeline [data-stat="capture_drops"]');
	  return !!p && p.dataset.transactions === '10' && !!d && d.dataset.value === '7' &&
	    document.getElementById('live-chart').dataset.points === '40';
	})()`, 20*time.Second)
	t.Logf("first live event shown after %v", took)

	// Traffic continues: counters and points change (how soon is logged;
	// the bound only ends a wait that would never end).
	feed.Publish(LiveEvent{Time: now + int64(time.Second), Classes: []LiveClass{
		{Class: "premium", Transactions: 25, Pageviews: 3, Points: points(15, now)},
		{Class: "standard", Transactions: 31, Pageviews: 5, SYNLosses: 1},
	}, Pipeline: PipelineStats{Packets: 2000, CaptureDrops: 9, Evictions: 2, StoreQueued: 0}})
	took = tb.waitFor(`(() => {
	  const p = document.querySelector('.live-class[data-class="premium"]');
	  const d = document.querySelector('#pipeline [data-stat="capture_drops"]');
	  const b = document.querySelector('#pipeline [data-stat="store_backlog"]');
	  return p.dataset.transactions === '25' && d.dataset.value === '9' && b.dataset.value === '0' &&
	    document.getElementById('live-chart').dataset.points === '55';
	})()`, 20*time.Second)
	t.Logf("second live event shown after %v", took)
	var text string
	tb.eval(`document.querySelector('.live-class[data-class="premium"]').textContent`, &text)
	if !strings.Contains(text, "15.0 tx/s") {
		t.Errorf("premium rate: %q, want 15.0 tx/s (10 -> 25 transactions in 1 s)", text)
	}
	// Drops are shown as a problem, not hidden.
	var warn bool
	tb.eval(`document.querySelector('#pipeline [data-stat="capture_drops"]').classList.contains('warn')`, &warn)
	if !warn {
		t.Error("capture drops are not highlighted")
	}
	// The overview's counters include the pipeline's in live mode.
	tb.waitFor(`document.querySelector('.counter[data-counter="capture_drops"]').dataset.value !== ''`, 10*time.Second)
	tb.screenshot("overview-live")
	tb.clean("live")
}

// Script payloads in URL, Host, Referer and User-Agent render as text.
const (
	xssImg    = `<img src=x onerror=window.__xss=1>`
	xssScript = `<script>window.__xss=1</script>`
	xssURL    = `/p/<script>window.__xss=1</script>/<svg/onload=window.__xss=1>?q="><img/src/onerror=window.__xss=1>`
)

func xssCapture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "xss.pcap")
	err := synth.WriteFile(path, synth.Options{Nanosecond: true}, func(w *synth.Writer) error {
		client := netip.MustParseAddrPort("198.51.100.66:40000")
		server := netip.MustParseAddrPort("203.0.113.9:80")
		ms := int64(time.Millisecond)
		for i, req := range []struct{ host, url, ref, ua, ctype string }{
			{xssImg, xssURL, "http://" + xssScript + "/", xssScript + " " + xssImg, "text/html"},
			{"evil.example", "/obj/" + url.PathEscape(xssImg), "http://evil.example" + xssURL, xssImg, "image/png"},
		} {
			c := w.Conn(netip.AddrPortFrom(client.Addr(), client.Port()+uint16(i)), server, 1000+uint32(i)*7919, 5000+uint32(i)*104729)
			t0 := synth.T(float64(i) * 0.4)
			c.SYN(t0)
			c.SYNACK(t0 + ms/10)
			c.ACK(t0 + 40*ms)
			c.Client(t0+41*ms, synth.Request("GET", req.host, req.url, "Referer: "+req.ref, "User-Agent: "+req.ua))
			c.ServerAck(t0 + 42*ms)
			c.ServerMSS(t0+60*ms, synth.Response(200, req.ctype, []byte(xssScript+xssImg)), 1460, 0)
			c.ClientAck(t0 + 100*ms)
			c.ClientFIN(t0 + 200*ms)
			c.ServerFIN(t0 + 201*ms)
			c.ClientAck(t0 + 240*ms)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBrowserXSSCaptureRendersAsText(t *testing.T) {
	classes := testClasses(t)
	st := openStore(t, classes)
	ingest(t, st, classes, xssCapture(t))
	ctx := context.Background()
	res, err := st.Search(ctx, query.SearchQuery{Limit: 10})
	if err != nil || res.Total != 2 {
		t.Fatalf("xss capture: %d transactions, %v", res.Total, err)
	}
	if res.Transactions[1].URL != xssURL || res.Transactions[1].Host != xssImg || !strings.Contains(res.Transactions[1].UserAgent, xssScript) {
		t.Fatalf("payloads did not survive reconstruction: %+v", res.Transactions[1])
	}
	pvs, _ := st.Search(ctx, query.SearchQuery{Kind: query.Pageviews, Limit: 10})
	if len(pvs.Pageviews) == 0 {
		t.Fatal("no pageview from the xss capture")
	}
	_, ts := newTestServer(t, Config{Store: st})
	tb := newTab(t)
	pages := []struct{ name, url, ready string }{
		{"overview", "/", `#overview[data-rendered="1"]`},
		{"search", "/search?url=" + url.QueryEscape("<script>"), "#result-table"},
		{"search-pageviews", "/search?kind=pageviews", "#result-table"},
		{"pageview", "/pageview/" + url.PathEscape(pvs.Pageviews[0].ID), "#waterfall"},
	}
	for _, p := range pages {
		tb.open(ts.URL+p.url, p.ready)
		// Open every transaction's headers so all strings are on screen.
		tb.eval(`document.querySelectorAll('details').forEach((d) => d.open = true); true`, nil)
		time.Sleep(300 * time.Millisecond) // let any injected handler fire
		var r struct {
			XSS   bool
			Text  string
			Nodes int
		}
		tb.eval(`({XSS: window.__xss !== undefined, Text: document.body.innerText,
		  Nodes: document.querySelectorAll('main script, main img, main svg:not(.legend svg) [onload], main [onerror], main [onload]').length})`, &r)
		if r.XSS {
			t.Errorf("%s: a payload executed", p.name)
		}
		if r.Nodes != 0 {
			t.Errorf("%s: %d payload elements in the DOM", p.name, r.Nodes)
		}
		want := map[string][]string{
			"overview":         {"<img src=x onerror=window.__xss=1>/p/<script>window.__xss=1</script>"},
			"search":           {xssURL, xssImg},
			"search-pageviews": {xssURL},
			"pageview":         {xssURL, xssImg, xssScript + " " + xssImg, "http://" + xssScript + "/"},
		}[p.name]
		for _, w := range want {
			if !strings.Contains(r.Text, w) {
				t.Errorf("%s: the literal text %q is not shown", p.name, w)
			}
		}
		tb.screenshot("xss-" + p.name)
		tb.clean("xss " + p.name)
	}
	// The downloadable report, opened in the browser, is inert too.
	tb.run(chromedp.Navigate(ts.URL + "/export/report.html?inline=1"))
	var r struct {
		XSS  bool
		Text string
	}
	tb.eval(`({XSS: window.__xss !== undefined, Text: document.body.innerText})`, &r)
	if r.XSS || !strings.Contains(r.Text, xssImg+xssURL) {
		t.Errorf("report: executed %v, literal shown %v", r.XSS, strings.Contains(r.Text, xssImg+xssURL))
	}
	tb.screenshot("xss-report")
}

// A wall screen opens the UI once with ?token=; the cookie then carries the
// page's own requests (assets, API, SSE) and the token leaves the URL.
func TestBrowserTokenLink(t *testing.T) {
	st := knownCapture(t)
	feed := NewLiveFeed()
	_, ts := newTestServer(t, Config{Store: st, Listen: "0.0.0.0:0", Token: "wall-screen-token", Live: feed})
	tb := newTab(t)
	tb.open(ts.URL+"/?class=premium&token=wall-screen-token", `#overview[data-rendered="1"]`)
	var href string
	tb.eval(`location.href`, &href)
	if strings.Contains(href, "token") || !strings.Contains(href, "class=premium") {
		t.Errorf("address after the token link: %s", href)
	}
	feed.Publish(LiveEvent{Pipeline: PipelineStats{Evictions: 5}})
	tb.waitFor(`document.querySelector('#pipeline [data-stat="evictions"]').dataset.value === '5'`, 10*time.Second)
	tb.clean("token link")
	// Without the cookie nothing is served.
	resp := get(t, ts.URL+"/api/meta")
	readAll(t, resp)
	if resp.StatusCode != 401 {
		t.Errorf("api without token: %d", resp.StatusCode)
	}
}

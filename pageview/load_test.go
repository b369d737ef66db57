package pageview

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"testing"

	"github.com/rtmon/rtmon/reconstruct"
)

// withHTML gives a container the body a browser would parse: the objects
// named, as a server sends them (gzip when asked).
func withHTML(t *testing.T, tx *reconstruct.Transaction, gz bool, tags ...string) *reconstruct.Transaction {
	t.Helper()
	body := []byte("<!DOCTYPE html><html><head>" + strings.Join(tags, "\n") + "</head><body><p>text</p></body></html>")
	if gz {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write(body)
		w.Close()
		body = b.Bytes()
		tx.ContentEncoding = "gzip"
	}
	tx.Body = body
	return tx
}

func afterLoad(c *collector, id string) bool {
	for _, tx := range c.txs {
		if tx.ID == id {
			return tx.Flags&reconstruct.FlagAfterLoad != 0
		}
	}
	c.t.Fatalf("%s not forwarded", id)
	return false
}

// A real site: the favicon is served but not declared, and a beacon goes
// out after the load event. Both stay with the pageview, outside its Total.
func TestFaviconAndBeaconAfterLoad(t *testing.T) {
	for _, html := range []bool{true, false} {
		t.Run(fmt.Sprintf("html=%v", html), func(t *testing.T) {
			cont := mk(txSpec{conn: "c1", url: "/index.html", ct: "text/html", start: 0, tconn: 100, tserver: 100, ttransfer: 100})
			if html {
				withHTML(t, cont, true, `<link rel="stylesheet" href="/s.css">`, `<img src="/a.png">`)
			}
			css := obj("c1", 1, "/s.css", page, 310, 0, 50, 50)
			css.ContentType = "text/css"
			img := obj("c2", 0, "/a.png", page, 320, 100, 50, 100)  // ends at 570
			fav := obj("c1", 2, "/favicon.ico", "", 580, 0, 20, 10) // after the load event
			beacon := obj("c2", 1, "/beacon", page, 600, 0, 5, 0)   // sendBeacon: POST, 204
			beacon.Method, beacon.ContentType, beacon.Status = "POST", "", 204
			c, g := run(t, Config{}, cont, css, img, fav, beacon)
			id := same(t, c, cont.ID, css.ID, img.ID, fav.ID, beacon.ID)
			p := c.byID[id]
			if p.End != img.End || p.Total != img.End-cont.Start || p.Objects != 2 || p.AfterLoad != 2 {
				t.Errorf("pageview end %d total %d objects %d after-load %d", (p.End-base)/ms, p.Total/ms, p.Objects, p.AfterLoad)
			}
			if !afterLoad(c, fav.ID) || !afterLoad(c, beacon.ID) || afterLoad(c, img.ID) || afterLoad(c, css.ID) {
				t.Error("after-load flags wrong")
			}
			if want := map[bool]string{true: "html", false: "referer"}[html]; p.Evidence != want {
				t.Errorf("evidence %q, want %q", p.Evidence, want)
			}
			if len(c.members[id]) != 5 || g.Stats().AfterLoad != 2 {
				t.Errorf("members %v stats %+v", c.members[id], g.Stats())
			}
		})
	}
}

// The load event never waits for fetch, XHR or a beacon: one that was over
// within the load is part of it, one that ended later is after the load
// even if its Start (on a fresh connection, the first SYN, which the
// client may have sent for another request) came before the load's end.
func TestXHRAndBeaconNeverDelayTheLoad(t *testing.T) {
	cont := withHTML(t, html("c1", 0, "/index.html", 0, 100, 100, 100), false, `<img src="/a.png">`)
	img := obj("c2", 0, "/a.png", page, 320, 100, 50, 100) // ends at 570
	xhr := obj("c1", 1, "/api/items", page, 400, 0, 60, 10)
	xhr.ContentType = "application/json"
	beacon := obj("c3", 0, "/beacon", page, 200, 1100, 5, 0) // SYN at 200, retransmitted: ends at 1305
	beacon.Method, beacon.ContentType, beacon.Status = "POST", "", 204
	c, _ := run(t, Config{}, cont, img, xhr, beacon)
	id := same(t, c, cont.ID, img.ID, xhr.ID, beacon.ID)
	p := c.byID[id]
	if p.End != img.End || p.Objects != 2 || p.AfterLoad != 1 {
		t.Errorf("pageview end %d objects %d after-load %d, want end %d, 2 objects, 1 after load",
			(p.End-base)/ms, p.Objects, p.AfterLoad, (img.End-base)/ms)
	}
	if afterLoad(c, xhr.ID) || !afterLoad(c, beacon.ID) {
		t.Errorf("after-load flags: xhr %v beacon %v, want false true", afterLoad(c, xhr.ID), afterLoad(c, beacon.ID))
	}
}

// An object the HTML names as blocking counts however late it starts (a
// background image found once its stylesheet arrived); a lazy image the
// HTML marks as such does not extend the load.
func TestDeclaredObjectsDecideTheLoad(t *testing.T) {
	cont := withHTML(t, html("c1", 0, "/index.html", 0, 100, 100, 100), false,
		`<link rel="stylesheet" href="/s.css">`, `<img loading="lazy" src="/lazy.png">`)
	css := obj("c1", 1, "/s.css", page, 310, 0, 50, 50)
	css.ContentType, css.Body = "text/css", []byte(".hero{background:url(/bg.jpg)}")
	bg := obj("c1", 2, "/bg.jpg", "http://www.example.com/s.css", 900, 0, 50, 50) // 490 ms after the stylesheet
	lazy := obj("c2", 0, "/lazy.png", page, 950, 100, 10, 10)
	c, _ := run(t, Config{}, cont, css, bg, lazy)
	id := same(t, c, cont.ID, css.ID, bg.ID, lazy.ID)
	if p := c.byID[id]; p.End != bg.End || p.Objects != 2 || p.AfterLoad != 1 || !afterLoad(c, lazy.ID) {
		t.Errorf("pageview end %d objects %d after-load %d", (p.End-base)/ms, p.Objects, p.AfterLoad)
	}
}

// A client that sends no Referer and moves to the next page on its
// keep-alive connections: the new page's objects go to the new page, by its
// HTML, even on the old page's connections; an object only the older page
// names, still loading, stays with it.
func TestNoRefererKeepAliveAcrossPages(t *testing.T) {
	p1 := withHTML(t, html("c1", 0, "/one.html", 0, 100, 100, 100), false,
		`<img src="/1a.png">`, `<img src="/1b.png">`, `<img src="/1slow.png">`)
	o1a := obj("c1", 1, "/1a.png", "", 310, 0, 20, 20)
	o1b := obj("c2", 0, "/1b.png", "", 310, 100, 20, 20)
	slow := obj("c3", 0, "/1slow.png", "", 320, 100, 20, 2000) // still loading when the user clicks
	p2 := withHTML(t, html("c1", 2, "/two.html", 1000, 0, 100, 100), false,
		`<img src="/2a.png">`, `<img src="/2b.png">`)
	o2a := obj("c2", 1, "/2a.png", "", 1210, 0, 20, 20) // on page one's connection
	o2b := obj("c1", 3, "/2b.png", "", 1210, 0, 20, 20)
	for _, tx := range []*reconstruct.Transaction{p1, o1a, o1b, slow, p2, o2a, o2b} {
		tx.Referer = ""
	}
	c, g := run(t, Config{}, p1, o1a, o1b, p2, o2a, o2b, slow)
	a := same(t, c, p1.ID, o1a.ID, o1b.ID, slow.ID)
	b := same(t, c, p2.ID, o2a.ID, o2b.ID)
	if a == b {
		t.Fatal("the two pages share a pageview")
	}
	if c.byID[a].Objects != 3 || c.byID[b].Objects != 2 || c.byID[b].Evidence != "html" {
		t.Errorf("objects %d %d, evidence %q", c.byID[a].Objects, c.byID[b].Objects, c.byID[b].Evidence)
	}
	if s := g.Stats(); s.ByHTML != 5 || s.ByWindow != 0 {
		t.Errorf("stats %+v", s)
	}
}

// A navigation answered by a redirect: the pageview starts at the redirect
// and holds it; the page it led to is the container.
func TestRedirectStartsThePageview(t *testing.T) {
	r := html("c1", 0, "/go/home", 0, 100, 20, 1)
	r.Status, r.Location = 302, "/index.html"
	cont := html("c1", 1, "/index.html", 125, 0, 100, 100)
	o := obj("c2", 0, "/a.png", page, 340, 100, 20, 20)
	c, g := run(t, Config{}, r, cont, o)
	id := same(t, c, cont.ID, r.ID, o.ID)
	p := c.byID[id]
	if p.Start != r.Start || p.ContainerID != cont.ID || p.URL != "/index.html" || p.Redirects != 1 || p.Objects != 1 ||
		p.Total != o.End-r.Start {
		t.Errorf("pageview %+v", p)
	}
	if got := c.members[id]; len(got) != 3 || got[0] != cont.ID || got[1] != r.ID {
		t.Errorf("members %v", got)
	}
	if g.Stats().Pageviews != 1 {
		t.Errorf("stats %+v", g.Stats())
	}
	// A redirect nobody followed goes out stand-alone.
	lone := html("c9", 0, "/go/away", 0, 100, 20, 1)
	lone.Status, lone.Location = 301, "http://elsewhere.example/"
	c, _ = run(t, Config{}, lone)
	if c.pv(lone.ID) != "" || len(c.pvs) != 0 {
		t.Error("an unfollowed redirect made a pageview")
	}
}

// An iframe is an object of the page that embeds it, not a page of its own;
// its own objects follow it by Referer.
func TestIframeIsAnObject(t *testing.T) {
	cont := withHTML(t, html("c1", 0, "/index.html", 0, 100, 100, 100), false, `<iframe src="/ad.html"></iframe>`)
	frame := html("c2", 0, "/ad.html", 320, 100, 30, 30)
	inner := obj("c2", 1, "/ad.png", "http://www.example.com/ad.html", 490, 0, 20, 20)
	c, _ := run(t, Config{}, cont, frame, inner)
	id := same(t, c, cont.ID, frame.ID, inner.ID)
	if len(c.pvs) != 1 || c.byID[id].Objects != 2 {
		t.Errorf("%d pageviews", len(c.pvs))
	}
	// With Sec-Fetch-Dest: document the same URL is a navigation.
	nav := html("c3", 0, "/ad.html", 320, 100, 30, 30)
	nav.SecFetchDest = "document"
	c, _ = run(t, Config{}, withHTML(t, html("c1", 0, "/index.html", 0, 100, 100, 100), false, `<iframe src="/ad.html"></iframe>`), nav)
	if len(c.pvs) != 2 {
		t.Errorf("navigation to an embedded URL: %d pageviews", len(c.pvs))
	}
}

// A browser with two tabs: page A asks for no Referer, page B (opened
// later) does not. A's image beacon, which carries no Referer and which
// neither page names, is A's: a browser that sends Referers sends none only
// for a page that asks so. And on one tab, a beacon the old page's timer
// sends while the next navigation is under way (the new page's HTML not
// yet at the client) stays with the old page.
func TestUndeclaredObjectsAcrossTabsAndNavigations(t *testing.T) {
	a := withHTML(t, html("a1", 0, "/a.html", 0, 100, 100, 100), false, `<meta name="referrer" content="no-referrer">`, `<img src="/a1.png">`)
	a1 := obj("a1", 1, "/a1.png", "", 310, 0, 20, 20)
	b := withHTML(t, html("b1", 0, "/b.html", 350, 100, 100, 100), false, `<img src="/b1.png">`)
	b1 := obj("b1", 1, "/b1.png", "http://www.example.com/b.html", 660, 0, 20, 20)
	beaconA := obj("a1", 2, "/pixel.gif?a", "", 700, 0, 20, 20)
	c, _ := run(t, Config{}, a, a1, b, b1, beaconA)
	same(t, c, a.ID, a1.ID, beaconA.ID)
	same(t, c, b.ID, b1.ID)
	if !afterLoad(c, beaconA.ID) {
		t.Error("the beacon is not after A's load")
	}

	// One tab: page X loads, then the next navigation (Y) starts; X's
	// beacon leaves before Y's HTML reached the client.
	x := withHTML(t, html("x1", 0, "/x.html", 0, 100, 100, 100), false, `<img src="/x1.png">`)
	x1 := obj("x1", 1, "/x1.png", "", 310, 0, 20, 20)
	y := withHTML(t, html("x1", 2, "/y.html", 400, 0, 200, 100), false, `<img src="/y1.png">`)
	beaconX := obj("x2", 0, "/beacon", "", 420, 50, 20, 0)
	beaconX.Method, beaconX.ContentType, beaconX.Status = "POST", "", 204
	for _, tx := range []*reconstruct.Transaction{x, x1, y} {
		tx.Referer = ""
	}
	c, _ = run(t, Config{}, x, x1, y, beaconX)
	same(t, c, x.ID, x1.ID, beaconX.ID)
	if !afterLoad(c, beaconX.ID) || c.pv(y.ID) == c.pv(x.ID) {
		t.Error("the old page's beacon went to the next page")
	}
}

// Two tabs load at once (Chromium's favicon fetches carry no Referer and
// ride any idle connection): each page asks for its favicon once, after
// its own load, so the second favicon belongs to the tab still without
// one, even though another page is newer.
func TestFaviconsOfTwoTabs(t *testing.T) {
	a := withHTML(t, html("a1", 0, "/a.html", 0, 100, 100, 100), false, `<img src="/a1.png">`)
	a1 := obj("a1", 1, "/a1.png", "http://www.example.com/a.html", 310, 0, 300, 590) // ends at 1200
	b := withHTML(t, html("b1", 0, "/b.html", 300, 100, 100, 100), false, `<img src="/b1.png">`)
	b1 := obj("b1", 1, "/b1.png", "http://www.example.com/b.html", 610, 0, 40, 50) // ends at 700
	favB := obj("b1", 2, "/favicon.ico", "", 720, 0, 20, 10)
	favA := obj("b1", 3, "/favicon.ico", "", 1220, 0, 20, 10)
	c, _ := run(t, Config{}, a, a1, b, b1, favB, favA)
	same(t, c, a.ID, a1.ID, favA.ID)
	same(t, c, b.ID, b1.ID, favB.ID)
	if !afterLoad(c, favA.ID) || !afterLoad(c, favB.ID) {
		t.Error("favicons not after load")
	}
}

// Secrets in captured URLs are redacted before the grouper sees them
// (reconstruct.RedactURL): the container's URL and the objects' Referers
// carry "token=REDACTED", the HTML names its objects with the real
// signature. The objects still join the page, by Referer and by HTML.
func TestRedactedURLsStillGroup(t *testing.T) {
	red := reconstruct.RedactURL
	c1 := withHTML(t, html("c1", 0, red("/index.html?token=s3cret"), 0, 50, 100, 20), false,
		`<img src="/a.png?sig=abc123">`, `<script src="/b.js"></script>`)
	ref := red("http://www.example.com/index.html?token=s3cret")
	byRef := obj("c1", 1, red("/b.js"), ref, 200, 0, 10, 10)
	byHTML := obj("c2", 0, red("/a.png?sig=abc123"), "", 210, 50, 10, 10)
	if c1.URL != "/index.html?token=REDACTED" || byHTML.URL != "/a.png?sig=REDACTED" {
		t.Fatalf("not redacted: %s %s", c1.URL, byHTML.URL)
	}
	c, _ := run(t, Config{}, c1, byRef, byHTML)
	same(t, c, c1.ID, byRef.ID, byHTML.ID)
}

// With whole queries redacted (--redact-query) a page with a query string
// still gathers its objects: by Referer (container URL and Referer are
// redacted alike) and by HTML, since the Grouper redacts the URLs the
// HTML names the same way. Without the tracker's redaction in the
// Grouper's Config, the HTML names no object it can find.
func TestWholeQueryRedactionStillGroups(t *testing.T) {
	red := reconstruct.URLRedaction{WholeQuery: true}.Redact
	build := func() []*reconstruct.Transaction {
		c1 := withHTML(t, html("c1", 0, red("/search?q=shoes&token=s3cret"), 0, 50, 100, 20), false,
			`<img src="/a.png?v=3">`, `<script src="/b.js?v=3"></script>`)
		ref := red("http://www.example.com/search?q=shoes&token=s3cret")
		byRef := obj("c1", 1, red("/b.js?v=3"), ref, 200, 0, 10, 10)
		byHTML := obj("c2", 0, red("/a.png?v=3"), "", 210, 50, 10, 10)
		return []*reconstruct.Transaction{c1, byRef, byHTML}
	}
	txs := build()
	if txs[0].URL != "/search?REDACTED" || txs[1].Referer != "http://www.example.com/search?REDACTED" {
		t.Fatalf("not redacted: %s %s", txs[0].URL, txs[1].Referer)
	}
	c, g := run(t, Config{Redaction: reconstruct.URLRedaction{WholeQuery: true}}, txs...)
	same(t, c, txs[0].ID, txs[1].ID, txs[2].ID)
	if st := g.Stats(); st.ByReferer != 1 || st.ByHTML != 1 {
		t.Errorf("%d objects by Referer and %d by HTML, want 1 and 1", st.ByReferer, st.ByHTML)
	}
	_, g = run(t, Config{}, build()...)
	if st := g.Stats(); st.ByHTML != 0 {
		t.Errorf("the HTML's /a.png?v=3 matched /a.png?REDACTED without the redaction configured (%d)", st.ByHTML)
	}
}

// A client that sends no Referer, on a page an overloaded server took 12 s
// to load: the favicon and a beacon the browser sends at the load event
// start past Window from the container, yet right at the load's end. They
// stay with the page, after its load; a request long after the load, and
// past Window, does not.
func TestSlowLoadStretchesWindow(t *testing.T) {
	cont := withHTML(t, html("c1", 0, "/index.html", 0, 100, 100, 100), false, `<img src="/slow.png">`)
	slow := obj("c2", 0, "/slow.png", "", 310, 7000, 4500, 200) // SYNs dropped, then queued: ends at 12010
	fav := obj("c1", 1, "/favicon.ico", "", 12020, 0, 20, 10)
	beacon := obj("c3", 0, "/beacon", "", 12030, 100, 10, 0)
	beacon.Method, beacon.ContentType, beacon.Status = "POST", "", 204
	poll := obj("c1", 2, "/api/poll", "", 13500, 0, 10, 0)
	poll.ContentType = "application/json"
	for _, tx := range []*reconstruct.Transaction{cont, slow, fav, beacon, poll} {
		tx.Referer = ""
	}
	c, _ := run(t, Config{}, cont, slow, fav, beacon, poll)
	id := same(t, c, cont.ID, slow.ID, fav.ID, beacon.ID)
	if p := c.byID[id]; p.End != slow.End || p.AfterLoad != 2 {
		t.Errorf("page ends %d ms after its start with %d after-load objects; want %d ms and 2", (p.End-p.Start)/ms, p.AfterLoad, (slow.End-p.Start)/ms)
	}
	if got := c.tags[poll.ID].PageviewID; got != "" {
		t.Errorf("a poll 1.5 s after the load and past Window joined pageview %s", got)
	}
}

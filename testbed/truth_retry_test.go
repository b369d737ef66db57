package testbed

import (
	"net/netip"
	"testing"
)

// TestChromiumRetryIsTheRequest: when the keep-alive connection Chromium
// sent a request on fails before the response, Chromium sends it again on
// another connection; the retry is the request's truth, the first attempt
// is abandoned (not an after-load request, not an incomplete page).
func TestChromiumRetryIsTheRequest(t *testing.T) {
	testRetryIsTheRequest(t, BrowserChromium, "Mozilla/5.0 Chrome")
}

// Go's Transport retries a GET whose reused connection failed too, and
// the client reports the retry's connection (seen once beside a CPU hog
// on the lossy link: the first attempt was left to no page, and the
// page's pageview had one object more than its truth).
func TestGoRetryIsTheRequest(t *testing.T) {
	testRetryIsTheRequest(t, BrowserGo, GoClientUA)
}

func testRetryIsTheRequest(t *testing.T, source, userAgent string) {
	client := netip.MustParseAddr("198.51.100.10")
	server := netip.MustParseAddr("203.0.113.2")
	txn := func(i int, url string, start, end int64, complete bool) *WireTruthTxn {
		return &WireTruthTxn{Index: i, Method: "GET", URL: url, Status: 200, UserAgent: userAgent, Referer: "http://x/p1.html",
			ReqFirst: start, Start: start, End: end, Total: end - start, Complete: complete}
	}
	w := &ClientWire{Conns: []*WireTruthConn{
		{Client: client, ClientPort: 40000, Server: server, ServerPort: 80, Txns: []*WireTruthTxn{
			txn(0, "/p1.html", 1000, 2000, true),
			txn(1, "/o/a.css", 3000, 0, false), // the connection failed here
		}},
		{Client: client, ClientPort: 40002, Server: server, ServerPort: 80, Txns: []*WireTruthTxn{
			txn(0, "/o/b.png", 3100, 3900, true),
			txn(1, "/o/a.css", 4000, 5000, true), // Chromium's retry
		}},
	}}
	w.Conns[1].Txns[1].Index = 1
	// The Go client reports the connection each request got (the retry's).
	pages := []PageTruth{{Source: source, Client: client.String(), URL: "/p1.html", NavIssued: 500,
		Container: ObjectTruth{URL: "/p1.html", LocalPort: 40000},
		Objects:   []ObjectTruth{{URL: "/o/a.css", LocalPort: 40002}, {URL: "/o/b.png", LocalPort: 40002}}}}
	rest := AttachWireTruth(pages, w)
	pw := pages[0].Wire
	if len(rest) != 0 || !pw.Valid || len(pw.Incomplete) != 0 || len(pw.AfterLoad) != 0 {
		t.Fatalf("unattributed %v, wire %+v", rest, pw)
	}
	if len(pw.Abandoned) != 1 || pw.Abandoned[0].Port != 40000 {
		t.Errorf("abandoned %+v, want the attempt on port 40000", pw.Abandoned)
	}
	if pw.End != 5000 || len(pw.InLoad) != 2 {
		t.Errorf("page ends %d with %d in-load objects, want 5000 (the retry's end) and 2", pw.End, len(pw.InLoad))
	}
	if source != BrowserChromium {
		return // a Go request without a retry reports the failed connection's port
	}
	// Without a retry the page stays without usable truth.
	w.Conns[1].Txns = w.Conns[1].Txns[:1]
	pages[0].Wire = nil
	AttachWireTruth(pages, w)
	if pages[0].Wire.Valid || len(pages[0].Wire.Incomplete) != 1 {
		t.Errorf("no retry: wire %+v, want invalid with one incomplete request", pages[0].Wire)
	}
}

// TestChromiumFaviconByReferer: two tabs of one browser each fetch the
// favicon; the one whose Referer names a page is that page's, whichever
// tab navigated first.
func TestChromiumFaviconByReferer(t *testing.T) {
	client := netip.MustParseAddr("198.51.100.12")
	server := netip.MustParseAddr("203.0.113.2")
	txn := func(i int, url, ref string, start int64) *WireTruthTxn {
		return &WireTruthTxn{Index: i, Method: "GET", URL: url, Status: 200, UserAgent: "Mozilla/5.0 Chrome", Referer: ref,
			ReqFirst: start, Start: start, End: start + 100, Total: 100, Complete: true}
	}
	w := &ClientWire{Conns: []*WireTruthConn{
		{Client: client, ClientPort: 40000, Server: server, ServerPort: 80, Txns: []*WireTruthTxn{
			txn(0, "/p3.html", "", 1000),
			txn(1, "/favicon.ico", "http://203.0.113.2/p8.html", 5000), // tab 1's, sent first
		}},
		{Client: client, ClientPort: 40002, Server: server, ServerPort: 80, Txns: []*WireTruthTxn{
			txn(0, "/p8.html", "", 1200),
			txn(1, "/favicon.ico", "", 5500), // tab 0's, without Referer
		}},
	}}
	pages := []PageTruth{
		{Source: BrowserChromium, Client: client.String(), URL: "/p3.html", NavIssued: 900, Tab: 0,
			Container: ObjectTruth{URL: "/p3.html"}, AfterLoad: []ObjectTruth{{URL: "/favicon.ico"}}},
		{Source: BrowserChromium, Client: client.String(), URL: "/p8.html", NavIssued: 1100, Tab: 1,
			Container: ObjectTruth{URL: "/p8.html"}, AfterLoad: []ObjectTruth{{URL: "/favicon.ico"}}},
	}
	if rest := AttachWireTruth(pages, w); len(rest) != 0 {
		t.Fatalf("unattributed %v", rest)
	}
	if a := pages[0].Wire.AfterLoad; len(a) != 1 || a[0].Port != 40002 {
		t.Errorf("p3's favicon %+v, want the one without Referer (port 40002)", a)
	}
	if a := pages[1].Wire.AfterLoad; len(a) != 1 || a[0].Port != 40000 {
		t.Errorf("p8's favicon %+v, want the one naming p8 (port 40000)", a)
	}
}

// TestChromiumFaviconOfTheNextDocument: Chromium names a favicon under the
// page its tab was loading, but the request's Referer is the tab's next
// document: the request is the next page's (by its Referer, as a monitor
// sees it), and the first page's truth stands without it.
func TestChromiumFaviconOfTheNextDocument(t *testing.T) {
	client := netip.MustParseAddr("198.51.100.12")
	server := netip.MustParseAddr("203.0.113.2")
	txn := func(i int, url, ref string, start int64) *WireTruthTxn {
		return &WireTruthTxn{Index: i, Method: "GET", URL: url, Status: 200, UserAgent: "Mozilla/5.0 Chrome", Referer: ref,
			ReqFirst: start, Start: start, End: start + 100, Total: 100, Complete: true}
	}
	w := &ClientWire{Conns: []*WireTruthConn{{Client: client, ClientPort: 40000, Server: server, ServerPort: 80, Txns: []*WireTruthTxn{
		txn(0, "/p3.html", "", 1000),
		txn(1, "/p13.html", "", 3000),
		txn(2, "/favicon.ico", "http://203.0.113.2/p13.html", 3500),
	}}}}
	pages := []PageTruth{
		{Source: BrowserChromium, Client: client.String(), URL: "/p3.html", NavIssued: 900,
			Container: ObjectTruth{URL: "/p3.html"}, AfterLoad: []ObjectTruth{{URL: "/favicon.ico"}}},
		{Source: BrowserChromium, Client: client.String(), URL: "/p13.html", NavIssued: 2900,
			Container: ObjectTruth{URL: "/p13.html"}},
	}
	if rest := AttachWireTruth(pages, w); len(rest) != 0 {
		t.Fatalf("unattributed %v", rest)
	}
	if pw := pages[0].Wire; !pw.Valid || len(pw.AfterLoad) != 0 || pw.AfterLoadMissing != 1 {
		t.Errorf("p3: %+v, want valid, its favicon counted missing", pw)
	}
	if a := pages[1].Wire.AfterLoad; len(a) != 1 || a[0].URL != "/favicon.ico" {
		t.Errorf("p13 after load %+v, want the favicon naming it", a)
	}
}

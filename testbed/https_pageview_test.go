package testbed

// Pageviews over HTTPS (issue 14): Chromium, and the Go client at
// another round trip, load the generated site from nginx over TLS,
// HTTP/1.1 and HTTP/2, across the emulated link, and write their TLS
// secrets to a key log. rtmon decrypts
// the server-side capture with that log and must time the transactions
// and pageviews as it does in cleartext. The truth is the client's wire,
// read by another decoder: tshark decrypts the client-side capture with
// the same log and says when each request left the client and when each
// response's last byte reached it.

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// chromiumHTTPSRun holds what one HTTPS run left.
type chromiumHTTPSRun struct {
	client                         string // "chromium" or "go"
	capture, clientCapture, keyLog string
	port                           int
	pages                          []PageTruth
	scenario                       string
	bridge                         BridgeStats
	nftDrops                       int
	serverWire                     map[uint16]*TLSWireConn // the server capture decrypted (serverSaw)
}

// serverSaw reports whether the server's capture holds the request of
// w, an answer the client never had: a request lost on the way and
// never resent before the connection closed (the Go client's transport
// moves it to a new connection when the server says goodbye) reached no
// monitor at the server, and no record can be asked of it. The server
// capture is decrypted once, on the first call.
func (r *chromiumHTTPSRun) serverSaw(t *testing.T, w *TLSWireTxn) bool {
	t.Helper()
	if r.serverWire == nil {
		conns, err := ReadTLSWire(testContext(t), r.capture, r.keyLog, r.port)
		if err != nil {
			t.Fatal(err)
		}
		r.serverWire = conns
	}
	c := r.serverWire[w.Port]
	if c == nil {
		return false
	}
	// By stream, method and URL: an HTTP/1.1 request of a URL asked
	// before on the connection counts as seen, which errs toward asking
	// rtmon for it.
	return slices.ContainsFunc(c.Txns, func(s *TLSWireTxn) bool {
		return s.Stream == w.Stream && s.Method == w.Method && s.URL == w.URL
	})
}

// httpsScenarios are the cleartext scenarios' network conditions, run
// over HTTPS: a clean path, frames lost (handshakes spared), every
// third SYN dropped at the server (the first included: an HTTP/2 browser
// opens one or two connections), every fifth SYN/ACK lost on the way to
// the client, and the cleartext mixed-rtt's clients: Chromium at 150 ms
// loading pages in two tabs at once (over HTTP/2 both tabs' pages share
// one connection), the Go client at 110 ms asking for brotli.
var httpsScenarios = []string{"clean", "loss", "syn-drops", "synack-loss", "mixed-rtt"}

// runChromiumHTTPS loads loads pages of the generated site in one
// client (Chromium at 80 ms, or the Go client at 150 ms with its
// connections kept across loads, as a browser keeps them) over HTTPS
// (HTTP/2 when h2) under server- and client-side captures, in one of
// httpsScenarios.
func runChromiumHTTPS(t *testing.T, client string, h2 bool, scenario string, loads int) *chromiumHTTPSRun {
	t.Helper()
	ctx := testContext(t)
	sc := Scenario{Link: LinkOptions{RTT: defaultRTTs(), DefaultRTT: 80 * time.Millisecond, Seed: 42}}
	switch scenario {
	case "loss":
		sc.Link.Loss, sc.Link.LossSparesSYN = 0.02, true
	case "synack-loss":
		sc.DropSYNACKMod = 5
	}
	tb := New(t, sc.Options())
	t.Logf("testbed %s in %s", tb.Name, tb.Dir)
	site := GenerateSite(16, 42)
	be, err := tb.StartBackend(site)
	if err != nil {
		t.Fatal(err)
	}
	ng, err := tb.StartNginx(ctx, NginxOptions{Content: site.Content, Backend: be.Addr.String(), WebSite: true,
		KeepaliveTimeout: 5 * time.Second, TLS: &NginxTLS{HTTP2: h2}})
	if err != nil {
		t.Fatal(err)
	}
	var drop *NFTable
	if scenario == "syn-drops" {
		body := fmt.Sprintf(`  chain input {
    type filter hook input priority filter; policy accept;
    iifname %q tcp dport %d tcp flags & (syn | ack) == syn numgen inc mod 3 == 0 counter drop
  }`, tb.Server.Iface, ng.Port)
		if drop, err = tb.AddNFTable(ctx, tb.Server, "syndrop", body); err != nil {
			t.Fatal(err)
		}
	}
	r := &chromiumHTTPSRun{client: client, scenario: scenario, keyLog: filepath.Join(tb.Dir, client+"-keylog.txt"), port: ng.Port}
	capt, err := tb.StartCapture(ctx, tb.Server, "https-chromium")
	if err != nil {
		t.Fatal(err)
	}
	ccapt, err := tb.StartCapture(ctx, tb.Client, "https-chromium-client")
	if err != nil {
		t.Fatal(err)
	}
	r.capture, r.clientCapture = capt.Path, ccapt.Path
	load, finish := startHTTPSClient(t, tb, client, h2, scenario, ng, site, r.keyLog)
	tabs := 1
	if scenario == "mixed-rtt" && client == "chromium" {
		tabs = 2
	}
	_, errs := inParallel(tabs, func(tab int) (struct{}, error) {
		for i := tab; i < loads; i += tabs {
			l := Load{Page: (i * 5) % len(site.Pages), Tab: tab}
			if i%2 == 1 {
				l.ServerMS = 20 + 30*(i%4)
			}
			l.Redirect = i%3 == 2
			if err := load(l); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := sleepCtx(ctx, afterLoadDwell); err != nil {
		t.Fatal(err)
	}
	pages, err := finish()
	if err != nil {
		t.Error(err)
	}
	r.pages = pages
	r.bridge = tb.Link.Bridge.Stats()
	if drop != nil {
		n, err := drop.Counters(ctx)
		if err != nil || len(n) == 0 {
			t.Fatalf("nft counters: %v %v", n, err)
		}
		r.nftDrops = n[0]
	}
	stopCapture(t, capt)
	stopCapture(t, ccapt)
	if *keepDir != "" {
		for _, f := range []string{r.capture, r.clientCapture, r.keyLog} {
			b, err := os.ReadFile(f)
			if err == nil {
				err = os.WriteFile(filepath.Join(*keepDir, fmt.Sprintf("h2-%v-%s-%s-%s", h2, scenario, client, filepath.Base(f))), b, 0o600)
			}
			if err != nil {
				t.Error(err)
			}
		}
	}
	return r
}

// startHTTPSClient starts runChromiumHTTPS's client, writing its TLS
// secrets to keyLog. load loads one page (in its tab: each tab's loads
// from one goroutine); finish ends the client and returns its pages.
func startHTTPSClient(t *testing.T, tb *Testbed, client string, h2 bool, scenario string, ng *Nginx, site *Site, keyLog string) (load func(Load) error, finish func() ([]PageTruth, error)) {
	t.Helper()
	ctx := testContext(t)
	base := "https://" + ng.TLS.Name
	if client == "go" {
		kl, err := os.OpenFile(keyLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		g := tb.NewGoClient(Client150, base)
		if scenario == "mixed-rtt" {
			g = tb.NewGoClient(Client110, base)
			g.AcceptBrotli = true
		}
		g.KeepConnections, g.AfterLoad = true, true
		g.TLS = &GoClientTLS{Addr: netip.AddrPortFrom(tb.Server.Addr, uint16(ng.Port)), KeyLog: kl, HTTP2: h2}
		var pages []PageTruth
		load = func(l Load) error {
			pt, err := g.Load(ctx, loadURL(site, "", l))
			pages = append(pages, pt)
			return err
		}
		return load, func() ([]PageTruth, error) {
			g.Close()
			return pages, kl.Close()
		}
	}
	proto := "http/1.1"
	if h2 {
		proto = "h2"
	}
	local := Client80
	if scenario == "mixed-rtt" {
		local = Client150
	}
	chrome, err := tb.StartChromiumWith(ctx, local, ChromiumOptions{KeyLog: keyLog, InsecureTLS: true, Protocol: proto,
		Resolve: map[string]netip.Addr{ng.TLS.Name: tb.Server.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	if scenario == "mixed-rtt" {
		if _, err := chrome.NewTab(); err != nil {
			t.Fatal(err)
		}
	}
	load = func(l Load) error {
		_, err := chrome.Tabs[l.Tab].Load(ctx, loadURL(site, base, l))
		return err
	}
	return load, func() ([]PageTruth, error) {
		var pages []PageTruth
		for _, tab := range chrome.Tabs {
			pages = append(pages, tab.Pages()...)
		}
		return pages, chrome.Close()
	}
}

func TestHTTPSPageviews(t *testing.T) {
	needChromium(t)
	needPackage(t, "/usr/bin/tshark", "tshark")
	var all, keyless, turns acceptance
	all.init()
	for _, scenario := range httpsScenarios {
		for _, c := range []struct {
			client string
			h2     bool
		}{{"chromium", false}, {"chromium", true}, {"go", false}, {"go", true}} {
			client, h2 := c.client, c.h2
			proto := map[bool]string{false: "HTTPS1.1", true: "HTTPS2"}[h2]
			t.Run(scenario+"/"+client+"/"+proto, func(t *testing.T) {
				loads := chromiumHTTPSLoads
				if scenario == "loss" {
					// Twice the loads, as in cleartext: a lossy path
					// has rare events no capture tells apart, and the
					// share within tolerance must not hang on one.
					loads *= 2
				}
				r := runChromiumHTTPS(t, client, h2, scenario, loads)
				a, wire := compareChromiumHTTPS(t, r, h2)
				a.report(t, scenario+" "+client+" "+proto, true)
				all.merge(a)
				k := judgeChromiumKeyless(t, r, wire, h2)
				// Keyless HTTP/2 turns are estimates, held to their own
				// bound there (keylessTurnsWithin).
				k.report(t, scenario+" "+client+" "+proto+" keyless", !h2)
				if h2 {
					turns.merge(k)
				} else {
					keyless.merge(k)
				}
			})
		}
	}
	all.report(t, "HTTPS, both protocols", false)
	keyless.report(t, "HTTPS/1.1 keyless, every scenario", false)
	turns.report(t, "HTTP/2 keyless turns, every scenario", false)
}

// chromiumHTTPSLoads: page loads per protocol; a redirect every third,
// a back-end container every second, as in the cleartext scenarios.
const chromiumHTTPSLoads = 12

// compareChromiumHTTPS judges rtmon's decrypted records of r against the
// client's decrypted wire: every transaction's total, every page's total
// and its objects' pageview. It returns the wire's connections too.
func compareChromiumHTTPS(t *testing.T, r *chromiumHTTPSRun, h2 bool) (*acceptance, map[uint16]*TLSWireConn) {
	t.Helper()
	conns, err := ReadTLSWire(testContext(t), r.clientCapture, r.keyLog, r.port)
	if err != nil {
		t.Fatal(err)
	}
	checkHTTPSScenario(t, r, conns)
	out := analyzeDir(t, r.capture, "--keylog", r.keyLog)
	txns := readJSONL[rtmonTxnRec](t, filepath.Join(out, "transactions.jsonl"))
	pvs := readJSONL[rtmonPV](t, filepath.Join(out, "pageviews.jsonl"))
	checkRecords(t, txns, pvs)
	// rtmon's transactions by client port, method and URL, in order.
	type txKey struct {
		port        int
		method, url string
	}
	byKey := map[txKey][]*rtmonTxnRec{}
	for i := range txns {
		x := &txns[i]
		if x.has("tls_keyless") {
			t.Errorf("transaction %s %s:%d %s: keyless although the key log holds every session", x.ID, x.Client, x.ClientPort, x.URL)
		}
		if h2 != x.has("http2") {
			t.Errorf("transaction %s %s: flags %v, want http2 %v", x.ID, x.URL, x.Flags, h2)
		}
		k := txKey{x.ClientPort, x.Method, x.URL}
		byKey[k] = append(byKey[k], x)
	}
	a := &acceptance{runs: 1}
	a.init()
	rtmonOf := map[*TLSWireTxn]*rtmonTxnRec{}
	var wire []*TLSWireTxn
	for _, port := range slices.Sorted(maps.Keys(conns)) {
		for _, w := range conns[port].Txns {
			wire = append(wire, w)
			k := txKey{int(w.Port), w.Method, w.URL}
			if len(byKey[k]) == 0 {
				if !w.Complete && !r.serverSaw(t, w) {
					t.Logf("wire %s %s on port %d (stream %d): unanswered, and its request never reached the server's capture",
						w.Method, w.URL, w.Port, w.Stream)
					continue
				}
				t.Errorf("wire %s %s on port %d (stream %d): rtmon has no such transaction", w.Method, w.URL, w.Port, w.Stream)
				continue
			}
			x := byKey[k][0]
			byKey[k] = byKey[k][1:]
			rtmonOf[w] = x
			if !w.Complete {
				continue
			}
			a.txnAll++
			a.txnN++
			d := time.Duration(x.Total) - w.Total()
			tol := max(txnFloor, time.Duration(txnRel*float64(w.Total())))
			stall := r.bridge.StallWithin(w.Start, w.End)
			switch {
			case d.Abs() <= tol:
				a.txnOK++
			case d.Abs() <= tol+stall:
				// The link held frames that long (a busy machine's
				// user-space bridge): between the two capture points,
				// which no monitor can see.
				a.txnOK++
				t.Logf("STALL %s:%d %s: rtmon %v, wire %v: off by %v within the link's %v of stalls", x.Client, x.ClientPort, w.URL,
					time.Duration(x.Total), w.Total(), d, stall)
			default:
				t.Logf("MISS %s:%d stream %d %s: rtmon %v (tconn %v ttls %v, flags %v), wire %v (fresh %v, held behind a resend %v): %+v (link stalls %v)",
					x.Client, x.ClientPort, w.Stream, w.URL, time.Duration(x.Total), time.Duration(x.Tconn), time.Duration(x.Ttls), x.Flags,
					w.Total(), w.Fresh, w.ReqHeld, d, stall)
			}
		}
	}
	for k, rest := range byKey {
		for _, x := range rest {
			t.Errorf("rtmon transaction %s %s:%d %s %s is not on the client's wire", x.ID, x.Client, k.port, k.method, k.url)
		}
	}
	judgeHTTPSPages(t, r, wire, rtmonOf, pvs, a)
	return a, conns
}

// checkHTTPSScenario checks that the run had what its scenario is for:
// SYNs dropped and resent, frames lost.
func checkHTTPSScenario(t *testing.T, r *chromiumHTTPSRun, conns map[uint16]*TLSWireConn) {
	t.Helper()
	resent := 0
	for _, c := range conns {
		if c.SYNs > 1 {
			resent++
		}
	}
	lost := r.bridge.Lost[0] + r.bridge.Lost[1]
	t.Logf("%s: %d connections, %d with a SYN resent; %d SYNs dropped by nft, %d SYN/ACKs and %d frames lost on the link",
		r.scenario, len(conns), resent, r.nftDrops, r.bridge.HookDrops[ToClient], lost)
	switch r.scenario {
	case "loss":
		if lost == 0 {
			t.Error("the lossy link lost no frame")
		}
	case "syn-drops":
		if resent == 0 || r.nftDrops == 0 {
			t.Errorf("no SYN resent (%d) or none dropped (%d): the run tests no handshake loss", resent, r.nftDrops)
		}
	case "synack-loss":
		// Either end may resend first: the client its SYN on its timer,
		// or the server its SYN/ACK on its own (both 1 s; on a busy
		// machine the server's fired first and the client never resent).
		// The loss on the link is what the scenario needs.
		if r.bridge.HookDrops[ToClient] == 0 {
			t.Errorf("no SYN/ACK lost on the link: the run tests no handshake loss")
		}
	}
}

// judgeHTTPSPages finds each page's transactions on the wire (the
// earliest unclaimed one with its method and URL after the navigation was
// issued) and judges the pageview holding its container.
func judgeHTTPSPages(t *testing.T, r *chromiumHTTPSRun, wire []*TLSWireTxn, rtmonOf map[*TLSWireTxn]*rtmonTxnRec, pvs []rtmonPV, a *acceptance) {
	t.Helper()
	slices.SortFunc(wire, func(x, y *TLSWireTxn) int { return int(x.ReqFirst - y.ReqFirst) })
	claimed := map[*TLSWireTxn]bool{}
	// find claims the object's wire transaction: of the unclaimed ones
	// with its method and URL since the navigation, the one sent nearest
	// to when the client says it sent it (two tabs may fetch one URL at
	// once, over HTTP/2 on one connection), else the earliest.
	find := func(p *PageTruth, o ObjectTruth) *TLSWireTxn {
		var best *TLSWireTxn
		off := func(w *TLSWireTxn) int64 { return max(w.ReqFirst-o.RequestStart, o.RequestStart-w.ReqFirst) }
		for _, w := range wire {
			if claimed[w] || w.URL != o.URL || w.Method != cmp.Or(o.Method, "GET") || w.ReqFirst < p.NavIssued {
				continue
			}
			if best == nil || o.RequestStart != 0 && off(w) < off(best) {
				best = w
			}
			if o.RequestStart == 0 {
				break
			}
		}
		if best == nil {
			t.Errorf("page %s: %s %s is not on the client's wire", p.URL, o.Method, o.URL)
			return nil
		}
		claimed[best] = true
		return best
	}
	pvByID := map[string]*rtmonPV{}
	for i := range pvs {
		pvByID[pvs[i].ID] = &pvs[i]
	}
	for i := range r.pages {
		p := &r.pages[i]
		chain := append(slices.Clone(p.Redirects), p.Container)
		var start, end int64
		var members []*TLSWireTxn
		valid := true
		for k, o := range slices.Concat(chain, p.Objects) {
			w := find(p, o)
			if w == nil || !w.Complete {
				valid = false
				continue
			}
			members = append(members, w)
			if k == 0 {
				start = w.Start
			}
			end = max(end, w.End)
		}
		for _, o := range p.AfterLoad {
			if w := find(p, o); w != nil {
				members = append(members, w)
			}
		}
		a.pvAll++
		if !valid {
			continue
		}
		container := rtmonOf[members[len(chain)-1]]
		if container == nil {
			continue
		}
		pv := pvByID[container.PageviewID]
		if pv == nil {
			t.Errorf("page %s: its container %s is in no pageview", p.URL, container.ID)
			continue
		}
		a.pvN++
		truth := time.Duration(end - start)
		d := time.Duration(pv.Total) - truth
		if stall := r.bridge.StallWithin(start, end); stall > 0 && d.Abs() > pvMedianFloor {
			// As for transactions: what the link held between the
			// capture points is no error of rtmon's.
			t.Logf("page %s: off by %v, of which up to %v the link's stalls", p.URL, d, stall)
			d = time.Duration(math.Copysign(float64(max(d.Abs()-stall, 0)), float64(d)))
		}
		a.pvErr[r.client] = append(a.pvErr[r.client], d)
		a.pvRel[r.client] = append(a.pvRel[r.client], math.Abs(float64(d))/float64(truth))
		a.pvTruth[r.client] = append(a.pvTruth[r.client], truth)
		t.Logf("page %s: rtmon %v (%d objects, evidence %s), wire %v (%d in load, %d after): %+v",
			p.URL, time.Duration(pv.Total), pv.Objects, pv.Evidence, truth, len(p.Objects), len(p.AfterLoad), d)
		for _, w := range members {
			a.memberN++
			if x := rtmonOf[w]; x != nil && x.PageviewID == pv.ID {
				a.memberOK++
			} else {
				t.Logf("page %s: %s %s not in its pageview %s", p.URL, w.Method, w.URL, pv.ID)
			}
		}
	}
}

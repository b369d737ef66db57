package testbed

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Keyless HTTPS against curl (issue 14): rtmon times HTTP/1.1 over TLS
// from record boundaries, without keys. Each TLS version gets its own
// testbed and capture holding fresh connections, one keep-alive connection
// and one HTTP/2 connection (nginx offers h2 to all; curl --http1.1 offers
// only http/1.1).

// httpsPaths are fetched one per connection and all on one connection.
var httpsPaths = []string{"/index.html", "/1k.bin", "/64k.bin", "/256k.bin", "/1m.bin"}

// httpsRTT is the emulated link's round trip in the subtests that have one.
const httpsRTT = 20 * time.Millisecond

// httpsWithin is the share of compared times that must agree with curl.
const httpsWithin = 0.97

// httpsConn and httpsTxn add the TLS fields to rtmon's records.
type httpsConn struct {
	rtmonConn
	TLSVersion uint16   `json:"tls_version"`
	SNI        string   `json:"sni"`
	ALPN       string   `json:"alpn"`
	Ttls       int64    `json:"ttls_ns"`
	Flags      []string `json:"flags"`
}

type httpsTxn struct {
	rtmonTxn
	Ttls  int64    `json:"ttls_ns"`
	Host  string   `json:"host"`
	Flags []string `json:"flags"`
}

// httpsRun is one TLS version's traffic.
type httpsRun struct {
	tb      *Testbed
	nginx   *Nginx
	capture *Capture
	keyLog  string
	h1      []invocation // HTTP/1.1: one per fresh path, then the keep-alive one
	h2      invocation   // HTTP/2: all paths on one connection
}

// tally counts compared times by checkNear's verdict, pooled over the
// subtests for the share rule.
type tally struct {
	// within counts times checkNear passes, late those of them curl
	// noticed later than tolerance allows (kept apart in the log: a
	// descheduled curl, or a response whose first TLS record completed
	// after its first byte, which curl cannot read before).
	n, within, late int
	// stalled: times off by no more than the link's stalls (see near).
	stalled    int
	mismatches []string
	// worst: the largest |rtmon - curl| by kind of time, for the log.
	worst map[string]time.Duration
}

// near is checkNear's judgement without failing the test: a time within
// tolerance, or short only by what a descheduled curl explains, is within;
// anything else is a mismatch, logged.
func (ta *tally) near(t *testing.T, name, kind string, got, curl, stall time.Duration) {
	t.Helper()
	what := name + " " + kind
	ta.n++
	d := curl - got
	if d.Abs() > tolerance(curl) && d.Abs() <= tolerance(curl)+stall {
		// The link held frames that long while curl ran (a busy machine's
		// user-space bridge): the capture saw the delay, curl may not have.
		ta.within++
		ta.stalled++
		t.Logf("STALL %s: %v, curl %v: off by %v within the link's %v of stalls", what, got, curl, d, stall)
		return
	}
	if ta.worst == nil {
		ta.worst = map[string]time.Duration{}
	}
	ta.worst[kind] = max(ta.worst[kind], d.Abs())
	switch {
	case d < -tolerance(curl):
		m := fmt.Sprintf("%s: %v, curl %v: later than curl saw it by %v (tolerance %v)", what, got, curl, -d, tolerance(curl))
		ta.mismatches = append(ta.mismatches, m)
		t.Logf("MISMATCH %s", m)
	case d > tolerance(curl)+curlStall:
		m := fmt.Sprintf("%s: %v, curl %v: short by %v (tolerance %v + stall %v)", what, got, curl, d, tolerance(curl), curlStall)
		ta.mismatches = append(ta.mismatches, m)
		t.Logf("MISMATCH %s", m)
	case d > tolerance(curl):
		ta.within++
		ta.late++
		t.Logf("LATE %s: %v, curl %v: curl noticed %v after the wire", what, got, curl, d)
	default:
		ta.within++
	}
}

func TestCurlHTTPSMatchesRtmon(t *testing.T) {
	// all: keyless timing; dec: the same captures decrypted with curl's
	// key log, HTTP/2 streams included.
	var all, dec tally
	// Without a link the round trip is microseconds and Ttls is the
	// peers' computing; across the emulated link TLS 1.3 takes one round
	// trip, a full TLS 1.2 handshake two, which rtmon must tell apart.
	versions := []struct {
		name    string
		tls12   bool
		version uint16
		rtt     time.Duration
	}{
		{"TLS1.3", false, 0x0304, 0},
		{"TLS1.2", true, 0x0303, 0},
		{"TLS1.3-rtt20ms", false, 0x0304, httpsRTT},
		{"TLS1.2-rtt20ms", true, 0x0303, httpsRTT},
	}
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			r := runHTTPS(t, &NginxTLS{TLS12: v.tls12, HTTP2: true}, v.rtt)
			keyless := compareHTTPS(t, r, v.version, &all)
			compareDecrypted(t, r, keyless, &dec)
		})
	}
	share := func(k int) float64 { return 100 * float64(k) / float64(max(all.n, 1)) }
	t.Logf("%d of %d compared times within tolerance (%.1f%%); without curl's allowance for noticing late (LATE above) %d (%.1f%%), of the link's stalls (STALL) %d; %d mismatches",
		all.within, all.n, share(all.within), all.within-all.late, share(all.within-all.late), all.stalled, len(all.mismatches))
	for _, k := range slices.Sorted(maps.Keys(all.worst)) {
		t.Logf("worst |rtmon - curl| %s: %v", k, all.worst[k])
	}
	for _, m := range all.mismatches {
		t.Logf("mismatch: %s", m)
	}
	if all.n == 0 || float64(all.within) < httpsWithin*float64(all.n) {
		t.Errorf("%d of %d compared times within max(2 ms, 5%%) of curl's, want >= %.0f%%", all.within, all.n, 100*httpsWithin)
	}
	t.Logf("decrypted: %d of %d compared times within tolerance; without curl's allowance %d; %d mismatches",
		dec.within, dec.n, dec.within-dec.late, len(dec.mismatches))
	for _, m := range dec.mismatches {
		t.Logf("decrypted mismatch: %s", m)
	}
	if dec.n == 0 || float64(dec.within) < httpsWithin*float64(dec.n) {
		t.Errorf("decrypted: %d of %d compared times within max(2 ms, 5%%) of curl's, want >= %.0f%%", dec.within, dec.n, 100*httpsWithin)
	}
}

// runHTTPS serves HTTPS and runs curl's HTTP/1.1 and HTTP/2 traffic under
// a server-side capture; curl writes its TLS secrets to r.keyLog. A
// non-zero rtt puts an emulated link of that round trip between them.
func runHTTPS(t *testing.T, tlsOpts *NginxTLS, rtt time.Duration) *httpsRun {
	t.Helper()
	ctx := testContext(t)
	var opts Options
	if rtt > 0 {
		opts.Link = &LinkOptions{DefaultRTT: rtt, Seed: 1}
	}
	tb := New(t, opts)
	t.Logf("testbed %s in %s", tb.Name, tb.Dir)
	ng, err := tb.StartNginx(ctx, NginxOptions{TLS: tlsOpts})
	if err != nil {
		t.Fatal(err)
	}
	r := &httpsRun{tb: tb, nginx: ng, keyLog: filepath.Join(tb.Dir, "keylog.txt")}
	if r.capture, err = tb.StartCapture(ctx, tb.Server, "server"); err != nil {
		t.Fatal(err)
	}
	fetch := func(paths []string, args ...string) invocation {
		urls := make([]string, len(paths))
		for i, p := range paths {
			urls[i] = ng.NameURL(p)
		}
		from := time.Now().UnixNano()
		res, err := tb.Curl(ctx, CurlOptions{URLs: urls, MaxTime: 10 * time.Second, CAFile: ng.CAFile,
			Env: []string{"SSLKEYLOGFILE=" + r.keyLog}, Args: append([]string{"--resolve", ng.Resolve()}, args...)})
		if err != nil {
			t.Fatalf("curl %v: %v", paths, err)
		}
		var stall time.Duration
		if tb.Link != nil {
			stall = tb.Link.Bridge.Stats().StallWithin(from, time.Now().UnixNano())
		}
		for _, c := range res {
			t.Logf("curl port %d %-12s v%s connects=%d connect=%v appconnect=%v pretransfer=%v starttransfer=%v total=%v",
				c.LocalPort, pathOf(c.URL), c.HTTPVersion, c.NumConnects, c.Connect(), c.Appconnect(), c.Pretransfer(), c.Starttransfer(), c.Total())
		}
		return invocation{results: res, stall: stall}
	}
	for _, p := range httpsPaths {
		r.h1 = append(r.h1, fetch([]string{p}))
	}
	r.h1 = append(r.h1, fetch(httpsPaths))
	r.h2 = fetch(httpsPaths, "--http2") // the last of curl's version flags wins
	stopCapture(t, r.capture)
	checkHTTPSHarness(t, r)
	return r
}

// checkHTTPSHarness checks curl and the capture against each other: what
// rtmon is judged on must be what happened.
func checkHTTPSHarness(t *testing.T, r *httpsRun) {
	t.Helper()
	w, err := readWirePort(r.capture.Path, uint16(r.nginx.Port))
	if err != nil {
		t.Fatal(err)
	}
	if r.capture.Dropped != 0 {
		t.Errorf("tcpdump dropped %d packets", r.capture.Dropped)
	}
	if len(w.foreignIPs) > 0 {
		t.Errorf("capture has addresses outside the documentation ranges: %v", w.foreignIPs)
	}
	invs := append(slices.Clone(r.h1), r.h2)
	for k, inv := range invs {
		wantVersion := "1.1"
		if k == len(invs)-1 {
			wantVersion = "2"
		}
		port := inv.results[0].LocalPort
		for i, c := range inv.results {
			p := pathOf(c.URL)
			if c.HTTPCode != 200 || c.SizeDownload != int64(r.nginx.Files[p]) || c.HTTPVersion != wantVersion {
				t.Errorf("curl %s: HTTP/%s code %d, %d bytes; want HTTP/%s 200, %d bytes",
					c.URL, c.HTTPVersion, c.HTTPCode, c.SizeDownload, wantVersion, r.nginx.Files[p])
			}
			if want := b2i(i == 0); c.NumConnects != want || c.LocalPort != port || c.TimeAppconnect == 0 != (want == 0) {
				t.Errorf("curl %s (#%d): num_connects %d port %d appconnect %v, want %d on port %d (keep-alive)",
					c.URL, i, c.NumConnects, c.LocalPort, c.Appconnect(), want, port)
			}
		}
		if wc := w.conns[uint16(port)]; wc == nil || len(wc.syns) != 1 || len(wc.synacks) != 1 {
			t.Errorf("port %d: capture lacks the connection or has SYN losses: %+v", port, wc)
		}
	}
	if len(w.conns) != len(invs) {
		t.Errorf("capture has %d connections (ports %v), curl opened %d", len(w.conns), w.ports(), len(invs))
	}
	// The secrets curl logged are what a decrypting run would need.
	kl, err := os.ReadFile(r.keyLog)
	if err != nil || !strings.Contains(string(kl), "CLIENT_") {
		t.Errorf("curl's key log %s: %v, %d bytes without secrets", r.keyLog, err, len(kl))
	}
}

// compareHTTPS checks rtmon's keyless records against curl: connections
// (TLS version, SNI, flags, Tconn, Ttls), one transaction per HTTP/1.1
// URL with its times, and the HTTP/2 connection flagged, with one turn
// estimate per URL (curl fetches them one after another).
// Times go to ta; everything else must hold exactly.
func compareHTTPS(t *testing.T, r *httpsRun, version uint16, ta *tally) []httpsTxn {
	t.Helper()
	out := analyzeDir(t, r.capture.Path)
	conns := readJSONL[httpsConn](t, filepath.Join(out, "connections.jsonl"))
	txns := readJSONL[httpsTxn](t, filepath.Join(out, "transactions.jsonl"))
	client, server := r.tb.Client.Addr.String(), r.tb.Server.Addr.String()
	connBy := map[int]httpsConn{}
	for _, c := range conns {
		if c.Client != client || c.Server != server || c.ServerPort != r.nginx.Port {
			t.Errorf("rtmon connection with unexpected endpoints: %+v", c)
			continue
		}
		connBy[c.ClientPort] = c
	}
	txnBy := map[int][]httpsTxn{}
	for _, x := range txns {
		if x.Client != client || x.Server != server || x.ServerPort != r.nginx.Port {
			t.Errorf("rtmon transaction with unexpected endpoints: %+v", x)
			continue
		}
		txnBy[x.ClientPort] = append(txnBy[x.ClientPort], x)
	}
	ntx := 0
	for _, inv := range r.h1 {
		port := inv.results[0].LocalPort
		c, ok := connBy[port]
		if !ok {
			t.Errorf("rtmon has no connection for client port %d", port)
			continue
		}
		compareTLSConn(t, r, c, inv.results[0], inv.stall, version, false, ta)
		xs := txnBy[port]
		slices.SortFunc(xs, func(a, b httpsTxn) int { return a.Index - b.Index })
		if len(xs) != len(inv.results) {
			t.Errorf("port %d: rtmon has %d transactions, curl fetched %d URLs", port, len(xs), len(inv.results))
			continue
		}
		for i, x := range xs {
			compareTLSTxn(t, r, i, x, inv.results[i], inv.stall, ta)
		}
		ntx += len(xs)
	}
	h2port := r.h2.results[0].LocalPort
	if c, ok := connBy[h2port]; !ok {
		t.Errorf("rtmon has no connection for the HTTP/2 client port %d", h2port)
	} else {
		compareTLSConn(t, r, c, r.h2.results[0], r.h2.stall, version, true, ta)
	}
	// curl fetches its URLs one after another on the HTTP/2 connection,
	// so each is a busy period of its own: one turn estimate per URL,
	// timed as an HTTP/1.1 transfer is.
	xs := txnBy[h2port]
	slices.SortFunc(xs, func(a, b httpsTxn) int { return a.Index - b.Index })
	if len(xs) != len(r.h2.results) {
		t.Errorf("HTTP/2 port %d: rtmon has %d turns, curl fetched %d URLs one after another", h2port, len(xs), len(r.h2.results))
	} else {
		for i, x := range xs {
			if !slices.Contains(x.Flags, "http2") || !slices.Contains(x.Flags, "turn_estimate") {
				t.Errorf("HTTP/2 port %d #%d: flags %v, want http2 and turn_estimate", h2port, i, x.Flags)
			}
			compareTLSTxn(t, r, i, x, r.h2.results[i], r.h2.stall, ta)
		}
	}
	if len(txns) != ntx+len(xs) {
		t.Errorf("rtmon reports %d transactions, curl made %d HTTP/1.1 transfers and %d HTTP/2 ones", len(txns), ntx, len(xs))
	}
	if want := len(r.h1) + 1; len(conns) != want {
		t.Errorf("rtmon reports %d connections, curl opened %d", len(conns), want)
	}
	return txns
}

// compareTLSConn checks one connection record against the first transfer
// curl made on it.
func compareTLSConn(t *testing.T, r *httpsRun, c httpsConn, first CurlResult, stall time.Duration, version uint16, h2 bool, ta *tally) {
	t.Helper()
	name := fmt.Sprintf("conn port %d", c.ClientPort)
	t.Logf("%s: tls %#x sni %q alpn %q flags %v tconn=%v ttls=%v (curl connect %v appconnect %v)", name, c.TLSVersion,
		c.SNI, c.ALPN, c.Flags, time.Duration(c.Tconn), time.Duration(c.Ttls), first.Connect(), first.Appconnect())
	if c.TLSVersion != version || c.SNI != r.nginx.TLS.Name || !slices.Contains(c.Flags, "tls") {
		t.Errorf("%s: tls_version %#x sni %q flags %v, want %#x, %q, tls", name, c.TLSVersion, c.SNI, c.Flags, version, r.nginx.TLS.Name)
	}
	if flagged := slices.Contains(c.Flags, "http2"); flagged != h2 {
		t.Errorf("%s: http2 flag %v (alpn %q), want %v", name, flagged, c.ALPN, h2)
	}
	if c.SYNLosses != 0 || c.SYNACKLosses != 0 {
		t.Errorf("%s: syn_losses %d synack_losses %d, want 0 (no drops)", name, c.SYNLosses, c.SYNACKLosses)
	}
	ta.near(t, name, "tconn vs time_connect", time.Duration(c.Tconn), first.Connect(), stall)
	ta.near(t, name, "tconn+ttls vs time_appconnect", time.Duration(c.Tconn+c.Ttls), first.Appconnect(), stall)
	ta.near(t, name, "ttls vs time_appconnect-time_connect", time.Duration(c.Ttls), first.Appconnect()-first.Connect(), stall)
}

// compareTLSTxn checks transaction i of a connection against curl's
// transfer of the i-th URL: curl's timers restart per URL (see
// compareRecords), so the same cumulative sums compare on fresh and
// reused connections, Ttls now among them.
func compareTLSTxn(t *testing.T, r *httpsRun, i int, x httpsTxn, c CurlResult, stall time.Duration, ta *tally) {
	t.Helper()
	name := fmt.Sprintf("port %d #%d %s", x.ClientPort, i, pathOf(c.URL))
	t.Logf("%s: tconn=%v ttls=%v trequest=%v tserver=%v ttransfer=%v total=%v host %q url %q flags %v", name,
		time.Duration(x.Tconn), time.Duration(x.Ttls), time.Duration(x.Trequest), time.Duration(x.Tserver),
		time.Duration(x.Ttransfer), time.Duration(x.Total), x.Host, x.URL, x.Flags)
	if x.Index != i {
		t.Errorf("%s: index %d", name, x.Index)
	}
	if x.Host != r.nginx.TLS.Name || !slices.Contains(x.Flags, "tls") {
		t.Errorf("%s: host %q flags %v, want host %q (SNI) and tls", name, x.Host, x.Flags, r.nginx.TLS.Name)
	}
	if sum := x.Tconn + x.Ttls + x.Trequest + x.Tserver + x.Ttransfer; sum != x.Total {
		t.Errorf("%s: components add up to %v, total_ns is %v", name, time.Duration(sum), time.Duration(x.Total))
	}
	if i == 0 {
		ta.near(t, name, "tconn vs time_connect", time.Duration(x.Tconn), c.Connect(), stall)
		ta.near(t, name, "ttls vs time_appconnect-time_connect", time.Duration(x.Ttls), c.Appconnect()-c.Connect(), stall)
	} else if x.Tconn != 0 || x.Ttls != 0 {
		t.Errorf("%s: tconn %v ttls %v on a reused connection, want 0", name, time.Duration(x.Tconn), time.Duration(x.Ttls))
	}
	ta.near(t, name, "tconn+ttls+trequest+tserver vs time_starttransfer",
		time.Duration(x.Tconn+x.Ttls+x.Trequest+x.Tserver), c.Starttransfer(), stall)
	ta.near(t, name, "total vs time_total", time.Duration(x.Total), c.Total(), stall)
}

// compareDecrypted runs rtmon with curl's key log: the same connections
// then give transactions that carry what keyless timing cannot know (URL,
// status, host header), the HTTP/2 one a transaction per stream.
func compareDecrypted(t *testing.T, r *httpsRun, keyless []httpsTxn, ta *tally) {
	t.Helper()
	out := analyzeDir(t, r.capture.Path, "--keylog", r.keyLog)
	txns := readJSONL[httpsTxn](t, filepath.Join(out, "transactions.jsonl"))
	byPort := map[int][]httpsTxn{}
	for _, x := range txns {
		byPort[x.ClientPort] = append(byPort[x.ClientPort], x)
	}
	for k, inv := range append(slices.Clone(r.h1), r.h2) {
		h2 := k == len(r.h1)
		port := inv.results[0].LocalPort
		xs := byPort[port]
		// HTTP/2 streams are indexed in completion order: compare as sets.
		var got, want []string
		for _, x := range xs {
			got = append(got, fmt.Sprintf("%s %d http2=%v", pathOf(x.URL), x.Status, slices.Contains(x.Flags, "http2")))
			if x.Host != r.nginx.TLS.Name {
				t.Errorf("decrypted port %d #%d: host %q, want %q", port, x.Index, x.Host, r.nginx.TLS.Name)
			}
		}
		for _, c := range inv.results {
			want = append(want, fmt.Sprintf("%s %d http2=%v", pathOf(c.URL), c.HTTPCode, h2))
		}
		if h2 {
			slices.Sort(got)
			slices.Sort(want)
		} else {
			slices.SortFunc(xs, func(a, b httpsTxn) int { return a.Index - b.Index })
			got = got[:0]
			for _, x := range xs {
				got = append(got, fmt.Sprintf("%s %d http2=%v", pathOf(x.URL), x.Status, slices.Contains(x.Flags, "http2")))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("decrypted port %d: rtmon has %q, curl fetched %q", port, got, want)
		}
		// Timed against curl as keyless transactions are: curl fetches
		// an invocation's URLs one after another, on one connection for
		// HTTP/2 too, so stream i is URL i.
		if slices.Equal(got, want) {
			if h2 {
				slices.SortFunc(xs, func(a, b httpsTxn) int { return a.Index - b.Index })
			}
			for i, x := range xs {
				compareTLSTxn(t, r, i, x, inv.results[i], inv.stall, ta)
			}
		}
		for _, x := range xs {
			t.Logf("decrypted port %d #%d %s: tconn=%v ttls=%v trequest=%v tserver=%v ttransfer=%v total=%v%s", port, x.Index, pathOf(x.URL),
				time.Duration(x.Tconn), time.Duration(x.Ttls), time.Duration(x.Trequest), time.Duration(x.Tserver),
				time.Duration(x.Ttransfer), time.Duration(x.Total), sameAsKeyless(keyless, x))
		}
	}
}

// sameAsKeyless says, for the log, whether keyless timing gave decrypted
// transaction x the same times.
func sameAsKeyless(keyless []httpsTxn, x httpsTxn) string {
	for _, k := range keyless {
		if k.ClientPort != x.ClientPort || k.Index != x.Index {
			continue
		}
		if k.Tconn == x.Tconn && k.Ttls == x.Ttls && k.Trequest == x.Trequest && k.Tserver == x.Tserver && k.Ttransfer == x.Ttransfer {
			return " (= keyless)"
		}
		return fmt.Sprintf(" (KEYLESS DIFFERS: tconn=%v ttls=%v trequest=%v tserver=%v ttransfer=%v)", time.Duration(k.Tconn),
			time.Duration(k.Ttls), time.Duration(k.Trequest), time.Duration(k.Tserver), time.Duration(k.Ttransfer))
	}
	return " (no keyless transaction)"
}

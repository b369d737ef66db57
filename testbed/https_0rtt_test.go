package testbed

// TLS 1.3 early data (0-RTT) across the emulated link: openssl s_client
// resumes a session from nginx (ssl_early_data on) and sends its GET with
// the ClientHello, so the request leaves a round trip before the
// handshake is done. rtmon, reading the server-side capture with the key
// log and without, must time each such transaction as the client saw it
// (first SYN to last response byte, from the client's decrypted wire),
// with no TLS handshake time (flag early_data), while the connection
// record keeps its handshake.

import (
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// earlyRTT is the emulated link's round trip.
const earlyRTT = 40 * time.Millisecond

// earlyPaths are fetched one per resumed connection, in order.
var earlyPaths = []string{"/index.html", "/64k.bin", "/1k.bin", "/256k.bin", "/index.html", "/64k.bin", "/1k.bin", "/1m.bin"}

// earlyRun is what the traffic left.
type earlyRun struct {
	tb                     *Testbed
	nginx                  *Nginx
	capture, clientCapture string
	keyLog                 string
	runs                   []sclientRun // in order
	bridge                 BridgeStats
	// link: the two captures' transit times. rtmon times a client's
	// packet from the server side by half the round trip; a packet the
	// machine held longer on its way (beside the CPU hog: a client's
	// Finished 8.9 ms late, the bridge itself on time) is an error of the
	// testbed's, not rtmon's.
	link *LinkDelays
}

// sclientRun is one s_client connection: a full handshake (its GET after
// the handshake) or a resumed one with its GET as early data.
type sclientRun struct {
	path  string
	early bool
	res   *SClientResult
}

func TestHTTPSEarlyData(t *testing.T) {
	needPackage(t, "/usr/bin/openssl", "openssl")
	needPackage(t, "/usr/sbin/nginx", "nginx-light")
	needPackage(t, "/usr/bin/tshark", "tshark")
	needPackage(t, "/usr/sbin/ethtool", "ethtool")
	r := runEarlyData(t)
	wire := checkEarlyWire(t, r)
	decrypted := judgeEarlyData(t, r, wire, nil)
	judgeEarlyData(t, r, wire, decrypted)
}

// earlyRequest is an HTTP/1.1 GET that has nginx close the connection
// after its response, so s_client ends.
func earlyRequest(ng *Nginx, path string) []byte {
	return fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, ng.TLS.Name)
}

// runEarlyData serves HTTPS with early data on and, under server- and
// client-side captures, resumes a session once per earlyPaths with the
// request as early data. Each session comes from a full handshake just
// before, whose GET /index.html is a control transaction: a resumed
// connection gets no ticket to chain (nginx answers the early request
// and closes before the client's Finished, which the server's tickets
// follow), and a client should use a ticket once (RFC 8446 8.1;
// nginx, though, accepted early data again on a used one).
func runEarlyData(t *testing.T) *earlyRun {
	t.Helper()
	ctx := testContext(t)
	tb := New(t, Options{Link: &LinkOptions{DefaultRTT: earlyRTT, Seed: 1}})
	t.Logf("testbed %s in %s", tb.Name, tb.Dir)
	ng, err := tb.StartNginx(ctx, NginxOptions{TLS: &NginxTLS{EarlyData: true}})
	if err != nil {
		t.Fatal(err)
	}
	r := &earlyRun{tb: tb, nginx: ng, keyLog: filepath.Join(tb.Dir, "sclient-keylog.txt")}
	capt, ccapt := startBothCaptures(t, tb, "https-0rtt")
	r.capture, r.clientCapture = capt.Path, ccapt.Path
	for i, p := range earlyPaths {
		sess := filepath.Join(tb.Dir, fmt.Sprintf("session-%d.pem", i))
		res, err := tb.SClient(ctx, ng, SClientOptions{KeyLog: r.keyLog, SessOut: sess, Stdin: earlyRequest(ng, "/index.html")})
		logSClient(t, fmt.Sprintf("full #%d /index.html", i), res, err)
		r.runs = append(r.runs, sclientRun{path: "/index.html", res: res})
		req := filepath.Join(tb.Dir, fmt.Sprintf("request-%d.txt", i))
		if err := os.WriteFile(req, earlyRequest(ng, p), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err = tb.SClient(ctx, ng, SClientOptions{KeyLog: r.keyLog, SessIn: sess, EarlyData: req})
		logSClient(t, fmt.Sprintf("resumed #%d %s", i, p), res, err)
		r.runs = append(r.runs, sclientRun{path: p, early: true, res: res})
	}
	r.bridge = tb.Link.Bridge.Stats()
	stopBothCaptures(t, capt, ccapt, "0rtt-", r.keyLog, ng.ErrorLog, ng.AccessLog)
	r.link, err = MeasureLink(r.clientCapture, r.capture, func(netip.Addr) time.Duration { return earlyRTT / 2 })
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range r.link.Worst {
		detailf(t, "link: %s", w)
	}
	return r
}

// linkLate is how late the link was (largest |excess| over the nominal
// one-way delay) for any packet of the connection from client port port
// up to to (client capture time): rtmon's round trip and the packet's own
// transit both ride on them.
func (r *earlyRun) linkLate(port uint16, to int64) time.Duration {
	var m time.Duration
	for k := range r.link.byConn {
		if k.port == port {
			m = max(m, r.link.LateBefore(k.client, port, to))
		}
	}
	return m
}

// logSClient logs one s_client run and fails the test when it did not
// get its response (the scenario itself is broken then).
func logSClient(t *testing.T, what string, r *SClientResult, err error) {
	t.Helper()
	if err != nil && r == nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s", what, err, r.Stdout)
	}
	t.Logf("s_client %s: reused %v, early data %q, HTTP %d, %v", what, r.Reused(), r.EarlyStatus(), r.Status(), time.Duration(r.End-r.Start))
	if r.Status() != 200 {
		t.Fatalf("%s: no HTTP 200 from s_client:\n%s\nstderr:\n%s", what, r.Stdout, r.Stderr)
	}
}

// earlyWire is the truth of one s_client connection.
type earlyWire struct {
	path  string
	early bool // sent as early data
	conn  *TLSWireConn
	txn   *TLSWireTxn
	rec   EarlyDataConn // the server-side capture's records
}

// checkEarlyWire reads the client's decrypted wire (the truth) and the
// server-side capture's TLS records, and checks the scenario did what it
// is for: each resumed connection's request went as early data, was
// accepted, and its response reached the client.
func checkEarlyWire(t *testing.T, r *earlyRun) []earlyWire {
	t.Helper()
	conns, crecs, srecs := readTLSWires(t, r.clientCapture, r.capture, r.keyLog, r.nginx.Port)
	// The connections in SYN order are the s_client runs in order.
	ports := slices.SortedFunc(maps.Keys(conns), func(a, b uint16) int { return int(conns[a].SYN - conns[b].SYN) })
	runs := r.runs
	if len(ports) != len(runs) {
		t.Fatalf("client's wire has %d connections (ports %v), s_client made %d", len(ports), ports, len(runs))
	}
	var out []earlyWire
	for i, port := range ports {
		c := conns[port]
		run := runs[i]
		w := earlyWire{path: run.path, early: run.early, conn: c, rec: ReadEarlyData(srecs[port])}
		if c.SYN < run.res.Start || c.SYN > run.res.End {
			t.Errorf("port %d: SYN at %d outside s_client run #%d [%d, %d]", port, c.SYN, i, run.res.Start, run.res.End)
		}
		if len(c.Txns) != 1 || !c.Txns[0].Complete || c.Txns[0].URL != w.path || c.Txns[0].Status != 200 {
			t.Fatalf("port %d: client's wire has %d transactions %s, want one complete GET %s 200", port, len(c.Txns), wireTxns(c), w.path)
		}
		w.txn = c.Txns[0]
		cl := ReadEarlyData(crecs[port])
		t.Logf("port %d %s: truth total %v (fresh %v), request %v after the SYN, response done %v after it; client's Finished %v after the SYN",
			port, w.path, w.txn.Total(), w.txn.Fresh, time.Duration(w.txn.ReqFirst-c.SYN), time.Duration(w.txn.End-w.txn.ReqFirst),
			time.Duration(c.Finished-c.SYN))
		t.Logf("port %d client side: %v", port, cl)
		t.Logf("port %d server side: %v", port, w.rec)
		switch {
		case !w.early && (cl.Offered || run.res.Reused()):
			t.Errorf("port %d: the first connection resumed or offered early data", port)
		case w.early && !(cl.Offered && cl.Accepted && cl.EndOfEarly && cl.Request == w.path && run.res.EarlyStatus() == "accepted"):
			t.Fatalf("port %d: early data not sent and accepted (s_client: %q): %v", port, run.res.EarlyStatus(), cl)
		case w.early && !(w.txn.Fresh && w.txn.ReqFirst < c.Finished):
			t.Fatalf("port %d: the request did not leave before the client's Finished: %+v", port, *w.txn)
		}
		out = append(out, w)
	}
	return out
}

func wireTxns(c *TLSWireConn) string {
	var s []string
	for _, x := range c.Txns {
		s = append(s, fmt.Sprintf("%s %s %d complete=%v", x.Method, x.URL, x.Status, x.Complete))
	}
	return fmt.Sprint(s)
}

// earlyNear says whether got is within the transactions' tolerance of
// the wire's want (max(2 ms, 5%)), the link's stalls over [from, to]
// allowed as in the other HTTPS tests, and describes the comparison.
func earlyNear(r *earlyRun, port uint16, got, want time.Duration, from, to int64) (bool, string) {
	tol := max(txnFloor, time.Duration(txnRel*float64(want)))
	stall := r.bridge.StallWithin(from, to)
	late := r.linkLate(port, to)
	d := got - want
	return d.Abs() <= tol+stall+late, fmt.Sprintf("got %v want %v (off %+v, tolerance %v + link stalls %v + link late %v)", got, want, d, tol, stall, late)
}

// judgeEarlyData runs rtmon on the server-side capture, with the key log
// (decrypted, when withKeys is nil) or without, and judges its records of
// every connection against the client's wire; it returns them by client
// port. Keyless, where the wire cannot tell when the client could read
// the first response byte, Tserver is judged against the decrypted run's
// (withKeys), which the plaintext places exactly.
func judgeEarlyData(t *testing.T, r *earlyRun, wire []earlyWire, withKeys map[int]rtmonTxnRec) map[int]rtmonTxnRec {
	t.Helper()
	decrypted := withKeys == nil
	mode, out, txns, byPort := analyzeTLSCapture(t, r.capture, r.keyLog, decrypted)
	connBy := map[int]httpsConn{}
	for _, c := range readJSONL[httpsConn](t, filepath.Join(out, "connections.jsonl")) {
		connBy[c.ClientPort] = c
	}
	for _, w := range wire {
		port := int(w.conn.Port)
		name := fmt.Sprintf("%s port %d %s (early %v)", mode, port, w.path, w.early)
		c, ok := connBy[port]
		if !ok {
			t.Errorf("%s: rtmon has no connection", name)
		} else {
			judgeEarlyConn(t, r, name, w, c)
		}
		xs := byPort[port]
		if len(xs) != 1 {
			t.Errorf("%s: rtmon has %d transactions, want 1: got %s, want total %v", name, len(xs), earlyTxns(xs), w.txn.Total())
			continue
		}
		judgeEarlyTxn(t, r, name, w, xs[0], decrypted)
		if k, ok := withKeys[port]; ok {
			d := time.Duration(xs[0].Tserver - k.Tserver)
			if tol := max(txnFloor, time.Duration(txnRel*float64(k.Tserver))); d.Abs() > tol {
				t.Errorf("%s: tserver %v, decrypted %v (off %v, tolerance %v)", name, time.Duration(xs[0].Tserver), time.Duration(k.Tserver), d, tol)
			}
		}
	}
	if len(txns) != len(wire) {
		t.Errorf("%s: rtmon reports %d transactions, the client's wire has %d", mode, len(txns), len(wire))
	}
	out1 := map[int]rtmonTxnRec{}
	for port, xs := range byPort {
		if len(xs) == 1 {
			out1[port] = xs[0]
		}
	}
	return out1
}

// judgeEarlyConn checks a connection record: TLS, and the handshake's
// time kept (client's first SYN to its Finished), early data or not.
func judgeEarlyConn(t *testing.T, r *earlyRun, name string, w earlyWire, c httpsConn) {
	t.Helper()
	want := time.Duration(w.conn.Finished - w.conn.SYN)
	ok, cmp := earlyNear(r, w.conn.Port, time.Duration(c.Tconn+c.Ttls), want, w.conn.SYN, w.conn.Finished)
	t.Logf("%s: conn tls %#x flags %v tconn=%v ttls=%v; tconn+ttls vs SYN->client Finished: %s", name, c.TLSVersion, c.Flags,
		time.Duration(c.Tconn), time.Duration(c.Ttls), cmp)
	if !slices.Contains(c.Flags, "tls") || c.TLSVersion != 0x0304 {
		t.Errorf("%s: connection tls_version %#x flags %v, want 0x304 and tls", name, c.TLSVersion, c.Flags)
	}
	if c.Ttls <= 0 {
		t.Errorf("%s: connection ttls %v, want the handshake's time (> 0)", name, time.Duration(c.Ttls))
	}
	if !ok {
		t.Errorf("%s: connection tconn+ttls: %s", name, cmp)
	}
}

// judgeEarlyTxn checks the connection's one transaction. An early-data
// one must be flagged early_data with ttls 0 and its total (decrypted:
// also tserver+ttransfer, the request's leaving to the last response
// byte) within tolerance of the wire; the full handshake's one is the
// control: not early_data, ttls > 0, the same totals.
func judgeEarlyTxn(t *testing.T, r *earlyRun, name string, w earlyWire, x rtmonTxnRec, decrypted bool) {
	t.Helper()
	okTotal, cmpTotal := earlyNear(r, w.conn.Port, time.Duration(x.Total), w.txn.Total(), w.txn.Start, w.txn.End)
	okRest, cmpRest := earlyNear(r, w.conn.Port, time.Duration(x.Tserver+x.Ttransfer), time.Duration(w.txn.End-w.txn.ReqFirst), w.txn.ReqFirst, w.txn.End)
	t.Logf("%s: rtmon %s %q status %d flags %v tconn=%v ttls=%v trequest=%v tserver=%v ttransfer=%v total=%v", name,
		x.Method, x.URL, x.Status, x.Flags, time.Duration(x.Tconn), time.Duration(x.Ttls), time.Duration(x.Trequest),
		time.Duration(x.Tserver), time.Duration(x.Ttransfer), time.Duration(x.Total))
	t.Logf("%s: total: %s; tserver+ttransfer vs request->last byte: %s; wire request %v after the SYN, tconn+ttls+trequest %v",
		name, cmpTotal, cmpRest, time.Duration(w.txn.ReqFirst-w.conn.SYN), time.Duration(x.Tconn+x.Ttls+x.Trequest))
	if decrypted && (x.URL != w.path || x.Method != "GET" || x.Status != 200) {
		t.Errorf("%s: rtmon %s %q status %d, want GET %q 200", name, x.Method, x.URL, x.Status, w.path)
	}
	if !x.has("tls") || x.has("early_data") != w.early {
		t.Errorf("%s: flags %v, want tls and early_data %v", name, x.Flags, w.early)
	}
	switch {
	case w.early && x.Ttls != 0:
		t.Errorf("%s: ttls %v, want 0 (the request did not wait for the handshake)", name, time.Duration(x.Ttls))
	case !w.early && x.Ttls <= 0:
		t.Errorf("%s: ttls %v on the full handshake, want > 0", name, time.Duration(x.Ttls))
	}
	if !okTotal {
		t.Errorf("%s: total: %s", name, cmpTotal)
	}
	if decrypted && !okRest {
		t.Errorf("%s: tserver+ttransfer vs the wire's request->last byte: %s", name, cmpRest)
	}
}

func earlyTxns(xs []rtmonTxnRec) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprintf("#%d %q flags %v ttls=%v total=%v", x.Index, x.URL, x.Flags, time.Duration(x.Ttls), time.Duration(x.Total)))
	}
	return fmt.Sprint(s)
}

// readTLSWires reads the client-side capture's transactions (the truth)
// and both captures' TLS records, decrypted with keyLog.
func readTLSWires(t *testing.T, clientCapture, capture, keyLog string, port int) (conns map[uint16]*TLSWireConn, crecs, srecs map[uint16][]TLSRecordPacket) {
	t.Helper()
	ctx := testContext(t)
	conns, err := ReadTLSWire(ctx, clientCapture, keyLog, port)
	if err != nil {
		t.Fatal(err)
	}
	if crecs, err = ReadTLSRecords(ctx, clientCapture, keyLog, port); err != nil {
		t.Fatal(err)
	}
	if srecs, err = ReadTLSRecords(ctx, capture, keyLog, port); err != nil {
		t.Fatal(err)
	}
	return conns, crecs, srecs
}

// startBothCaptures starts captures at the server (rtmon's input) and at
// the client (the truth), named name and name-client.
func startBothCaptures(t *testing.T, tb *Testbed, name string) (server, client *Capture) {
	t.Helper()
	ctx := testContext(t)
	server, err := tb.StartCapture(ctx, tb.Server, name)
	if err != nil {
		t.Fatal(err)
	}
	if client, err = tb.StartCapture(ctx, tb.Client, name+"-client"); err != nil {
		t.Fatal(err)
	}
	return server, client
}

// stopBothCaptures stops them, fails the test if either dropped packets,
// and with -testbed.keep copies them and the files in also, prefixed.
func stopBothCaptures(t *testing.T, server, client *Capture, prefix string, also ...string) {
	t.Helper()
	stopCapture(t, server)
	stopCapture(t, client)
	if server.Dropped != 0 || client.Dropped != 0 {
		t.Errorf("tcpdump dropped %d packets at the server, %d at the client", server.Dropped, client.Dropped)
	}
	if *keepDir == "" {
		return
	}
	for _, f := range append([]string{server.Path, client.Path}, also...) {
		b, err := os.ReadFile(f)
		if err == nil {
			err = os.WriteFile(filepath.Join(*keepDir, prefix+filepath.Base(f)), b, 0o600)
		}
		if err != nil {
			t.Error(err)
		}
	}
}

// analyzeTLSCapture runs rtmon on capture, with keyLog (decrypted) or
// without, checks its records' invariants, and returns the mode's name,
// the output directory and the transactions, also by client port.
func analyzeTLSCapture(t *testing.T, capture, keyLog string, decrypted bool) (mode, out string, txns []rtmonTxnRec, byPort map[int][]rtmonTxnRec) {
	t.Helper()
	mode, flags := "keyless", []string(nil)
	if decrypted {
		mode, flags = "decrypted", []string{"--keylog", keyLog}
	}
	out = analyzeDir(t, capture, flags...)
	txns = readJSONL[rtmonTxnRec](t, filepath.Join(out, "transactions.jsonl"))
	checkRecords(t, txns, nil)
	byPort = map[int][]rtmonTxnRec{}
	for _, x := range txns {
		byPort[x.ClientPort] = append(byPort[x.ClientPort], x)
	}
	return mode, out, txns, byPort
}

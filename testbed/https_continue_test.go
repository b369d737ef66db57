package testbed

// HTTPS POSTs with "Expect: 100-continue" across the emulated link: curl
// sends the request head, waits for nginx's interim "100 Continue" and
// only then its body; nginx reads the body, proxies the request to the
// back end and sends the final response. rtmon, reading the server-side
// capture with the key log and without (where it knows the interim only
// by its record's length), must make one transaction of each such POST,
// flagged continued, timed as the client saw it (first SYN to last
// response byte, from the client's decrypted wire). A POST that asked for
// no interim and a GET are the controls.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// continueRTT is the emulated link's round trip.
const continueRTT = 40 * time.Millisecond

// continueCase is one curl run, on its own connection.
type continueCase struct {
	name   string
	body   int  // POST body bytes; 0: a GET
	expect bool // "Expect: 100-continue" (else "Expect:", none)
}

// continueCases: Expect POSTs whose bodies take many TLS records (and,
// at 600 KB, several round trips), one whose body fits one record, and
// the controls.
var continueCases = []continueCase{
	{"expect-100k", 100 << 10, true},
	{"expect-600k", 600 << 10, true},
	{"control-100k", 100 << 10, false},
	{"get", 0, false},
	{"expect-1k", 1 << 10, true},
}

// continueServerMS is the back end's server time (?ms=).
const continueServerMS = 20

// continueRun is what one TLS version's traffic left.
type continueRun struct {
	tb                     *Testbed
	nginx                  *Nginx
	path                   string // the /app/ URL path posted to
	capture, clientCapture string
	keyLog                 string
	results                []CurlResult // by continueCases
	bridge                 BridgeStats
}

// continueAttempts bounds the runs of TestHTTPSContinue's scenario.
const continueAttempts = 3

func TestHTTPSContinue(t *testing.T) {
	needPackage(t, "/usr/bin/curl", "curl")
	needPackage(t, "/usr/sbin/nginx", "nginx-light")
	needPackage(t, "/usr/bin/tshark", "tshark")
	needPackage(t, "/usr/sbin/ethtool", "ethtool")
	for _, v := range []struct {
		name  string
		tls12 bool
	}{{"TLS1.3", false}, {"TLS1.2", true}} {
		t.Run(v.name, func(t *testing.T) {
			// A run whose client had to resend request bytes (a busy
			// machine's link dropped or held them) is not the scenario
			// the checks are for: it is run again, on a fresh testbed.
			var r *continueRun
			var wire []continueWire
			for attempt := 1; wire == nil; attempt++ {
				if attempt > continueAttempts {
					t.Fatalf("%d runs in a row had a request resent by the client", continueAttempts)
				}
				if r != nil {
					r.tb.Close()
				}
				r = runContinue(t, v.tls12)
				wire = checkContinueWire(t, r, v.tls12)
			}
			judgeContinue(t, r, wire, false)
			judgeContinue(t, r, wire, true)
		})
	}
}

// runContinue serves HTTPS (HTTP/1.1) with /app/ proxied to a back end
// and, under server- and client-side captures, runs curl once per
// continueCases.
func runContinue(t *testing.T, tls12 bool) *continueRun {
	t.Helper()
	ctx := testContext(t)
	tb := New(t, Options{Link: &LinkOptions{DefaultRTT: continueRTT, Seed: 1}})
	t.Logf("testbed %s in %s", tb.Name, tb.Dir)
	site := GenerateSite(1, 1)
	be, err := tb.StartBackend(site)
	if err != nil {
		t.Fatal(err)
	}
	ng, err := tb.StartNginx(ctx, NginxOptions{Content: site.Content, Backend: be.Addr.String(), TLS: &NginxTLS{TLS12: tls12}})
	if err != nil {
		t.Fatal(err)
	}
	r := &continueRun{tb: tb, nginx: ng, path: site.Pages[0].AppPath(continueServerMS), keyLog: filepath.Join(tb.Dir, "curl-keylog.txt")}
	capt, ccapt := startBothCaptures(t, tb, "https-continue")
	r.capture, r.clientCapture = capt.Path, ccapt.Path
	for _, c := range continueCases {
		args := []string{"--resolve", ng.Resolve()}
		if c.body > 0 {
			f := filepath.Join(tb.Dir, c.name+".body")
			if err := os.WriteFile(f, fileBody("/"+c.name, c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			expect := "Expect:"
			if c.expect {
				expect = "Expect: 100-continue"
			}
			args = append(args, "--data-binary", "@"+f, "-H", expect)
		}
		res, err := tb.Curl(ctx, CurlOptions{URLs: []string{ng.NameURL(r.path)}, CAFile: ng.CAFile,
			Env: []string{"SSLKEYLOGFILE=" + r.keyLog}, Args: args})
		if err != nil {
			t.Fatalf("curl %s: %v", c.name, err)
		}
		x := res[0]
		t.Logf("curl %s: port %d HTTP/%s %d, %d bytes up, %d down; connect=%v appconnect=%v starttransfer=%v total=%v", c.name,
			x.LocalPort, x.HTTPVersion, x.HTTPCode, x.SizeRequest, x.SizeDownload, x.Connect(), x.Appconnect(), x.Starttransfer(), x.Total())
		if x.HTTPCode != 200 || x.HTTPVersion != "1.1" || x.NumConnects != 1 {
			t.Fatalf("curl %s: HTTP/%s %d, %d connects; want HTTP/1.1 200 on a new connection", c.name, x.HTTPVersion, x.HTTPCode, x.NumConnects)
		}
		r.results = append(r.results, x)
	}
	r.bridge = tb.Link.Bridge.Stats()
	stopBothCaptures(t, capt, ccapt, "continue-"+filepath.Base(t.Name())+"-", r.keyLog, ng.ErrorLog, ng.AccessLog)
	return r
}

// continueWire is the truth of one curl run's connection.
type continueWire struct {
	c    continueCase
	conn *TLSWireConn
	txn  *TLSWireTxn
	// For Expect POSTs: the 100 Continue reached the client (Interim),
	// the body's first byte left it (BodyFirst); Unix ns. interimLen: the
	// interim's TLS record length at the server.
	Interim, BodyFirst int64
	interimLen         int
}

// interimLens are the sealed lengths of "HTTP/1.1 100 Continue\r\n\r\n"
// (25 bytes): TLS 1.3 (inner type byte, 16-byte tag), TLS 1.2 AES-GCM
// (8-byte explicit nonce, tag) or ChaCha20-Poly1305 (tag).
var interimLens = map[bool][]int{false: {42}, true: {49, 41}}

// checkContinueWire reads the client's decrypted wire (the truth) and
// checks each run did what it is for: one complete transaction on its
// connection; for an Expect POST a 100 Continue before the final
// response, the body sent only once it had reached the client, and the
// interim's record of its sealed length at the server; no interim
// otherwise.
func checkContinueWire(t *testing.T, r *continueRun, tls12 bool) []continueWire {
	t.Helper()
	conns, crecs, srecs := readTLSWires(t, r.clientCapture, r.capture, r.keyLog, r.nginx.Port)
	if len(conns) != len(continueCases) {
		t.Errorf("client's wire has %d connections, curl made %d", len(conns), len(continueCases))
	}
	var out []continueWire
	for i, c := range continueCases {
		port := uint16(r.results[i].LocalPort)
		w := continueWire{c: c, conn: conns[port]}
		method := map[bool]string{false: "GET", true: "POST"}[c.body > 0]
		if w.conn == nil || len(w.conn.Txns) != 1 {
			t.Fatalf("%s port %d: client's wire has connection %v, want one with one transaction", c.name, port, w.conn)
		}
		w.txn = w.conn.Txns[0]
		if x := w.txn; x.ReqHeld {
			t.Logf("%s port %d: the client resent bytes of its request (%+v): running the scenario again", c.name, port, *x)
			return nil
		}
		if x := w.txn; !x.Complete || x.Method != method || x.URL != r.path || x.Status != 200 || !x.Fresh {
			t.Fatalf("%s port %d: client's wire has %+v, want one fresh complete %s %s 200", c.name, port, *x, method, r.path)
		}
		var interims, sinterims []TLSRecordPacket
		for _, p := range crecs[port] {
			switch {
			case !p.FromClient && p.Status == 100:
				interims = append(interims, p)
			case p.FromClient && p.TCPLen > 0 && p.At > w.txn.ReqFirst && w.BodyFirst == 0:
				w.BodyFirst = p.At
			}
		}
		for _, p := range srecs[port] {
			if !p.FromClient && p.Status == 100 {
				sinterims = append(sinterims, p)
			}
		}
		if !c.expect {
			if len(interims)+len(sinterims) != 0 {
				t.Errorf("%s port %d: interim responses on the wire without Expect: %+v", c.name, port, interims)
			}
			t.Logf("%s port %d truth: %s, total %v, request head %v after the SYN, body done %v after it, response done %v later",
				c.name, port, wireTxns(w.conn), w.txn.Total(), time.Duration(w.txn.ReqFirst-w.conn.SYN),
				time.Duration(w.txn.ReqLast-w.txn.ReqFirst), time.Duration(w.txn.End-w.txn.ReqLast))
			out = append(out, w)
			continue
		}
		if len(interims) != 1 || len(sinterims) != 1 || len(sinterims[0].Lengths) != 1 {
			t.Fatalf("%s port %d: want one 100 Continue in a record of its own on each side; client %+v, server %+v", c.name, port, interims, sinterims)
		}
		w.Interim, w.interimLen = interims[0].At, sinterims[0].Lengths[0]
		t.Logf("%s port %d truth: %s, total %v; head %v after the SYN, 100 Continue (record of %d bytes at the server) %v after the head, body's first byte %v after the 100, body done %v after it, response done %v later",
			c.name, port, wireTxns(w.conn), w.txn.Total(), time.Duration(w.txn.ReqFirst-w.conn.SYN), w.interimLen,
			time.Duration(w.Interim-w.txn.ReqFirst), time.Duration(w.BodyFirst-w.Interim), time.Duration(w.txn.ReqLast-w.BodyFirst),
			time.Duration(w.txn.End-w.txn.ReqLast))
		if !(w.txn.ReqFirst < w.Interim && w.Interim <= w.BodyFirst && w.BodyFirst <= w.txn.ReqLast && w.txn.ReqLast < w.txn.RespLast) {
			t.Errorf("%s port %d: not head < 100 Continue <= body's first byte <= its last < response's end at the client: %v %v %v %v %v",
				c.name, port, w.txn.ReqFirst, w.Interim, w.BodyFirst, w.txn.ReqLast, w.txn.RespLast)
		}
		if !slices.Contains(interimLens[tls12], w.interimLen) {
			t.Errorf("%s port %d: the 100 Continue's record at the server is %d bytes, want one of %v", c.name, port, w.interimLen, interimLens[tls12])
		}
		out = append(out, w)
	}
	return out
}

// continueNear says whether got is within the transactions' tolerance
// of the wire's want (max(2 ms, 5%)), the link's stalls over [from, to]
// allowed as in the other HTTPS tests, and describes the comparison.
func continueNear(r *continueRun, got, want time.Duration, from, to int64) (bool, string) {
	tol := max(txnFloor, time.Duration(txnRel*float64(want)))
	stall := r.bridge.StallWithin(from, to)
	d := got - want
	return d.Abs() <= tol+stall, fmt.Sprintf("got %v want %v (off %+v, tolerance %v + link stalls %v)", got, want, d, tol, stall)
}

// judgeContinue runs rtmon on the server-side capture, keyless or with
// the key log, and judges each run's connection: exactly one
// transaction, flagged continued for an Expect POST only, its total and
// its request's end (the body's last byte) to the last response byte
// within tolerance of the client's wire.
func judgeContinue(t *testing.T, r *continueRun, wire []continueWire, decrypted bool) {
	t.Helper()
	mode, _, txns, byPort := analyzeTLSCapture(t, r.capture, r.keyLog, decrypted)
	for _, w := range wire {
		name := fmt.Sprintf("%s %s port %d", mode, w.c.name, w.conn.Port)
		xs := byPort[int(w.conn.Port)]
		if len(xs) != 1 {
			t.Errorf("%s: rtmon has %d transactions, want 1: got %s, want total %v", name, len(xs), continueTxns(xs), w.txn.Total())
			continue
		}
		judgeContinueTxn(t, r, name, w, xs[0], decrypted)
	}
	if len(txns) != len(wire) {
		t.Errorf("%s: rtmon reports %d transactions, the client's wire has %d", mode, len(txns), len(wire))
	}
}

// judgeContinueTxn checks the connection's one transaction.
func judgeContinueTxn(t *testing.T, r *continueRun, name string, w continueWire, x rtmonTxnRec, decrypted bool) {
	t.Helper()
	okTotal, cmpTotal := continueNear(r, time.Duration(x.Total), w.txn.Total(), w.txn.Start, w.txn.End)
	okRest, cmpRest := continueNear(r, time.Duration(x.Tserver+x.Ttransfer), time.Duration(w.txn.End-w.txn.ReqLast), w.txn.ReqLast, w.txn.End)
	t.Logf("%s: rtmon %s %q status %d flags %v tconn=%v ttls=%v trequest=%v tserver=%v ttransfer=%v total=%v", name,
		x.Method, x.URL, x.Status, x.Flags, time.Duration(x.Tconn), time.Duration(x.Ttls), time.Duration(x.Trequest),
		time.Duration(x.Tserver), time.Duration(x.Ttransfer), time.Duration(x.Total))
	t.Logf("%s: total: %s; tserver+ttransfer vs request's end->last byte: %s", name, cmpTotal, cmpRest)
	method := map[bool]string{false: "GET", true: "POST"}[w.c.body > 0]
	if decrypted && (x.URL != r.path || x.Method != method || x.Status != 200) {
		t.Errorf("%s: rtmon %s %q status %d, want %s %q 200", name, x.Method, x.URL, x.Status, method, r.path)
	}
	if !x.has("tls") || x.has("continued") != w.c.expect || x.has("turns_ambiguous") {
		t.Errorf("%s: flags %v, want tls, continued %v, not turns_ambiguous", name, x.Flags, w.c.expect)
	}
	if !okTotal {
		t.Errorf("%s: total: %s", name, cmpTotal)
	}
	if !okRest {
		t.Errorf("%s: tserver+ttransfer vs the wire's request's end->last byte: %s", name, cmpRest)
	}
}

func continueTxns(xs []rtmonTxnRec) string {
	var s []string
	for i, x := range xs {
		if i == 3 && len(xs) > 4 {
			s = append(s, fmt.Sprintf("... %d more ...", len(xs)-4))
			continue
		} else if i > 3 && i < len(xs)-1 {
			continue
		}
		s = append(s, fmt.Sprintf("#%d %s %q %d flags %v trequest=%v tserver=%v ttransfer=%v total=%v", x.Index, x.Method, x.URL, x.Status,
			x.Flags, time.Duration(x.Trequest), time.Duration(x.Tserver), time.Duration(x.Ttransfer), time.Duration(x.Total)))
	}
	return fmt.Sprint(s)
}

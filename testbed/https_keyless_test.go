package testbed

import (
	"cmp"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// rtmonTLSConn is what a connections.jsonl record says of TLS.
type rtmonTLSConn struct {
	ClientPort int      `json:"client_port"`
	ServerPort int      `json:"server_port"`
	Flags      []string `json:"flags"`
}

// judgeChromiumKeyless analyzes r's server capture without the key log,
// as a monitor without keys would. Chromium offers h2 and HTTP/1.1 on
// every connection and TLS 1.3 hides which one nginx chose. Over HTTP/2
// every connection that carried a request must be flagged http2, and
// none may give a transaction (never mis-timed silently); over HTTP/1.1 the request/response turns must be
// the wire's transactions, in order per connection, each timed within
// the transaction tolerance (the link's stalls allowed, as decrypted).
func judgeChromiumKeyless(t *testing.T, r *chromiumHTTPSRun, conns map[uint16]*TLSWireConn, h2 bool) *acceptance {
	t.Helper()
	out := analyzeDir(t, r.capture)
	txns := readJSONL[rtmonTxnRec](t, filepath.Join(out, "transactions.jsonl"))
	checkRecords(t, txns, nil)
	flagged := 0
	for _, c := range readJSONL[rtmonTLSConn](t, filepath.Join(out, "connections.jsonl")) {
		if w := conns[uint16(c.ClientPort)]; c.ServerPort != r.port || w == nil || len(w.Txns) == 0 {
			// Chromium opens a spare connection that carries no HTTP,
			// whose protocol no one can tell.
			continue
		}
		is := slices.Contains(c.Flags, "http2")
		if is != h2 {
			t.Errorf("keyless: connection from port %d flags %v, want http2 %v", c.ClientPort, c.Flags, h2)
		}
		if is {
			flagged++
		}
	}
	a := &acceptance{runs: 1}
	a.init()
	if h2 {
		if len(txns) != 0 {
			t.Errorf("keyless HTTP/2: %d transactions, want none", len(txns))
		}
		t.Logf("keyless HTTP/2: %d connections flagged http2, %d transactions", flagged, len(txns))
		return a
	}
	byPort := map[int][]*rtmonTxnRec{}
	for i := range txns {
		x := &txns[i]
		byPort[x.ClientPort] = append(byPort[x.ClientPort], x)
	}
	for port, c := range conns {
		got := byPort[int(port)]
		slices.SortFunc(got, func(x, y *rtmonTxnRec) int { return cmp.Compare(x.Index, y.Index) })
		if len(got) != len(c.Txns) {
			t.Errorf("keyless: port %d: %d transactions, the wire %d", port, len(got), len(c.Txns))
		}
		for i, w := range c.Txns {
			if i >= len(got) || !w.Complete {
				continue
			}
			x := got[i]
			a.txnAll++
			a.txnN++
			d := time.Duration(x.Total) - w.Total()
			tol := max(txnFloor, time.Duration(txnRel*float64(w.Total())))
			stall := r.bridge.StallWithin(w.Start, w.End)
			if d.Abs() <= tol+stall {
				a.txnOK++
				continue
			}
			t.Logf("keyless MISS %s:%d #%d (%s): rtmon %v (tconn %v ttls %v trequest %v tserver %v ttransfer %v, flags %v), wire %v (fresh %v): %+v (link stalls %v)",
				x.Client, port, i, w.URL, time.Duration(x.Total), time.Duration(x.Tconn), time.Duration(x.Ttls),
				time.Duration(x.Trequest), time.Duration(x.Tserver), time.Duration(x.Ttransfer), x.Flags, w.Total(), w.Fresh, d, stall)
		}
	}
	return a
}

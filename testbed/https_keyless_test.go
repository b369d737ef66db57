package testbed

import (
	"cmp"
	"fmt"
	"maps"
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
// every connection that carried a request must be flagged http2, and its
// transactions are turn estimates, judged against the wire's busy
// periods (judgeKeylessTurns); over HTTP/1.1 the request/response turns
// must be the wire's transactions, in order per connection, each timed
// within the transaction tolerance (the link's stalls allowed, as
// decrypted).
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
		judgeKeylessTurns(t, r, conns, txns, a)
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

// keylessTurnsWithin is the share of a keyless HTTP/2 run's turns that
// must be timed within the transaction tolerance. It is below
// txnWithin because a turn is a reading of the records' directions and
// of the client's ACKs at the server, not of streams: a request the
// client sends as (or just after) the previous answer's last record
// reaches it lies on a period's boundary, and the server's view of
// whether the client had that answer (its ACK, possibly delayed or
// piggybacked on the request) can differ from the client's by a few
// milliseconds, merging two periods or splitting one; a stream the
// client cancels, or data the server sends unasked, blurs one too. Such
// boundary cases are a minority of a page load's periods; an estimator
// wrong by design (a turn opened by the preface or by flow control, one
// that never ends, one per record) misses most of them, and fails.
const keylessTurnsWithin = 0.80

// wirePeriod is a busy period of a connection as its client saw it: the
// streams it asked for from a request sent when it had every answer so
// far, up to the next such request.
type wirePeriod struct {
	txns       []*TLSWireTxn
	start, end int64 // the first stream's Start; the last answer's end
	complete   bool  // every stream's answer came
}

// wirePeriods groups a connection's streams (in request order) into
// busy periods. The client had every answer when it sent a request if
// each earlier stream's answer had completed at the client (RespLast, a
// client-side time, like ReqFirst) by then: a stream whose HEADERS left
// before some earlier answer was complete joins the period under way.
// An answer that never came holds its period open.
func wirePeriods(c *TLSWireConn) []*wirePeriod {
	var ps []*wirePeriod
	var cur *wirePeriod
	for _, w := range c.Txns {
		if cur == nil || cur.complete && w.ReqFirst >= cur.end {
			cur = &wirePeriod{start: w.Start, end: w.Start, complete: true}
			ps = append(ps, cur)
		}
		cur.txns = append(cur.txns, w)
		if w.Complete {
			cur.end = max(cur.end, w.RespLast)
		} else {
			cur.complete = false
		}
	}
	return ps
}

// judgeKeylessTurns judges a keyless HTTP/2 run's turn estimates against
// the client's decrypted wire: every transaction must be flagged http2,
// turn_estimate and tls; per connection, rtmon's turns are matched to
// the wire's busy periods (wirePeriods) by start, and each matched
// turn's total is judged against its period's span within the
// transaction tolerance (the link's stalls allowed). A period without a
// turn, or a turn without a period, is counted and logged as a miss,
// not an error (the number of turns is an estimate too); a connection
// that carried requests without a turn, or a share of turns within
// tolerance below keylessTurnsWithin, is an error.
func judgeKeylessTurns(t *testing.T, r *chromiumHTTPSRun, conns map[uint16]*TLSWireConn, txns []rtmonTxnRec, a *acceptance) {
	t.Helper()
	byPort := map[int][]*rtmonTxnRec{}
	for i := range txns {
		x := &txns[i]
		if !x.has("http2") || !x.has("turn_estimate") || !x.has("tls") {
			t.Errorf("keyless HTTP/2: transaction %s %s:%d #%d: flags %v, want http2, turn_estimate and tls", x.ID, x.Client,
				x.ClientPort, x.Index, x.Flags)
		}
		byPort[x.ClientPort] = append(byPort[x.ClientPort], x)
	}
	var periodsN, turnsN, countOff, missing, extra int
	for _, port := range slices.Sorted(maps.Keys(conns)) {
		c := conns[port]
		if len(c.Txns) == 0 {
			continue // a spare connection: a turn there is extra (below)
		}
		got := byPort[int(port)]
		delete(byPort, int(port))
		slices.SortFunc(got, func(x, y *rtmonTxnRec) int { return cmp.Compare(x.Index, y.Index) })
		ps := wirePeriods(c)
		periodsN += len(ps)
		turnsN += len(got)
		if len(got) == 0 {
			t.Errorf("keyless HTTP/2: port %d carried %d streams in %d busy periods, rtmon gave no turn", port, len(c.Txns), len(ps))
		}
		if len(got) != len(ps) {
			countOff++
			t.Logf("keyless HTTP/2: port %d: %d turns, the wire %d busy periods (%d streams)", port, len(got), len(ps), len(c.Txns))
		}
		// Each turn goes to the period whose start is nearest its own;
		// of several, the nearest is the period's turn, the others
		// are extra.
		near := map[*wirePeriod]*rtmonTxnRec{}
		for _, x := range got {
			var best *wirePeriod
			for _, p := range ps {
				if best == nil || abs64(x.Start-p.start) < abs64(x.Start-best.start) {
					best = p
				}
			}
			if y := near[best]; y == nil || abs64(x.Start-best.start) < abs64(y.Start-best.start) {
				if y != nil {
					extra++
					a.txnAll++
					a.txnN++
					t.Logf("keyless MISS %s:%d turn #%d at %v: rtmon %v, no busy period of its own on the wire", y.Client, port,
						y.Index, time.Unix(0, y.Start).Format("15:04:05.000"), time.Duration(y.Total))
				}
				near[best] = x
			} else {
				extra++
				a.txnAll++
				a.txnN++
				t.Logf("keyless MISS %s:%d turn #%d at %v: rtmon %v, no busy period of its own on the wire", x.Client, port,
					x.Index, time.Unix(0, x.Start).Format("15:04:05.000"), time.Duration(x.Total))
			}
		}
		for i, p := range ps {
			a.txnAll++
			x := near[p]
			span := time.Duration(p.end - p.start)
			urls := make([]string, len(p.txns))
			for k, w := range p.txns {
				urls[k] = fmt.Sprintf("%d:%s", w.Stream, w.URL)
			}
			if x == nil && !p.complete && !slices.ContainsFunc(p.txns, func(w *TLSWireTxn) bool { return r.serverSaw(t, w) }) {
				t.Logf("keyless: port %d period #%d (%d streams %v): unanswered, and no request of it reached the server's capture", port, i,
					len(p.txns), urls)
				continue
			}
			if x == nil {
				missing++
				a.txnN++
				gap := "the connection's first"
				if i > 0 {
					gap = fmt.Sprintf("request %v after the previous period's last answer", time.Duration(p.txns[0].ReqFirst-ps[i-1].end))
				}
				t.Logf("keyless MISS port %d period #%d at %v (%v, %d streams %v, complete %v; %s): no turn", port, i,
					time.Unix(0, p.start).Format("15:04:05.000"), span, len(p.txns), urls, p.complete, gap)
				continue
			}
			if !p.complete {
				continue
			}
			a.txnN++
			d := time.Duration(x.Total) - span
			tol := max(txnFloor, time.Duration(txnRel*float64(span)))
			stall := r.bridge.StallWithin(p.start, p.end)
			if d.Abs() <= tol+stall {
				a.txnOK++
				continue
			}
			t.Logf("keyless MISS %s:%d turn #%d / period #%d: rtmon %v (start %+v, end %+v; tconn %v ttls %v trequest %v tserver %v ttransfer %v, flags %v), wire %v (%d streams %v, fresh %v): %+v (link stalls %v)",
				x.Client, port, x.Index, i, time.Duration(x.Total), time.Duration(x.Start-p.start), time.Duration(x.End-p.end),
				time.Duration(x.Tconn), time.Duration(x.Ttls), time.Duration(x.Trequest), time.Duration(x.Tserver),
				time.Duration(x.Ttransfer), x.Flags, span, len(p.txns), urls, p.txns[0].Fresh, d, stall)
		}
	}
	for _, rest := range byPort {
		for _, x := range rest {
			extra++
			a.txnAll++
			a.txnN++
			t.Logf("keyless MISS %s:%d turn #%d: rtmon %v on a connection that carried no stream", x.Client, x.ClientPort,
				x.Index, time.Duration(x.Total))
		}
	}
	t.Logf("keyless HTTP/2: %d busy periods on the wire, %d turns; %d connections with another count, %d periods without a turn, %d turns without a period",
		periodsN, turnsN, countOff, missing, extra)
	if a.txnN > 0 {
		share := float64(a.txnOK) / float64(a.txnN)
		t.Logf("keyless HTTP/2 turns within max(%v, %.0f%%) of the wire's busy periods: %d of %d (%.1f%%)", txnFloor, 100*txnRel,
			a.txnOK, a.txnN, 100*share)
		if share < keylessTurnsWithin {
			t.Errorf("keyless HTTP/2: %.1f%% of turns within tolerance, want >= %.0f%%", 100*share, 100*keylessTurnsWithin)
		}
	}
}

package testbed

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Bounds of TestWireTruthMatchesGoClient. How late a client notices a
// step of its kernel is up to the scheduler (p95 4.6 ms, max 34 ms were seen
// on a busy CI machine), so no bound applies to one request's lag; what
// does not depend on the machine's load is causality: the client sends a
// request on a reused connection before its wire does, and reads a
// response after it. causalSlack is the resolution
// of the two clocks (the capture's kernel stamp and the client's read).
// selfCheckMedian catches a wire analyzer that picks the wrong packets for
// most requests, which costs a round trip each, not a scheduling delay.
const (
	causalSlack     = 200 * time.Microsecond
	selfCheckMedian = 2 * time.Millisecond
	selfCheckLog    = 2 * time.Millisecond
)

// TestWireTruthMatchesGoClient is the wire analyzer's own check, before
// rtmon is involved: Go clients (real-time, nothing else running) load the
// realistic site — redirects, gzip and brotli containers, chunked
// responses, keep-alive across pages without Referer, favicon and beacon
// POSTs after load — and every transaction's wire truth (client capture:
// first SYN or request's first byte sent, last response byte in order)
// must have the same requests, in the same order, with the same statuses,
// never contradict the client's clock (the wire sends after the client
// and delivers before it reads), and agree with it within a few ms for
// the median request.
func TestWireTruthMatchesGoClient(t *testing.T) {
	needPackage(t, "/usr/sbin/ethtool", "ethtool")
	sc, err := NamedScenario("baseline", 4)
	if err != nil {
		t.Fatal(err)
	}
	sc.Name = "wire-selfcheck"
	var sessions []Session
	for _, s := range sc.Phases[0] {
		if s.Browser == BrowserGo {
			s.Realtime = true
			sessions = append(sessions, s)
		}
	}
	sessions[0].Brotli = true
	sc.Phases = [][]Session{sessions[:1], sessions[1:]}
	ctx := testContext(t)
	tb := New(t, sc.Options())
	res, err := RunScenario(ctx, tb, sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range res.Unattributed {
		t.Errorf("wire transaction of no page: %s:%d #%d %s %s", u.Client, u.Port, u.Index, u.Method, u.URL)
	}
	var starts, ends []time.Duration
	requests, encodings := 0, map[string]int{}
	for i := range res.Truth {
		p := &res.Truth[i]
		encodings[p.Encoding]++
		own := slices.Concat(p.Redirects, []ObjectTruth{p.Container}, p.Objects, p.AfterLoad)
		requests += len(own)
		if p.Wire == nil || !p.Wire.Valid {
			t.Errorf("%s: no usable wire truth: %+v", p, p.Wire)
			continue
		}
		ws := slices.Concat(p.Wire.Chain, p.Wire.InLoad, p.Wire.AfterLoad)
		if len(ws) != len(own) {
			t.Errorf("%s: %d requests on the wire, the client made %d", p, len(ws), len(own))
			continue
		}
		for k, x := range ws {
			o := own[k]
			name := fmt.Sprintf("%s %s:%d #%d %s %s", p, x.Client, x.Port, x.Index, x.Method, x.URL)
			if x.URL != o.URL || x.Status != o.Status || x.Port != uint16(o.LocalPort) {
				t.Errorf("%s: wire %s status %d port %d, client %s status %d port %d", name, x.URL, x.Status, x.Port,
					o.URL, o.Status, o.LocalPort)
			}
			if x.OwnStart != 0 {
				d := time.Duration(x.Start - x.OwnStart)
				starts = append(starts, d)
				// On a fresh connection the wire starts at its SYN, which
				// Go's transport may have sent for an earlier request
				// before handing the connection to this one: only a
				// reused connection's first byte must follow the client.
				if d < -causalSlack && !x.Fresh {
					t.Errorf("%s: the wire sent the first byte %v before the client did", name, -d)
				}
			}
			d := time.Duration(x.OwnEnd - x.End)
			ends = append(ends, d)
			if d < -causalSlack {
				t.Errorf("%s: the client read the last byte %v before the wire delivered it", name, -d)
			} else if d > selfCheckLog {
				t.Logf("%s: client saw the last byte %v after the wire (fresh %v)", name, d, x.Fresh)
			}
		}
	}
	t.Logf("%d pages, %d requests, container encodings %v", len(res.Truth), requests, encodings)
	t.Logf("wire start - client's: %s", errStats(starts))
	t.Logf("client's end - wire: %s", errStats(ends))
	if encodings["gzip"] == 0 || encodings["br"] == 0 {
		t.Errorf("container encodings %v: want gzip and br", encodings)
	}
	for name, d := range map[string][]time.Duration{"start": starts, "end": ends} {
		if len(d) == 0 {
			t.Errorf("no %s compared", name)
			continue
		}
		if med := pctDur(absAll(d), 0.5); med > selfCheckMedian {
			t.Errorf("%s: client clock vs wire median %v, want <= %v", name, med, selfCheckMedian)
		}
	}
}

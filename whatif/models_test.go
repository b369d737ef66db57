package whatif

import (
	"math"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

const (
	base = int64(1_700_000_000) * int64(time.Second)
	sec  = int64(time.Second)
	ms   = int64(time.Millisecond)
	us   = int64(time.Microsecond)
)

// spec scripts one transaction, capture times as offsets from base. With
// syns set it is the first transaction on a fresh connection.
type spec struct {
	id, client, class string
	syns, synacks     []int64
	est               int64 // handshake ACK (fresh) or request time (reused)
	rtt               int64
	proc              int64 // server processing at the capture point
	transfer          int64
	conn              string // reuse this connection id (not fresh)
	body              int64
	ctype             string
	rttServer         int64
}

type builder struct {
	conns []*reconstruct.Connection
	txs   []*reconstruct.Transaction
	byID  map[string]*reconstruct.Connection
}

func (b *builder) add(s spec) *reconstruct.Transaction {
	if b.byID == nil {
		b.byID = map[string]*reconstruct.Connection{}
	}
	cl := netip.MustParseAddr(s.client)
	connID := s.conn
	fresh := connID == ""
	if fresh {
		connID = "c-" + s.id
		c := &reconstruct.Connection{ID: connID, Client: cl, Class: s.class, RTTClient: s.rtt, RTTServer: s.rttServer,
			Established: base + s.est, Tconn: s.est - s.syns[0]}
		for _, t := range s.syns {
			c.SYNTimes = append(c.SYNTimes, base+t)
		}
		for _, t := range s.synacks {
			c.SYNACKTimes = append(c.SYNACKTimes, base+t)
		}
		b.conns = append(b.conns, c)
		b.byID[connID] = c
	}
	n := b.byID[connID].Transactions
	b.byID[connID].Transactions++
	t := &reconstruct.Transaction{ID: connID + "-" + strconv.Itoa(n), ConnectionID: connID, Index: n, Client: cl,
		RequestFirst: base + s.est, RequestLast: base + s.est, RTTClient: s.rtt,
		BodyBytes: s.body, ResponseBytes: s.body, ContentType: s.ctype}
	t.ResponseFirst = t.RequestLast + s.proc
	t.ResponseLast = t.ResponseFirst + s.transfer
	t.Tserver = s.proc + s.rtt
	t.Ttransfer = s.transfer
	if fresh {
		t.Start = base + s.syns[0] - s.rtt/2
		t.Tconn = s.est - s.syns[0]
	} else {
		t.Start = base + s.est - s.rtt/2
	}
	t.Total = t.Tconn + t.Trequest + t.Tserver + t.Ttransfer
	t.End = t.Start + t.Total
	b.txs = append(b.txs, t)
	return t
}

func (b *builder) dataset(t *testing.T, pvs []*pageview.Pageview) *Dataset {
	t.Helper()
	d, err := NewDataset(b.conns, b.txs, pvs)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func rules(t *testing.T, src string) []Rule {
	t.Helper()
	rs, err := ParseRules(src)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func eval(t *testing.T, d *Dataset, src string, o Options) *Result {
	t.Helper()
	res, err := d.Evaluate(rules(t, src), o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func unitByID(t *testing.T, r *Result, id string) UnitResult {
	t.Helper()
	for _, u := range r.Units {
		if u.ID == id {
			return u
		}
	}
	t.Fatalf("no unit %s", id)
	return UnitResult{}
}

func TestFastSYN(t *testing.T) {
	var b builder
	// SYNs at 0, 3 s and 9 s, none answered until the third.
	tx := b.add(spec{id: "a", client: "198.51.100.1", syns: []int64{0, 3 * sec, 9 * sec},
		synacks: []int64{9*sec + 30*us}, est: 9*sec + 30*us + 100*ms, rtt: 100 * ms, proc: 200 * ms, transfer: 10 * ms})
	d := b.dataset(t, nil)
	res := eval(t, d, "IF IP.SRC == * THEN FAST SYN GAP 500ms", Options{})
	u := unitByID(t, res, tx.ID)
	want := tx.Total - ((3*sec - 500*ms) + (6*sec - 500*ms))
	if u.Measured != tx.Total || u.Predicted != want {
		t.Errorf("FAST SYN: measured %d predicted %d, want %d and %d", u.Measured, u.Predicted, tx.Total, want)
	}
	// SYN/ACK losses are not FAST SYN's business; HALT FAST SYN suspends it.
	for _, src := range []string{"IF IP.SRC == * THEN FAST SYN/ACK GAP 500ms",
		"IF IP.SRC == * THEN FAST SYN GAP 500ms, HALT FAST SYN"} {
		if u := unitByID(t, eval(t, d, src, Options{}), tx.ID); u.Predicted != tx.Total {
			t.Errorf("%s: predicted %d, want unchanged %d", src, u.Predicted, tx.Total)
		}
	}
}

func TestFastSYNACK(t *testing.T) {
	var b builder
	// Each SYN is answered but the SYN/ACKs of the first two are lost.
	a := b.add(spec{id: "a", client: "198.51.100.1", syns: []int64{0, 3 * sec, 9 * sec},
		synacks: []int64{30 * us, 3*sec + 30*us, 9*sec + 30*us}, est: 9*sec + 30*us + 100*ms, rtt: 100 * ms, proc: 200 * ms})
	// The server retransmits its SYN/ACK (1 s, then 2 s later) without a
	// client retransmission.
	s := b.add(spec{id: "s", client: "198.51.100.2", syns: []int64{0},
		synacks: []int64{30 * us, sec + 30*us, 3*sec + 30*us}, est: 3*sec + 30*us + 100*ms, rtt: 100 * ms, proc: 200 * ms})
	d := b.dataset(t, nil)
	res := eval(t, d, "IF IP.SRC == * THEN FAST SYN/ACK GAP 500ms", Options{})
	if u, want := unitByID(t, res, a.ID), a.Total-(2500*ms+5500*ms); u.Predicted != want {
		t.Errorf("client-retransmitted SYN/ACK losses: predicted %d, want %d", u.Predicted, want)
	}
	if u, want := unitByID(t, res, s.ID), s.Total-(500*ms+1500*ms); u.Predicted != want {
		t.Errorf("server-retransmitted SYN/ACK: predicted %d, want %d", u.Predicted, want)
	}
	if u := unitByID(t, eval(t, d, "IF IP.SRC == * THEN FAST SYN GAP 500ms", Options{}), a.ID); u.Predicted != a.Total {
		t.Errorf("FAST SYN changed SYN/ACK losses: %d != %d", u.Predicted, a.Total)
	}
}

func TestSplice(t *testing.T) {
	var b builder
	// The server drops the first SYN; the retransmission 3 s later is
	// accepted (server turnaround 30 us).
	tx := b.add(spec{id: "a", client: "198.51.100.1", syns: []int64{0, 3 * sec}, synacks: []int64{3*sec + 30*us},
		est: 3*sec + 30*us + 100*ms, rtt: 100 * ms, rttServer: 30 * us, proc: 200 * ms, transfer: 50 * ms})
	d := b.dataset(t, nil)
	// The client connects in one RTT (100 ms) and its request reaches the
	// splicer at 0.1 s. Only then does the splicer send its SYN, which the
	// server drops as it dropped the client's: accepted 3 s + 30 us later,
	// so the request waits 3.00003 s: the client gains nothing, and loses
	// the server-side round trip.
	res := eval(t, d, "IF IP.SRC == * THEN SPLICE", Options{})
	if u, want := unitByID(t, res, tx.ID), tx.Total; u.Predicted != want {
		t.Errorf("SPLICE: predicted %d, want %d", u.Predicted, want)
	}
	// With FAST SYN the splicer's SYN goes again after 500 ms: the request
	// waits 0.50003 s, 2.5 s less than the client waited.
	res = eval(t, d, "IF IP.SRC == * THEN SPLICE, FAST SYN GAP 500ms", Options{})
	if u, want := unitByID(t, res, tx.ID), tx.Total-2500*ms; u.Predicted != want {
		t.Errorf("SPLICE+FAST SYN: predicted %d, want %d", u.Predicted, want)
	}
}

// page builds a pageview: a container on a fresh connection and objects.
func page(id, client string, start, end int64, container string) *pageview.Pageview {
	return &pageview.Pageview{ID: id, Client: netip.MustParseAddr(client), Class: "default", ContainerID: container,
		Start: start, End: end, Total: end - start}
}

func TestRemoveEmbeds(t *testing.T) {
	var b builder
	c := b.add(spec{id: "c", client: "198.51.100.1", syns: []int64{0}, synacks: []int64{30 * us}, est: 100 * ms,
		rtt: 100 * ms, proc: 300 * ms, transfer: 100 * ms, ctype: "text/html"})
	e1 := b.add(spec{id: "e1", client: "198.51.100.1", syns: []int64{600 * ms}, synacks: []int64{600*ms + 30*us},
		est: 700 * ms, rtt: 100 * ms, proc: 10 * ms, transfer: 400 * ms})
	e2 := b.add(spec{id: "e2", client: "198.51.100.1", conn: c.ConnectionID, est: 600 * ms, rtt: 100 * ms, proc: 10 * ms, transfer: 900 * ms})
	pv := page("pv", "198.51.100.1", c.Start, max(e1.End, e2.End), c.ID)
	d := b.dataset(t, []*pageview.Pageview{pv})
	if !d.Pageviews() || d.Units() != 1 {
		t.Fatalf("want one pageview unit, got %d", d.Units())
	}
	res := eval(t, d, "IF IP.SRC == *.*.*.* THEN REMOVE EMBEDS", Options{})
	u := unitByID(t, res, "pv")
	if u.Measured != pv.Total || u.Predicted != c.End-pv.Start {
		t.Errorf("REMOVE EMBEDS: measured %d predicted %d, want %d and %d", u.Measured, u.Predicted, pv.Total, c.End-pv.Start)
	}
	// No rule: the replay reproduces the measurement exactly.
	if u := unitByID(t, eval(t, d, "", Options{}), "pv"); u.Predicted != pv.Total {
		t.Errorf("no rules: predicted %d, want %d", u.Predicted, pv.Total)
	}
}

func TestRewriteEmbeds(t *testing.T) {
	// A 256 KB object at 200 ms RTT: 180 segments of 1460 B. Slow start from
	// 10 segments sends 10+20+40+80 = 150 in four rounds and the rest in the
	// fifth: the last byte leaves 4 RTT = 800 ms after the first. Rewritten
	// to 64 KB (ratio 0.25): 45 segments, 10+20 then 15 in the third round:
	// 2 RTT = 400 ms. The object ends 400 ms earlier, and so does the page.
	var b builder
	c := b.add(spec{id: "c", client: "198.51.100.1", syns: []int64{0}, synacks: []int64{30 * us}, est: 200 * ms,
		rtt: 200 * ms, proc: 100 * ms, transfer: 10 * ms, ctype: "text/html"})
	big := b.add(spec{id: "big", client: "198.51.100.1", syns: []int64{400 * ms}, synacks: []int64{400*ms + 30*us},
		est: 600 * ms, rtt: 200 * ms, proc: 10 * ms, transfer: 800 * ms, body: 256 * 1024})
	// The next object on the same connection shifts by the same 400 ms.
	after := b.add(spec{id: "after", client: "198.51.100.1", conn: big.ConnectionID, est: 1610 * ms, rtt: 200 * ms, proc: 10 * ms, transfer: 5 * ms, body: 2000})
	pv := page("pv", "198.51.100.1", c.Start, after.End, c.ID)
	d := b.dataset(t, []*pageview.Pageview{pv})
	res := eval(t, d, "IF RT >= 0s OR IP.SRC == * THEN REWRITE EMBEDS ABOVE 100KB RATIO 0.25", Options{})
	if u, want := unitByID(t, res, "pv"), pv.Total-400*ms; u.Predicted != want {
		t.Errorf("REWRITE EMBEDS: predicted %d, want %d", u.Predicted, want)
	}

	// Rate-limited: measured transfer 1.2 s. Two rounds (30 segments, 400 ms)
	// then the window (40 x 1460 B) covers rate x RTT, so the remaining 150
	// segments went at R = 150 x 1460 B / 0.8 s = 273750 B/s. Rewritten: two
	// rounds (400 ms), then 15 segments at R = 80 ms; 1.2 - 0.48 = 0.72 s saved.
	var b2 builder
	slow := b2.add(spec{id: "slow", client: "198.51.100.1", syns: []int64{0}, synacks: []int64{30 * us}, est: 200 * ms,
		rtt: 200 * ms, proc: 10 * ms, transfer: 1200 * ms, body: 256 * 1024, ctype: "image/gif"})
	res = eval(t, b2.dataset(t, nil), "IF IP.SRC == * THEN REWRITE EMBEDS ABOVE 100KB RATIO 0.25", Options{})
	got := unitByID(t, res, slow.ID).Predicted
	if want := slow.Total - 720*ms; math.Abs(float64(got-want)) > float64(ms) {
		t.Errorf("rate-limited REWRITE: predicted %d, want %d (1 ms)", got, want)
	}
}

func TestDropSYNLoadModel(t *testing.T) {
	var b builder
	// H0 and H1 (high, 10.4/16) take 8 s and 4 s and complete at ~4 s:
	// RT_HIGH (median) = 4 s from then on.
	b.add(spec{id: "h0", client: "10.4.0.9", class: "premium", syns: []int64{-4 * sec}, synacks: []int64{-4*sec + 30*us}, est: -3900 * ms,
		rtt: 100 * ms, proc: 7800 * ms})
	h1 := b.add(spec{id: "h1", client: "10.4.0.1", class: "premium", syns: []int64{0}, synacks: []int64{30 * us}, est: 100 * ms,
		rtt: 100 * ms, proc: 3800 * ms, transfer: 0})
	// L1 (low) arrives at 5 s and is dropped at 5, 8 and 14 s: it fails
	// after 3 + 6 + 12 = 21 s.
	l1 := b.add(spec{id: "l1", client: "198.51.100.1", class: "others", syns: []int64{5 * sec}, synacks: []int64{5*sec + 30*us}, est: 5*sec + 50*ms,
		rtt: 100 * ms, proc: 450 * ms})
	// H2 (high) is served at concurrency 2 (with L1) for 1 s. Under the model
	// Proc(c) = 0.5 s x c, losing L1's load halves its processing: -0.5 s.
	h2 := b.add(spec{id: "h2", client: "10.4.0.2", class: "premium", syns: []int64{5 * sec}, synacks: []int64{5*sec + 30*us}, est: 5*sec + 100*ms,
		rtt: 100 * ms, proc: sec})
	d := b.dataset(t, nil)
	// The classic stacks' schedule (3 s doubling) given as an override.
	o := Options{LoadModel: &LoadModel{Slope: float64(500 * ms)}, Priorities: map[string]Priority{"premium": High},
		SYNTimeout: 3 * time.Second}
	res := eval(t, d, "IF IP.SRC != 10.4.*.* AND RT_HIGH > 3.0s THEN DROP SYN", o)
	if u := unitByID(t, res, l1.ID); !u.Failed || u.Predicted != 21*sec {
		t.Errorf("L1: %+v, want failed after 21 s", u)
	}
	if u := unitByID(t, res, h2.ID); u.Predicted != h2.Total-500*ms {
		t.Errorf("H2: predicted %d, want %d", u.Predicted, h2.Total-500*ms)
	}
	if u := unitByID(t, res, h1.ID); u.Predicted != h1.Total {
		t.Errorf("H1 changed: %d != %d", u.Predicted, h1.Total)
	}
	if res.Passes != 2 {
		t.Errorf("passes %d, want 2 (one to find the drops, one to settle)", res.Passes)
	}
	if c := res.Class("others"); c == nil || c.Failed != 1 || c.Dropped != 1 {
		t.Errorf("class summary %+v", c)
	}
	// The Linux schedule (1 s doubling), 3 attempts, the condition clears
	// before L1's second retry? RT_HIGH stays 4 s within the 30 s window, so
	// it fails after 1+2+4 = 7 s.
	o.SYNTimeout = time.Second
	if u := unitByID(t, eval(t, d, "IF IP.SRC != 10.4.*.* AND RT_HIGH > 3.0s THEN DROP SYN", o), l1.ID); u.Predicted != 7*sec {
		t.Errorf("Linux schedule: %+v", u)
	}
	// A short window lets the condition clear: with a 1.5 s window the ~4 s
	// completions are forgotten by 6 s (Linux schedule: first retry at 6 s),
	// so L1 is admitted 1 s late.
	o.Window = 1500 * time.Millisecond
	if u := unitByID(t, eval(t, d, "IF IP.SRC != 10.4.*.* AND RT_HIGH > 3.0s THEN DROP SYN", o), l1.ID); u.Failed || u.Delay != sec {
		t.Errorf("short window: %+v, want admitted after 1 s", u)
	}
}

// slowHighThenLows is a high-class (premium) pageview of 4 s, completing
// at about 4 s, and low-class (others) transactions starting at ats, each
// with a 3 s SYN loss.
func slowHighThenLows(t *testing.T, ats ...int64) (*Dataset, []*reconstruct.Transaction) {
	t.Helper()
	var b builder
	b.add(spec{id: "h", client: "10.4.0.1", class: "premium", syns: []int64{0}, synacks: []int64{30 * us}, est: 100 * ms,
		rtt: 100 * ms, proc: 3800 * ms})
	var lows []*reconstruct.Transaction
	for i, at := range ats {
		lows = append(lows, b.add(spec{id: "l" + strconv.Itoa(i), client: "198.51.100.1", class: "others",
			syns: []int64{at, at + 3*sec}, synacks: []int64{at + 3*sec + 30*us}, est: at + 3*sec + 130*ms, rtt: 100 * ms, proc: 10 * ms}))
	}
	return b.dataset(t, nil), lows
}

func TestSlidingWindowCondition(t *testing.T) {
	// Low-priority transactions before, during and after the 10 s window
	// in which RT_HIGH = 4 s.
	d, lows := slowHighThenLows(t, 1*sec, 5*sec, 20*sec)
	o := Options{Window: 10 * time.Second, Priorities: map[string]Priority{"premium": High, "others": Low}}
	res := eval(t, d, "IF RT_HIGH > 3s AND CLASS == others THEN FAST SYN GAP 500ms", o)
	for i, want := range []int64{0, 2500 * ms, 0} {
		if u := unitByID(t, res, lows[i].ID); u.Measured-u.Predicted != want {
			t.Errorf("low %d: saving %d, want %d", i, u.Measured-u.Predicted, want)
		}
	}
	if c := res.Class("others"); c.Affected != 1 {
		t.Errorf("affected %d, want 1", c.Affected)
	}
	// RT[premium] is the same window by name; the low class's own RT is not.
	res = eval(t, d, "IF RT[premium] > 3s THEN FAST SYN GAP 500ms\nIF RT_LOW > 3s THEN FAST SYN GAP 1s", o)
	if u := unitByID(t, res, lows[1].ID); u.Measured-u.Predicted != 2500*ms {
		t.Errorf("RT[premium]: saving %d", u.Measured-u.Predicted)
	}
}

// A front end driven by rtmon's live measurement sees a pageview only
// when rtmon reports it (its idle gap later): a low unit arriving a second
// after the slow high pageview completed is spared with a report delay of
// 2 s, and one arriving 4 s after is not; the window still keeps the
// pageview for 10 s from its completion.
func TestReportDelayDelaysConditions(t *testing.T) {
	d, lows := slowHighThenLows(t, 5*sec, 8*sec, 20*sec)
	for _, c := range []struct {
		delay    time.Duration
		affected []bool
	}{
		{0, []bool{true, true, false}},
		{2 * time.Second, []bool{false, true, false}},
		{20 * time.Second, []bool{false, false, false}},
	} {
		o := Options{Window: 10 * time.Second, ReportDelay: c.delay, Priorities: map[string]Priority{"premium": High, "others": Low}}
		res := eval(t, d, "IF RT_HIGH > 3s AND CLASS == others THEN FAST SYN GAP 500ms", o)
		for i, want := range c.affected {
			if u := unitByID(t, res, lows[i].ID); (u.Measured != u.Predicted) != want {
				t.Errorf("report delay %v, low %d: measured %v predicted %v, want affected %v", c.delay, i,
					time.Duration(u.Measured), time.Duration(u.Predicted), want)
			}
		}
	}
	if _, err := d.Evaluate(nil, Options{ReportDelay: -time.Second}); err == nil {
		t.Error("a negative report delay was taken")
	}
}

func TestDistribution(t *testing.T) {
	d := NewDistribution([]int64{5, 1, 2, 3, 4, 6, 7, 8, 9, 10}, []int64{0, 3, 6})
	if d.N != 10 || d.P50 != 5 || d.P90 != 9 || d.P99 != 10 || d.Mean != 5 {
		t.Errorf("%+v", d)
	}
	if d.Counts[0] != 2 || d.Counts[1] != 3 || d.Counts[2] != 5 {
		t.Errorf("counts %v", d.Counts)
	}
	e := NewDistribution([]int64{1, 1, 1, 1}, []int64{0, 3, 6})
	if x, err := d.CDFDistance(e); err != nil || x != 0.8 {
		t.Errorf("distance %v %v", x, err)
	}
}

// FuzzEvaluate replays a small mixed dataset under arbitrary rules: no
// panics, no negative times, failures only with DROP SYN.
func FuzzEvaluate(f *testing.F) {
	for _, s := range seedExamples {
		f.Add(s, uint8(0))
	}
	f.Add("IF RT[premium] > 1s OR CLASS == others THEN DROP SYN, SPLICE, REWRITE EMBEDS ABOVE 1KB RATIO 0.1", uint8(3))
	var b builder
	b.add(spec{id: "h0", client: "10.4.0.9", class: "premium", syns: []int64{-4 * sec, -3 * sec}, synacks: []int64{-3*sec + 30*us}, est: -2900 * ms,
		rtt: 100 * ms, proc: 7800 * ms, transfer: 300 * ms, body: 300000})
	c := b.add(spec{id: "c", client: "198.51.100.1", class: "others", syns: []int64{0}, synacks: []int64{30 * us, sec}, est: sec + 100*ms,
		rtt: 100 * ms, proc: 300 * ms, transfer: 100 * ms, ctype: "text/html"})
	e := b.add(spec{id: "e", client: "198.51.100.1", class: "others", conn: c.ConnectionID, est: 1600 * ms, rtt: 100 * ms, proc: 10 * ms,
		transfer: 900 * ms, body: 200000})
	b.add(spec{id: "l", client: "198.51.100.2", class: "others", syns: []int64{5 * sec}, synacks: []int64{5*sec + 30*us}, est: 5*sec + 50*ms,
		rtt: 100 * ms, proc: 450 * ms})
	pvs := []*pageview.Pageview{page("pv", "198.51.100.1", c.Start, e.End, c.ID)}
	f.Fuzz(func(t *testing.T, src string, mode uint8) {
		rs, err := ParseRules(src)
		if err != nil {
			return
		}
		var d *Dataset
		if mode&1 == 0 {
			d, err = NewDataset(b.conns, b.txs, nil)
		} else {
			d, err = NewDataset(b.conns, b.txs, pvs)
		}
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Priorities: map[string]Priority{"premium": High}, Stat: []Stat{Median, Mean}[mode>>1&1],
			SYNAttempts: int(mode>>2&3) + 1, Window: time.Duration(mode>>4+1) * time.Second}
		res, err := d.Evaluate(rs, o)
		if err != nil {
			t.Fatal(err)
		}
		drop := strings.Contains(strings.ToUpper(src), "DROP")
		for _, u := range res.Units {
			if u.Predicted < 0 || (u.Failed && !drop) {
				t.Fatalf("%q: %+v", src, u)
			}
		}
	})
}

// Traffic outside pageviews is replayed too: an API client's requests and
// a load generator's fetches, in a capture that also holds pageviews, are
// units of one transaction each. Their classes count them, FAST SYN helps
// the one that lost a SYN, and REMOVE EMBEDS leaves them alone (they are
// no page's objects).
func TestStandaloneTransactionsAreUnits(t *testing.T) {
	var b builder
	c := b.add(spec{id: "c", client: "198.51.100.1", class: "browsers", syns: []int64{0}, synacks: []int64{30 * us},
		est: 100 * ms, rtt: 100 * ms, proc: 300 * ms, transfer: 100 * ms, ctype: "text/html"})
	e := b.add(spec{id: "e", client: "198.51.100.1", class: "browsers", conn: c.ConnectionID, est: 600 * ms,
		rtt: 100 * ms, proc: 10 * ms, transfer: 400 * ms, ctype: "image/png", body: 200 << 10})
	lost := b.add(spec{id: "api1", client: "203.0.113.9", class: "api", syns: []int64{200 * ms, 1200 * ms},
		synacks: []int64{1200*ms + 30*us}, est: 1200*ms + 30*us + 20*ms, rtt: 20 * ms, proc: 50 * ms, transfer: 1 * ms,
		ctype: "application/json", body: 300 << 10})
	b.add(spec{id: "api2", client: "203.0.113.9", class: "api", conn: lost.ConnectionID, est: 2 * sec, rtt: 20 * ms,
		proc: 40 * ms, transfer: 1 * ms, ctype: "application/json"})
	pv := page("pv", "198.51.100.1", c.Start, e.End, c.ID)
	pv.Class = "browsers"
	e.PageviewID = "pv"
	d := b.dataset(t, []*pageview.Pageview{pv})
	if pvs, txs := d.UnitCounts(); d.Units() != 3 || pvs != 1 || txs != 2 || d.UnitName() != "pageview and transaction" {
		t.Fatalf("units %d (%d pageviews, %d transactions, %q): want 1 pageview and 2 stand-alone transactions",
			d.Units(), pvs, txs, d.UnitName())
	}
	res := eval(t, d, "IF IP.SRC == * THEN FAST SYN GAP 200ms", Options{})
	api, browsers := res.Class("api"), res.Class("browsers")
	if api == nil || browsers == nil || api.Transactions != 2 || api.Pageviews != 0 || browsers.Pageviews != 1 || browsers.Transactions != 0 {
		t.Fatalf("classes %+v: want api with 2 transactions, browsers with 1 pageview", res.Classes)
	}
	if u, want := unitByID(t, res, lost.ID), lost.Total-800*ms; u.Predicted != want || api.Affected != 2 {
		t.Errorf("FAST SYN on a stand-alone transaction: predicted %v, want %v (affected %d)",
			time.Duration(u.Predicted), time.Duration(want), api.Affected)
	}
	res = eval(t, d, "IF IP.SRC == * THEN REWRITE EMBEDS ABOVE 100KB RATIO 0.25", Options{})
	if u := unitByID(t, res, lost.ID); u.Predicted != lost.Total {
		t.Errorf("REWRITE EMBEDS changed a stand-alone transaction: %v != %v", time.Duration(u.Predicted), time.Duration(lost.Total))
	}
	if u := unitByID(t, res, "pv"); u.Predicted >= pv.Total {
		t.Errorf("REWRITE EMBEDS left the page's 200 KB image: %v, measured %v", time.Duration(u.Predicted), time.Duration(pv.Total))
	}
}

package whatif

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
)

// prefork is an overloaded server built independently of the queue model,
// as Linux and a pre-forking server behave: a connection completes its
// handshake a client RTT after its SYN is accepted (each client its own
// RTT) and then waits in the accept queue until one of the workers takes
// it. Linux keeps two queues: a SYN is dropped while the accept queue
// holds more than backlog connections, or while backlog handshakes are
// half-open; the client sends it again after 1 s, doubling, giving up
// after three SYNs. Each connection carries one request whose service time
// is its own (log-normal around its URL's mean). The queue model knows
// none of this: it fits one pool and one backlog shared by half-open and
// waiting connections from the records.
type prefork struct {
	workers, backlog int
	// dropLowAbove: an appliance in front drops the low class's SYNs while
	// the median response time of the high class's requests completed in
	// the last 30 s is above it (RT_HIGH > dropLowAbove THEN DROP SYN).
	dropLowAbove time.Duration
	// splice: a delayed-binding splicer in front answers every client
	// handshake at once and connects to the server when the request
	// comes (its SYN a LAN round trip of 200 us half-open, retried after
	// 1 s, doubling, as connect(2) does).
	splice bool
	// limbo: a handshake completing while the accept queue is full is
	// dropped, as Linux drops it: the connection stays half-open, the
	// client (connected as far as it knows) resends its request on its
	// retransmission timer (RTT + max(2 RTT, 200 ms), doubling) until one
	// copy finds room, and only that copy is acknowledged.
	limbo bool
	// syncookies: Linux's default (tcp_syncookies 1): a full SYN queue
	// answers with a cookie, so only a full accept queue drops a SYN.
	syncookies bool
	// holding: a worker writes the whole response itself and stays busy
	// for its transfer (a blocking server with a small send buffer).
	holding bool
}

// dropsSYN: the kernel drops a SYN arriving now.
func (p prefork) dropsSYN(acceptQ, halfOpen int) bool {
	return acceptQ > p.backlog || !p.syncookies && halfOpen >= p.backlog
}

type pfArrival struct {
	at      int64
	class   string
	client  netip.Addr
	url     string
	service int64
	rtt     int64
	// transfer: the response's first byte to its last (a large one takes
	// round trips).
	transfer int64
}

// pfEvent: a SYN (attempt n), a handshake completing, a service ending.
type pfEvent struct {
	t    int64
	kind int // 0 done, 1 established, 2 SYN
	i, n int
}
type pfHeap []pfEvent

func (h pfHeap) Len() int { return len(h) }
func (h pfHeap) Less(a, b int) bool {
	if h[a].t != h[b].t {
		return h[a].t < h[b].t
	}
	return h[a].kind < h[b].kind
}
func (h pfHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *pfHeap) Push(x any)   { *h = append(*h, x.(pfEvent)) }
func (h *pfHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// run serves the arrivals and returns the records a capture at the server
// would give, and each arrival's response time (-1: the client gave up).
func (p prefork) run(arr []pfArrival) ([]*reconstruct.Connection, []*reconstruct.Transaction, []int64) {
	var h pfHeap
	syns := make([][]int64, len(arr))
	accepted, established, acked := make([]int64, len(arr)), make([]int64, len(arr)), make([]int64, len(arr))
	total := make([]int64, len(arr))
	var conns []*reconstruct.Connection
	var txs []*reconstruct.Transaction
	for i, a := range arr {
		heap.Push(&h, pfEvent{t: a.at, kind: 2, i: i})
		total[i] = -1
	}
	var acceptQ []int
	halfOpen, busy := 0, 0
	start := func(i int, t int64) {
		busy++
		heap.Push(&h, pfEvent{t: t + arr[i].service, kind: 0, i: i})
	}
	serviceStart := make([]int64, len(arr))
	var highDone []pfDone // the appliance's view: high-class completions
	for h.Len() > 0 {
		ev := heap.Pop(&h).(pfEvent)
		i := ev.i
		switch ev.kind {
		case 2: // SYN
			if p.dropLowAbove > 0 && arr[i].class == "low" && medianSince(highDone, ev.t-int64(30*time.Second)) > int64(p.dropLowAbove) {
				// The appliance drops it before the server sees it.
				if ev.n+1 < 3 {
					heap.Push(&h, pfEvent{t: arr[i].at + int64(time.Second)*(1<<(ev.n+1)-1), kind: 2, i: i, n: ev.n + 1})
				}
				continue
			}
			syns[i] = append(syns[i], ev.t)
			if p.splice {
				// The splicer's handshake with the client, then its own
				// SYN to the server with the request.
				accepted[i] = ev.t
				heap.Push(&h, pfEvent{t: ev.t + arr[i].rtt, kind: 3, i: i})
				continue
			}
			if p.dropsSYN(len(acceptQ), halfOpen) {
				if ev.n+1 < 3 {
					heap.Push(&h, pfEvent{t: arr[i].at + int64(time.Second)*(1<<(ev.n+1)-1), kind: 2, i: i, n: ev.n + 1})
				} else {
					// The client gives up: the capture holds its SYNs only.
					conns = append(conns, &reconstruct.Connection{ID: fmt.Sprintf("c%d", i), Client: arr[i].client,
						ClientPort: uint16(10000 + i%50000), Server: netip.MustParseAddr("203.0.113.2"), ServerPort: 80,
						SYNTimes: syns[i], SYNLosses: len(syns[i]) - 1, Class: arr[i].class})
				}
				continue
			}
			accepted[i] = ev.t
			halfOpen++
			heap.Push(&h, pfEvent{t: ev.t + arr[i].rtt, kind: 1, i: i})
		case 3: // the splicer's SYN to the server
			if p.dropsSYN(len(acceptQ), halfOpen) {
				heap.Push(&h, pfEvent{t: ev.t + int64(time.Second)<<ev.n, kind: 3, i: i, n: ev.n + 1})
				continue
			}
			halfOpen++
			heap.Push(&h, pfEvent{t: ev.t + 200_000, kind: 1, i: i})
		case 1, 4: // handshake ACK and request; 4: the request resent
			if ev.kind == 1 {
				established[i] = ev.t
			}
			if p.limbo && len(acceptQ) > p.backlog {
				rto := arr[i].rtt + max(2*arr[i].rtt, int64(200*time.Millisecond))
				heap.Push(&h, pfEvent{t: ev.t + rto<<ev.n, kind: 4, i: i, n: ev.n + 1})
				continue
			}
			halfOpen--
			acked[i] = ev.t
			if busy < p.workers {
				serviceStart[i] = ev.t
				start(i, ev.t)
			} else {
				acceptQ = append(acceptQ, i)
			}
		case 5: // a holding worker is done with the transfer
			busy--
			if len(acceptQ) > 0 {
				j := acceptQ[0]
				acceptQ = acceptQ[1:]
				serviceStart[j] = ev.t
				start(j, ev.t)
			}
		case 0: // response's first byte
			a := arr[i]
			rtt := a.rtt
			last := ev.t + max(time.Millisecond.Nanoseconds(), a.transfer)
			end := last + rtt/2
			s0 := syns[i][0]
			c := &reconstruct.Connection{ID: fmt.Sprintf("c%d", i), Client: a.client, ClientPort: uint16(10000 + i%50000),
				Server: netip.MustParseAddr("203.0.113.2"), ServerPort: 80,
				SYNTimes: syns[i], SYNACKTimes: []int64{accepted[i]}, Established: established[i],
				RTTClient: rtt, Class: a.class, Transactions: 1}
			t := &reconstruct.Transaction{ID: fmt.Sprintf("t%d", i), ConnectionID: c.ID, Client: a.client,
				ClientPort: c.ClientPort, Server: c.Server, ServerPort: 80, Index: 0, Method: "GET", URL: a.url, Status: 200,
				Start: s0, End: end, RequestFirst: established[i], RequestLast: established[i], ResponseFirst: ev.t,
				RequestAcked: acked[i], ResponseLast: last, Tconn: established[i] - s0,
				Tserver: ev.t - established[i], Ttransfer: end - ev.t, Total: end - s0, RTTClient: rtt, Class: a.class,
				ResponseBytes: 2000, BodyBytes: 1800, ContentType: "application/json"}
			conns, txs = append(conns, c), append(txs, t)
			// As the client perceived it: from its first SYN, also one
			// an appliance in front dropped.
			total[i] = end - a.at
			if a.class == "high" {
				highDone = append(highDone, pfDone{end, t.Total})
			}
			if p.holding && a.transfer > 0 {
				heap.Push(&h, pfEvent{t: last, kind: 5, i: i})
				continue
			}
			busy--
			if len(acceptQ) > 0 {
				j := acceptQ[0]
				acceptQ = acceptQ[1:]
				serviceStart[j] = ev.t
				start(j, ev.t)
			}
		}
	}
	return conns, txs, total
}

// withoutLowClass is the high class's response times on the server really
// run without the low class's load: what DROP SYN for the low class
// should predict.
func (p prefork) withoutLowClass(arr []pfArrival) Distribution {
	var highOnly []pfArrival
	for _, a := range arr {
		if a.class == "high" {
			highOnly = append(highOnly, a)
		}
	}
	_, _, relief := p.run(highOnly)
	return NewDistribution(classTimes(highOnly, relief, "high"), nil)
}

// pfDone is a completed request as the appliance saw it.
type pfDone struct{ at, total int64 }

// medianSince is the lower median of the totals completed at or after
// from (0 when none: no evidence, no action).
func medianSince(done []pfDone, from int64) int64 {
	var v []int64
	for k := len(done) - 1; k >= 0 && done[k].at >= from; k-- {
		v = append(v, done[k].total)
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[(len(v)-1)/2]
}

// pfWorkload: a high class of API clients (25/s) and a low class of load
// generators (lowRate/s), Poisson arrivals, four URLs with their own mean
// service times (32 ms on average: the four workers do about 125/s).
func pfWorkload(seed uint64, dur time.Duration, lowRate float64, rttBase time.Duration) []pfArrival {
	r := rand.New(rand.NewPCG(seed, 7))
	urls := []struct {
		path string
		mean float64 // ms
	}{{"/api/items", 25}, {"/api/search?q=x", 60}, {"/api/cart", 35}, {"/static/app.js", 8}}
	var arr []pfArrival
	for _, c := range []struct {
		class string
		rate  float64 // per second
		net   string
	}{{"high", 25, "10.4.0.%d"}, {"low", lowRate, "10.9.0.%d"}} {
		for t := 0.0; ; {
			t += r.ExpFloat64() / c.rate
			if t > dur.Seconds() {
				break
			}
			u := urls[r.IntN(len(urls))]
			svc := u.mean * math.Exp(0.5*r.NormFloat64()-0.125) // log-normal, mean u.mean
			host := 1 + r.IntN(200)
			arr = append(arr, pfArrival{at: int64(t * 1e9), class: c.class, client: netip.MustParseAddr(fmt.Sprintf(c.net, host)),
				url: u.path, service: int64(svc * 1e6), rtt: int64(rttBase) + int64(host%50)*1e6})
			if u.path == "/static/app.js" {
				// A large script: three round trips of transfer.
				arr[len(arr)-1].transfer = 3 * arr[len(arr)-1].rtt
			}
		}
	}
	slices.SortFunc(arr, func(a, b pfArrival) int { return int(a.at - b.at) })
	return arr
}

func classTimes(arr []pfArrival, total []int64, class string) []int64 {
	var v []int64
	for i, a := range arr {
		if a.class == class && total[i] >= 0 {
			v = append(v, total[i])
		}
	}
	return v
}

// TestQueueModelPredictsDropSYNRelief: on an overloaded server whose SYNs
// of every class are dropped at a full accept queue, the fitted queue
// model reproduces the capture (null replay) and predicts what dropping
// the low class's SYNs at the front end does for the high class, against
// the same server really run without the low class's load. The linear
// model, which keeps every measured SYN loss, cannot.
func TestQueueModelPredictsDropSYNRelief(t *testing.T) {
	srv := prefork{workers: 4, backlog: 8}
	arr := pfWorkload(1, 90*time.Second, 100, 10*time.Millisecond)
	conns, txs, _ := srv.run(arr)
	truth := srv.withoutLowClass(arr)

	ds, err := NewDataset(conns, txs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tx := range txs {
		checkTxInvariants(t, tx)
	}
	opts := Options{Priorities: map[string]Priority{"high": High}, ServerModel: ServerQueue}
	m, err := ds.QueueModel(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fitted: %d workers, backlog %d, %.2f%% unexplained, SYN losses measured %d replayed %d, worst %.1f%%, notes %v",
		m.Workers, m.Backlog, 100*m.Unexplained, m.SYNLossesMeasured, m.SYNLossesReplayed, 100*m.Worst, m.Notes)
	if m.SYNLossesMeasured < 50 {
		t.Fatalf("the workload did not overload the server: %d SYN losses", m.SYNLossesMeasured)
	}
	for _, f := range m.Fit {
		t.Logf("fit %s: server p50 %v/%v p90 %v/%v, unit p50 %v/%v p90 %v/%v, SYN losses %v, band %.1f%%/%.1f%%", f.Class,
			time.Duration(f.ServerP50[0]), time.Duration(f.ServerP50[1]), time.Duration(f.ServerP90[0]), time.Duration(f.ServerP90[1]),
			time.Duration(f.UnitP50[0]), time.Duration(f.UnitP50[1]), time.Duration(f.UnitP90[0]), time.Duration(f.UnitP90[1]),
			f.SYNLosses, 100*f.Band[0], 100*f.Band[1])
		if f.Band[0] > 0.10 || f.Band[1] > 0.10 {
			t.Errorf("class %s: the null replay is off by %.1f%% (median), %.1f%% (p90); want within 10%%", f.Class, 100*f.Band[0], 100*f.Band[1])
		}
		if lo, hi := 0.8*float64(f.SYNLosses[0]), 1.2*float64(f.SYNLosses[0]); float64(f.SYNLosses[1]) < lo || float64(f.SYNLosses[1]) > hi {
			t.Errorf("class %s: null replay dropped %d SYNs, the capture shows %d (want within 20%%)", f.Class, f.SYNLosses[1], f.SYNLosses[0])
		}
	}
	rules, err := ParseRules("IF CLASS == low THEN DROP SYN")
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []ServerModel{ServerQueue, ServerLinear} {
		o := opts
		o.ServerModel = model
		res, err := ds.Evaluate(rules, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range res.Units {
			if u.Predicted < 0 {
				t.Fatalf("%s: unit %s predicted %d < 0", model, u.ID, u.Predicted)
			}
		}
		h := res.Class("high")
		e50, e90 := relErr(h.Predicted.P50, truth.P50), relErr(h.Predicted.P90, truth.P90)
		t.Logf("%s model: high class measured p50 %v p90 %v; predicted p50 %v p90 %v; really without the low class p50 %v p90 %v (error %.1f%%, %.1f%%)",
			model, time.Duration(h.Measured.P50), time.Duration(h.Measured.P90), time.Duration(h.Predicted.P50), time.Duration(h.Predicted.P90),
			time.Duration(truth.P50), time.Duration(truth.P90), 100*e50, 100*e90)
		if model == ServerQueue && (e50 > 0.10 || e90 > 0.10) {
			t.Errorf("queue model: high class predicted p50 %v p90 %v, really %v %v: want within 10%%",
				time.Duration(h.Predicted.P50), time.Duration(h.Predicted.P90), time.Duration(truth.P50), time.Duration(truth.P90))
		}
		if model == ServerLinear && e90 < 0.10 {
			t.Errorf("linear model got the relief right (p90 error %.1f%%): the workload does not need the queue model", 100*e90)
		}
		if res.ServerModel != model {
			t.Errorf("result says server model %q, want %q", res.ServerModel, model)
		}
	}
}

// checkTxInvariants: no negative component, End >= Start, the parts sum.
func checkTxInvariants(t *testing.T, x *reconstruct.Transaction) {
	t.Helper()
	if x.Tconn < 0 || x.Tserver < 0 || x.Ttransfer < 0 || x.End < x.Start || x.Total != x.Tconn+x.Trequest+x.Tserver+x.Ttransfer {
		t.Fatalf("transaction %s breaks the invariants: %+v", x.ID, x)
	}
}

// TestQueueModelPredictsSplice: the same overloaded server behind a real
// delayed-binding splicer (client handshakes never wait for the server;
// the splicer's own SYNs hold the backlog for a LAN round trip, not a
// client's). The linear model assumes the server accepts the splicer when
// it accepted the client; the queue model replays the backlog.
func TestQueueModelPredictsSplice(t *testing.T) {
	srv := prefork{workers: 4, backlog: 8}
	// Far clients (150-200 ms) on a server with idle workers (70% busy):
	// their half-open handshakes fill the backlog, so SYNs drop although
	// the workers could serve them. The splicer holds a slot for a LAN
	// round trip only.
	arr := pfWorkload(2, 90*time.Second, 60, 150*time.Millisecond)
	conns, txs, _ := srv.run(arr)
	spliced := srv
	spliced.splice = true
	_, _, truthTotals := spliced.run(arr)
	ds, err := NewDataset(conns, txs, nil)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := ParseRules("IF IP.SRC == * THEN SPLICE")
	if err != nil {
		t.Fatal(err)
	}
	res, err := ds.Evaluate(rules, Options{Priorities: map[string]Priority{"high": High}, ServerModel: ServerQueue})
	if err != nil {
		t.Fatal(err)
	}
	if q := res.Queue; q != nil {
		t.Logf("fitted: %d workers, backlog %d, SYN losses measured %d replayed %d, worst %.1f%%, %d clients gave up", q.Workers, q.Backlog,
			q.SYNLossesMeasured, q.SYNLossesReplayed, 100*q.Worst, len(ds.ghosts))
	}
	for _, c := range res.Classes {
		t.Logf("class %s: affected %d dropped %d failed %d", c.Class, c.Affected, c.Dropped, c.Failed)
	}
	lin, err := ds.Evaluate(rules, Options{Priorities: map[string]Priority{"high": High}})
	if err != nil {
		t.Fatal(err)
	}
	for _, class := range []string{"high", "low"} {
		truth := NewDistribution(classTimes(arr, truthTotals, class), nil)
		c, l := res.Class(class), lin.Class(class)
		e50, e90 := relErr(c.Predicted.P50, truth.P50), relErr(c.Predicted.P90, truth.P90)
		t.Logf("%s: measured p50 %v p90 %v; spliced really p50 %v p90 %v; queue model %v %v (error %.1f%%, %.1f%%); linear %v %v",
			class, time.Duration(c.Measured.P50), time.Duration(c.Measured.P90), time.Duration(truth.P50), time.Duration(truth.P90),
			time.Duration(c.Predicted.P50), time.Duration(c.Predicted.P90), 100*e50, 100*e90,
			time.Duration(l.Predicted.P50), time.Duration(l.Predicted.P90))
		if l90 := relErr(l.Predicted.P90, truth.P90); l90 < 0.10 {
			t.Errorf("%s: the linear model got SPLICE right (p90 off by %.1f%%): the workload does not need the queue model", class, 100*l90)
		}
		if e50 > 0.10 || e90 > 0.10 {
			t.Errorf("%s: queue model predicts p50 %v p90 %v under SPLICE, really %v %v: want within 10%%", class,
				time.Duration(c.Predicted.P50), time.Duration(c.Predicted.P90), time.Duration(truth.P50), time.Duration(truth.P90))
		}
	}
}

// TestQueueModelConditionalDropSYN: DROP SYN for the low class only while
// the high class's median response time is above 100 ms switches on under
// overload, off once the high class is fast again, on again as the low
// class's load returns. An appliance doing exactly that in front of the
// independent server gives the truth; the queue model's replay judges the
// same condition on its own predicted times, in one event loop with the
// server. The low requests that got through count their waits at the
// front end and at the server as one client's attempts.
func TestQueueModelConditionalDropSYN(t *testing.T) {
	srv := prefork{workers: 4, backlog: 8}
	arr := pfWorkload(3, 120*time.Second, 100, 10*time.Millisecond)
	conns, txs, measuredTotals := srv.run(arr)
	applied := srv
	applied.dropLowAbove = 100 * time.Millisecond
	_, _, truthTotals := applied.run(arr)
	ds, err := NewDataset(conns, txs, nil)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := ParseRules("IF CLASS == low AND RT_HIGH > 100ms THEN DROP SYN")
	if err != nil {
		t.Fatal(err)
	}
	res, err := ds.Evaluate(rules, Options{Priorities: map[string]Priority{"high": High}, ServerModel: ServerQueue})
	if err != nil {
		t.Fatal(err)
	}
	truthLow := classTimes(arr, truthTotals, "low")
	lowServed, lowMeasured := len(truthLow), len(classTimes(arr, measuredTotals, "low"))
	for _, class := range []string{"high", "low"} {
		truth := NewDistribution(classTimes(arr, truthTotals, class), nil)
		c := res.Class(class)
		e50, e90 := relErr(c.Predicted.P50, truth.P50), relErr(c.Predicted.P90, truth.P90)
		t.Logf("%s: measured p50 %v p90 %v; with the conditional drop really p50 %v p90 %v (%d served); predicted %v %v (error %.1f%%, %.1f%%), %d dropped, %d failed",
			class, time.Duration(c.Measured.P50), time.Duration(c.Measured.P90), time.Duration(truth.P50), time.Duration(truth.P90), truth.N,
			time.Duration(c.Predicted.P50), time.Duration(c.Predicted.P90), 100*e50, 100*e90, c.Dropped, c.Failed)
		if class == "low" {
			// Served low requests only: the truth has no time for the
			// clients that gave up.
			var v []int64
			for _, u := range res.Units {
				if u.Class == "low" && !u.Failed {
					v = append(v, u.Predicted)
				}
			}
			pl := NewDistribution(v, nil)
			t.Logf("low served: really %d, p50 %v p90 %v; predicted %d, p50 %v p90 %v", truth.N, time.Duration(truth.P50),
				time.Duration(truth.P90), pl.N, time.Duration(pl.P50), time.Duration(pl.P90))
			if relErr(pl.P50, truth.P50) > 0.10 || relErr(pl.P90, truth.P90) > 0.10 {
				t.Errorf("low requests served: predicted p50 %v p90 %v, really %v %v: want within 10%%",
					time.Duration(pl.P50), time.Duration(pl.P90), time.Duration(truth.P50), time.Duration(truth.P90))
			}
		}
		if class == "high" && (e50 > 0.10 || e90 > 0.10) {
			t.Errorf("high: predicted p50 %v p90 %v under the conditional drop, really %v %v: want within 10%%",
				time.Duration(c.Predicted.P50), time.Duration(c.Predicted.P90), time.Duration(truth.P50), time.Duration(truth.P90))
		}
	}
	// The condition switched: some low requests were let through, not all.
	low := res.Class("low")
	if lowServed == 0 || lowServed >= lowMeasured || low.Failed == 0 || int64(low.Failed) >= low.Measured.N {
		t.Errorf("the condition did not switch on and off: really %d of %d low requests served; predicted %d of %d failed",
			lowServed, lowMeasured, low.Failed, low.Measured.N)
	}
}

// TestQueueModelRanksConcurrently: Rank replays candidates on several
// cores over one fitted model; under -race this checks they share it
// read-only, and every time they agree with one replay at a time.
func TestQueueModelRanksConcurrently(t *testing.T) {
	arr := pfWorkload(4, 30*time.Second, 100, 10*time.Millisecond)
	conns, txs, _ := prefork{workers: 4, backlog: 8}.run(arr)
	ds, err := NewDataset(conns, txs, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Priorities: map[string]Priority{"high": High}, ServerModel: ServerQueue}
	var cands [][]Rule
	for _, src := range []string{"IF CLASS == low THEN DROP SYN", "IF IP.SRC == * THEN SPLICE", "IF CLASS == low AND RT_HIGH > 100ms THEN DROP SYN",
		"IF IP.SRC == * THEN FAST SYN GAP 200ms"} {
		rs, err := ParseRules(src)
		if err != nil {
			t.Fatal(err)
		}
		cands = append(cands, rs)
	}
	ranked, err := ds.Rank(cands, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ranked {
		rs, _ := ParseRules(strings.Join(r.Rules, "\n"))
		res, err := ds.Evaluate(rs, opts)
		if err != nil {
			t.Fatal(err)
		}
		if c := res.Class(r.Class); c.Measured.Mean-c.Predicted.Mean != r.Gain {
			t.Errorf("%s for %s: ranked gain %d, a lone replay %d", r.Rules, r.Class, r.Gain, c.Measured.Mean-c.Predicted.Mean)
		}
	}
}

// TestQueueModelFitsAcceptQueueLimbo: on a server that, as Linux does,
// drops a handshake completing on a full accept queue, connections wait
// half-open until a resent request finds room, so the order in which the
// workers take them is not the order of their handshakes. The server's
// ACK of each request (RequestAcked) says when it was taken: with it the
// fit finds the server's pool and predicts DROP SYN's relief, the replay
// letting a half-open connection's resent request in as soon as the
// replayed accept queue has room; without it the fit takes the pool for
// more than twice its size (seen: 9 workers for 4).
func TestQueueModelFitsAcceptQueueLimbo(t *testing.T) {
	srv := prefork{workers: 4, backlog: 8, limbo: true}
	arr := pfWorkload(3, 90*time.Second, 100, 10*time.Millisecond)
	conns, txs, _ := srv.run(arr)
	limbo := 0
	for _, tx := range txs {
		checkTxInvariants(t, tx)
		if tx.RequestAcked-tx.RequestLast > acceptLimbo {
			limbo++
		}
	}
	if limbo < 50 {
		t.Fatalf("only %d of %d connections waited half-open: the workload does not test the limbo", limbo, len(txs))
	}
	truth := srv.withoutLowClass(arr)
	opts := Options{Priorities: map[string]Priority{"high": High}, ServerModel: ServerQueue}
	rules, err := ParseRules("IF CLASS == low THEN DROP SYN")
	if err != nil {
		t.Fatal(err)
	}
	fit := func(txs []*reconstruct.Transaction) (QueueModel, ClassResult) {
		ds, err := NewDataset(conns, txs, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ds.QueueModel(opts)
		if err != nil {
			t.Fatal(err)
		}
		res, err := ds.Evaluate(rules, opts)
		if err != nil {
			t.Fatal(err)
		}
		return m, *res.Class("high")
	}
	m, h := fit(txs)
	t.Logf("%d of %d connections half-open until a resend; fitted %d workers, backlog %d, %.1f%% unexplained, notes %v",
		limbo, len(txs), m.Workers, m.Backlog, 100*m.Unexplained, m.Notes)
	for _, f := range m.Fit {
		t.Logf("fit %s: band %.1f%%/%.1f%%, SYN losses %v", f.Class, 100*f.Band[0], 100*f.Band[1], f.SYNLosses)
		if f.Band[0] > 0.10 || f.Band[1] > 0.10 {
			t.Errorf("class %s: the null replay is off by %.1f%% (median), %.1f%% (p90); want within 10%%", f.Class, 100*f.Band[0], 100*f.Band[1])
		}
	}
	e50, e90 := relErr(h.Predicted.P50, truth.P50), relErr(h.Predicted.P90, truth.P90)
	t.Logf("high class measured p50 %v p90 %v; predicted without the low class p50 %v p90 %v; really %v %v (error %.1f%%, %.1f%%)",
		time.Duration(h.Measured.P50), time.Duration(h.Measured.P90), time.Duration(h.Predicted.P50), time.Duration(h.Predicted.P90),
		time.Duration(truth.P50), time.Duration(truth.P90), 100*e50, 100*e90)
	if e50 > 0.10 || e90 > 0.10 {
		t.Errorf("high class predicted p50 %v p90 %v, really %v %v: want within 10%%",
			time.Duration(h.Predicted.P50), time.Duration(h.Predicted.P90), time.Duration(truth.P50), time.Duration(truth.P90))
	}
	// The same records without the server's ACKs, as a store written before
	// schema version 4 holds them.
	var blind []*reconstruct.Transaction
	for _, tx := range txs {
		c := *tx
		c.RequestAcked = 0
		blind = append(blind, &c)
	}
	mb, _ := fit(blind)
	t.Logf("without RequestAcked: %d workers, %.1f%% unexplained", mb.Workers, 100*mb.Unexplained)
	if m.Workers != srv.workers {
		t.Errorf("fitted %d workers, the server has %d", m.Workers, srv.workers)
	}
	if m.HalfOpen != limbo {
		t.Errorf("model counts %d connections left half-open, the server left %d", m.HalfOpen, limbo)
	}
	if mb.HalfOpen != 0 || !slices.ContainsFunc(mb.Notes, func(n string) bool { return strings.Contains(n, "acknowledged") }) {
		t.Errorf("records without the server's ACKs: %d half-open, notes %q; want 0 and a note saying so", mb.HalfOpen, mb.Notes)
	}
	if mb.Workers == srv.workers && mb.Unexplained <= m.Unexplained {
		t.Errorf("the server's ACKs did not help the fit: %d workers either way, %.1f%% unexplained with them, %.1f%% without",
			m.Workers, 100*m.Unexplained, 100*mb.Unexplained)
	}
}

// TestQueueModelFitsSYNCookieServer: the server as Linux runs it by
// default, with SYN cookies: half-open handshakes never fill the backlog,
// only connections waiting in the accept queue do. The fit counts the
// backlog that way and still predicts DROP SYN's relief.
func TestQueueModelFitsSYNCookieServer(t *testing.T) {
	srv := prefork{workers: 4, backlog: 8, limbo: true, syncookies: true}
	arr := pfWorkload(5, 90*time.Second, 100, 10*time.Millisecond)
	conns, txs, _ := srv.run(arr)
	for _, tx := range txs {
		checkTxInvariants(t, tx)
	}
	truth := srv.withoutLowClass(arr)
	ds, err := NewDataset(conns, txs, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Priorities: map[string]Priority{"high": High}, ServerModel: ServerQueue}
	m, err := ds.QueueModel(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fitted %d workers, backlog %d (half-open slots %v), SYN losses %d measured %d replayed, worst %.1f%%, notes %v",
		m.Workers, m.Backlog, m.HalfOpenSlots, m.SYNLossesMeasured, m.SYNLossesReplayed, 100*m.Worst, m.Notes)
	if m.SYNLossesMeasured < 50 {
		t.Fatalf("the workload did not overload the server: %d SYN losses", m.SYNLossesMeasured)
	}
	if m.HalfOpenSlots || m.Backlog == 0 {
		t.Errorf("fitted backlog %d with half-open slots %v; want the accept queue alone, as the server counts it", m.Backlog, m.HalfOpenSlots)
	}
	rules, err := ParseRules("IF CLASS == low THEN DROP SYN")
	if err != nil {
		t.Fatal(err)
	}
	res, err := ds.Evaluate(rules, opts)
	if err != nil {
		t.Fatal(err)
	}
	h := res.Class("high")
	e50, e90 := relErr(h.Predicted.P50, truth.P50), relErr(h.Predicted.P90, truth.P90)
	t.Logf("high class measured p50 %v p90 %v; predicted without the low class p50 %v p90 %v; really %v %v (error %.1f%%, %.1f%%)",
		time.Duration(h.Measured.P50), time.Duration(h.Measured.P90), time.Duration(h.Predicted.P50), time.Duration(h.Predicted.P90),
		time.Duration(truth.P50), time.Duration(truth.P90), 100*e50, 100*e90)
	if e50 > 0.10 || e90 > 0.10 {
		t.Errorf("high class predicted p50 %v p90 %v, really %v %v: want within 10%%",
			time.Duration(h.Predicted.P50), time.Duration(h.Predicted.P90), time.Duration(truth.P50), time.Duration(truth.P90))
	}
}

// TestQueueModelFitsHoldingServer: a server whose workers write each
// response themselves and stay busy through a large response's transfer
// (a blocking server with a small send buffer). Fitting workers that come
// free at the first byte takes the hold for queueing and needs a larger
// pool; the fit finds the server's pool by holding them and predicts
// DROP SYN's relief.
func TestQueueModelFitsHoldingServer(t *testing.T) {
	srv := prefork{workers: 4, backlog: 8, limbo: true, syncookies: true, holding: true}
	arr := pfWorkload(9, 90*time.Second, 80, 10*time.Millisecond)
	conns, txs, _ := srv.run(arr)
	for _, tx := range txs {
		checkTxInvariants(t, tx)
	}
	truth := srv.withoutLowClass(arr)
	ds, err := NewDataset(conns, txs, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Priorities: map[string]Priority{"high": High}, ServerModel: ServerQueue}
	m, err := ds.QueueModel(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fitted %d workers (holding %v), backlog %d, SYN losses %d measured %d replayed, worst %.1f%%, notes %v",
		m.Workers, m.HoldsTransfer, m.Backlog, m.SYNLossesMeasured, m.SYNLossesReplayed, 100*m.Worst, m.Notes)
	if m.SYNLossesMeasured < 50 {
		t.Fatalf("the workload did not overload the server: %d SYN losses", m.SYNLossesMeasured)
	}
	if !m.HoldsTransfer || m.Workers != srv.workers {
		t.Errorf("fitted %d workers holding %v; want the server's %d, holding", m.Workers, m.HoldsTransfer, srv.workers)
	}
	rules, err := ParseRules("IF CLASS == low THEN DROP SYN")
	if err != nil {
		t.Fatal(err)
	}
	res, err := ds.Evaluate(rules, opts)
	if err != nil {
		t.Fatal(err)
	}
	h := res.Class("high")
	e50, e90 := relErr(h.Predicted.P50, truth.P50), relErr(h.Predicted.P90, truth.P90)
	t.Logf("high class measured p50 %v p90 %v; predicted without the low class p50 %v p90 %v; really %v %v (error %.1f%%, %.1f%%)",
		time.Duration(h.Measured.P50), time.Duration(h.Measured.P90), time.Duration(h.Predicted.P50), time.Duration(h.Predicted.P90),
		time.Duration(truth.P50), time.Duration(truth.P90), 100*e50, 100*e90)
	if e50 > 0.10 || e90 > 0.10 {
		t.Errorf("high class predicted p50 %v p90 %v, really %v %v: want within 10%%",
			time.Duration(h.Predicted.P50), time.Duration(h.Predicted.P90), time.Duration(truth.P50), time.Duration(truth.P90))
	}
}

package whatif

// The synthetic overloaded server the queue model is judged against,
// built apart from the model: a pre-forking server behind Linux's listen
// queues, with the options of the tests in queue_test.go.

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
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
	// client (connected as far as it knows) resends its request until one
	// copy finds room, and only that copy is acknowledged. It resends on
	// the timers of the round trip it measured on the handshake (with
	// timestamps, from the SYN the SYN/ACK echoes: an appliance's copy of
	// its first SYN makes the whole wait a round trip): a tail-loss probe
	// at 2 RTT + 200 ms unless the retransmission timeout, RTT + max(2
	// RTT, 200 ms), is sooner, then that timeout from the probe, doubling.
	limbo bool
	// syncookies: Linux's default (tcp_syncookies 1): a full SYN queue
	// answers with a cookie, so only a full accept queue drops a SYN.
	syncookies bool
	// holding: a worker writes the whole response itself and stays busy
	// for its transfer (a blocking server with a small send buffer).
	holding bool
	// fastSYN: an appliance in front sends a client's SYN again every
	// fastSYN until the server answers or the client gives up (7 s after
	// its first SYN); the capture behind it sees the copies.
	fastSYN time.Duration
}

// pfGiveUp is when a client that sent three SYNs (1 s, doubling) gives up.
const pfGiveUp = int64(7 * time.Second)

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
	// outside: answered beside the worker pool (a cache in front of the
	// workers) the moment it comes, taking no worker.
	outside bool
}

// pfEvent: a SYN (attempt n), a handshake completing, a service ending;
// kinds in run.
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
	// free: a worker came free at t and takes the next accepted connection.
	free := func(t int64) {
		busy--
		if len(acceptQ) > 0 {
			j := acceptQ[0]
			acceptQ = acceptQ[1:]
			serviceStart[j] = t
			start(j, t)
		}
	}
	var highDone []pfDone             // the appliance's view: high-class completions
	settled := make([]bool, len(arr)) // a SYN got in, or the client gave up
	// sample: the round trip each client measured on its handshake.
	sample := make([]int64, len(arr))
	gaveUp := func(i int) {
		settled[i] = true
		// The capture holds its SYNs only.
		conns = append(conns, &reconstruct.Connection{ID: fmt.Sprintf("c%d", i), Client: arr[i].client,
			ClientPort: uint16(10000 + i%50000), Server: netip.MustParseAddr("203.0.113.2"), ServerPort: 80,
			SYNTimes: syns[i], SYNLosses: len(syns[i]) - 1, Class: arr[i].class})
	}
	for h.Len() > 0 {
		ev := heap.Pop(&h).(pfEvent)
		i := ev.i
		switch ev.kind {
		case 7: // the client's last SYN timed out while the appliance copied
			if !settled[i] {
				gaveUp(i)
			}
		case 2, 6: // SYN; 6: the appliance's copy
			if settled[i] {
				continue
			}
			if ev.kind == 2 && p.dropLowAbove > 0 && arr[i].class == "low" && medianSince(highDone, ev.t-int64(30*time.Second)) > int64(p.dropLowAbove) {
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
				copying := p.fastSYN > 0
				if copying && (ev.kind == 6 || ev.n == 0) && ev.t+int64(p.fastSYN) < arr[i].at+pfGiveUp {
					heap.Push(&h, pfEvent{t: ev.t + int64(p.fastSYN), kind: 6, i: i})
				}
				switch {
				case ev.kind == 6:
				case ev.n+1 < 3:
					heap.Push(&h, pfEvent{t: arr[i].at + int64(time.Second)*(1<<(ev.n+1)-1), kind: 2, i: i, n: ev.n + 1})
				case copying:
					heap.Push(&h, pfEvent{t: arr[i].at + pfGiveUp, kind: 7, i: i})
				default:
					gaveUp(i)
				}
				continue
			}
			settled[i] = true
			accepted[i] = ev.t
			sample[i] = arr[i].rtt
			if ev.kind == 6 {
				sample[i] += ev.t - arr[i].at
			}
			halfOpen++
			heap.Push(&h, pfEvent{t: ev.t + arr[i].rtt, kind: 1, i: i})
		case 3: // the splicer's SYN to the server
			if p.dropsSYN(len(acceptQ), halfOpen) {
				// connect(2)'s timer on Linux 6.x: five retries a second
				// apart (tcp_syn_linear_timeouts 4, and one more), then
				// doubling: SYNs at 0, 1, 2, 3, 4, 5, 7, 11 s.
				wait := int64(time.Second)
				if ev.n >= 5 {
					wait <<= ev.n - 4
				}
				heap.Push(&h, pfEvent{t: ev.t + wait, kind: 3, i: i, n: ev.n + 1})
				continue
			}
			halfOpen++
			heap.Push(&h, pfEvent{t: ev.t + 200_000, kind: 1, i: i})
		case 1, 4: // handshake ACK and request; 4: the request resent
			if ev.kind == 1 {
				established[i] = ev.t
			}
			if p.limbo && len(acceptQ) > p.backlog {
				minRTO := int64(200 * time.Millisecond)
				rto := sample[i] + max(2*sample[i], minRTO)
				probe := 2*sample[i] + minRTO
				var wait int64
				switch {
				case probe < rto && ev.n == 0:
					wait = probe
				case probe < rto:
					wait = rto << (ev.n - 1)
				default:
					wait = rto << ev.n
				}
				heap.Push(&h, pfEvent{t: ev.t + wait, kind: 4, i: i, n: ev.n + 1})
				continue
			}
			halfOpen--
			acked[i] = ev.t
			if arr[i].outside {
				serviceStart[i] = ev.t
				heap.Push(&h, pfEvent{t: ev.t + arr[i].service, kind: 0, i: i})
				continue
			}
			if busy < p.workers {
				serviceStart[i] = ev.t
				start(i, ev.t)
			} else {
				acceptQ = append(acceptQ, i)
			}
		case 5: // a holding worker is done with the transfer
			free(ev.t)
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
			switch {
			case a.outside:
			case p.holding && a.transfer > 0:
				heap.Push(&h, pfEvent{t: last, kind: 5, i: i})
			default:
				free(ev.t)
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

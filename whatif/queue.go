package whatif

// The queueing server model: a server fitted on the capture (a worker pool
// behind a bounded queue) and replayed as a discrete-event simulation, for
// the overload the linear load model cannot see: SYNs dropped because the
// queue was full, which removing load (DROP SYN) relieves.

import (
	"net/netip"
	"slices"
	"time"

	"github.com/rtmon/rtmon/internal/minheap"
	"github.com/rtmon/rtmon/reconstruct"
)

// queueConn is one connection as the simulation sees it.
type queueConn struct {
	txs      []int // dataset transaction indices, in order
	fresh    bool  // its handshake was captured: its SYNs can be dropped
	synStart int64 // first SYN (fresh only)
	synWait  int64 // measured wait for SYNs the server dropped
	// synAt: the measured SYNs' offsets from the first.
	synAt []int64
	// synLosses: measured SYN retransmissions after server drops.
	synLosses int
	// rtt and rttServer: how long a half-open connection from the client,
	// or from a splicer beside the server, holds a backlog slot.
	rtt, rttServer int64
	// tlsLead: on HTTPS, from the connection's handshake to its first
	// request's arrival (the TLS handshake and the client's wait), which
	// a splicer that binds at the ClientHello puts ahead of the request.
	tlsLead int64
	unit    int // -1: a client that gave up (ghost)
	class   string
	client  netip.Addr
	// gaveUp: the capture shows only its SYNs, every one dropped; its
	// request is the class's typical one.
	gaveUp bool
}

// queueTx is one transaction's measured service at the capture point.
type queueTx struct {
	conn     int
	pos      int   // position on its connection
	arrival  int64 // when the server took the request: its last byte, or the copy it acknowledged after a half-open wait
	sent     int64 // the request's first copy: arrival, or earlier when the server left the connection half-open
	rto      int64 // the client's retransmission timeout for a request the server left half-open
	queued   int64 // when it joined the server's queue: arrival, or its connection's handshake
	measured int64 // sent -> response's first byte; -1: none
	service  int64 // intrinsic service time (no queueing)
	// transfer: the response's first byte to its last, how much longer a
	// worker that writes the response itself stays busy.
	transfer  int64
	pipelined bool // sent before the previous response began
	// unexplained: the fitted pool cannot explain its departure (see
	// reconstructService): served out of order or beside the pool (a
	// cache in front of the workers); the replay passes it through as
	// measured, holding no worker.
	unexplained bool
}

// accepted is when the server took the transaction's connection: its
// handshake for a fresh connection's first request, else the request's
// arrival (never after it).
func (qt *queueTx) accepted() int64 {
	if qt.queued <= 0 || qt.queued > qt.arrival {
		return qt.arrival
	}
	return qt.queued
}

// leftHalfOpen: the capture shows the server took the request only after
// a half-open wait (a copy later than the first).
func (qt *queueTx) leftHalfOpen() bool { return qt.rto > 0 }

// queueData is what every simulation of one dataset shares.
type queueData struct {
	conns     []queueConn
	txs       []queueTx // by dataset transaction index
	maxConc   int       // the largest measured concurrency
	synLosses int       // measured SYN retransmissions after server drops
	// dataTxs: the dataset's transactions come first in txs; after them,
	// one request for each client that gave up.
	dataTxs int
}

// acceptLimbo is the least gap between a fresh connection's request and
// the server's ACK of it that says the server had not taken the
// connection: a Linux server acknowledges a new connection's data at once
// (quick-ACK mode), and a dropped request comes back no sooner than the
// client's shortest retransmission timeout (200 ms).
const acceptLimbo = int64(150 * time.Millisecond)

// linuxRTOMin is the least retransmission timeout a Linux client waits.
const linuxRTOMin = int64(200 * time.Millisecond)

// buildQueueData derives the simulation's input from the dataset.
func (d *Dataset) buildQueueData() *queueData {
	q := &queueData{txs: make([]queueTx, len(d.txs))}
	connOf := map[string]int{}
	for i := range d.txs {
		t := &d.txs[i]
		qt := queueTx{conn: -1, arrival: t.tx.RequestLast, sent: t.tx.RequestLast, queued: t.tx.RequestLast, measured: -1}
		if t.fresh && t.conn.Established > 0 && t.conn.Established < qt.queued {
			// A new connection joins the accept queue when its handshake
			// completes: a server that takes connections in turn serves
			// them in that order.
			qt.queued = t.conn.Established
		}
		if acked := t.tx.RequestAcked; t.fresh && acked-t.tx.RequestLast > acceptLimbo && acked <= t.tx.ResponseFirst {
			// The server left the connection half-open, its accept queue
			// full, and took it (and the request) only when it
			// acknowledged the request: that is when it joined the queue
			// the workers take from.
			qt.arrival, qt.queued = acked, acked
			if rtt := t.conn.RTTClient; rtt > 0 {
				qt.rto = rtt + max(2*rtt, linuxRTOMin)
			} else {
				qt.rto = int64(time.Second)
			}
		}
		if s, e, ok := serviceTimes(t); ok {
			qt.measured = e - s
			q.maxConc = max(q.maxConc, int(d.conc[i]))
			qt.transfer = max(t.tx.ResponseLast-t.tx.ResponseFirst, 0)
		}
		key := t.tx.ConnectionID
		if key == "" {
			key = "tx:" + t.tx.ID
		}
		ci, ok := connOf[key]
		if !ok {
			ci = len(q.conns)
			connOf[key] = ci
			qc := queueConn{unit: t.unit, class: d.units[t.unit].class, client: t.tx.Client}
			if t.fresh {
				syn, _ := reconstruct.HandshakeWaits(t.conn)
				qc.fresh, qc.synStart = true, t.conn.SYNTimes[0]
				qc.rtt, qc.rttServer = t.conn.RTTClient, t.conn.RTTServer
				for _, at := range t.conn.SYNTimes {
					qc.synAt = append(qc.synAt, at-qc.synStart)
				}
				for _, w := range syn {
					qc.synWait += w
				}
				qc.synLosses = len(syn)
				q.synLosses += len(syn)
				if t.conn.TLSVersion != 0 && t.conn.Established > 0 && t.tx.RequestLast > t.conn.Established {
					qc.tlsLead = t.tx.RequestLast - t.conn.Established
				}
			}
			q.conns = append(q.conns, qc)
		}
		qc := &q.conns[ci]
		if n := len(qc.txs); n > 0 {
			prev := &d.txs[qc.txs[n-1]]
			qt.pipelined = prev.tx.ResponseFirst > 0 && t.tx.RequestLast > 0 && t.tx.RequestLast < prev.tx.ResponseFirst
		}
		qt.conn, qt.pos = ci, len(qc.txs)
		qc.txs = append(qc.txs, i)
		q.txs[i] = qt
	}
	for i := range q.txs {
		if qt := &q.txs[i]; qt.measured >= 0 {
			qt.service = max(qt.measured-(qt.arrival-qt.sent), 0)
		}
	}
	q.dataTxs = len(q.txs)
	q.addGhosts(d)
	return q
}

// order lists the transactions the server served, by arrival (request's
// last byte), for reconstructService.
func (q *queueData) order() []int {
	var idx []int
	for i := range q.txs[:q.dataTxs] {
		if q.txs[i].measured >= 0 {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpInt64(q.txs[a].queued, q.txs[b].queued) })
	return idx
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// reconstructService sets each transaction's intrinsic service time as a
// pool of workers serving in arrival order explains its measured
// departure (the response's first byte): it started when it arrived or
// when the earliest worker came free, whichever was later, and served
// until it departed. A worker comes free at the departure, or, holding
// (a server that writes each response itself), once the response's last
// byte is sent. It returns the share of transactions the pool cannot
// explain (one departed before a worker was free for it: the pool is too
// small); those keep their measured time, and the replay passes them
// through without a worker (unexplained).
func (q *queueData) reconstructService(order []int, workers int, holding bool) float64 {
	free := make(minheap.Heap[workerFree], 0, workers)
	for range workers {
		free.Push(workerFree(0))
	}
	bad := 0
	for _, i := range order {
		qt := &q.txs[i]
		dep := qt.sent + qt.measured
		w := free.Pop()
		start := max(qt.arrival, int64(w))
		qt.unexplained = start > dep
		if qt.unexplained {
			bad++
			free.Push(w) // that worker is still busy
			// Served by a worker the order does not explain: for no longer
			// than from its arrival (a request the server left half-open
			// was measured from its first copy, seconds before: taken as
			// service, it held a replayed worker that long).
			qt.service = min(qt.measured, max(dep-qt.arrival, 0))
			continue
		}
		qt.service = dep - start
		if holding {
			dep += qt.transfer
		}
		free.Push(workerFree(dep))
	}
	if len(order) == 0 {
		return 0
	}
	return float64(bad) / float64(len(order))
}

// workerFree is when a worker comes free.
type workerFree int64

func (a workerFree) Before(b workerFree) bool { return a < b }

// addGhosts adds the connections of clients that gave up: every SYN
// dropped (anchors, as any measured drop), then, if the replay lets one
// in, one request a round trip later (the median round trip of its class)
// whose service is its class's median (setGhostService).
func (q *queueData) addGhosts(d *Dataset) {
	rtts := map[string][]int64{}
	for _, c := range q.conns {
		if c.fresh && c.rtt > 0 {
			rtts[c.class] = append(rtts[c.class], c.rtt)
		}
	}
	for _, g := range d.ghosts {
		class := cmpOr(g.Class, DefaultClass)
		qc := queueConn{unit: -1, class: class, client: g.Client, fresh: true, gaveUp: true,
			synStart: g.SYNTimes[0], synLosses: len(g.SYNTimes), rtt: pctl(rtts[class], 0.5), rttServer: g.RTTServer}
		for _, at := range g.SYNTimes {
			qc.synAt = append(qc.synAt, at-qc.synStart)
		}
		ti := len(q.txs)
		q.txs = append(q.txs, queueTx{conn: len(q.conns), arrival: qc.synStart + qc.rtt, sent: qc.synStart + qc.rtt,
			queued: qc.synStart + qc.rtt, measured: 0})
		qc.txs = []int{ti}
		q.synLosses += qc.synLosses
		q.conns = append(q.conns, qc)
	}
}

// setGhostService gives each ghost request its class's median service
// time (after reconstructService).
func (q *queueData) setGhostService() {
	by := map[string][]int64{}
	for i := range q.txs[:q.dataTxs] {
		if q.txs[i].measured >= 0 {
			c := q.conns[q.txs[i].conn].class
			by[c] = append(by[c], q.txs[i].service)
		}
	}
	for i := q.dataTxs; i < len(q.txs); i++ {
		qt := &q.txs[i]
		qt.service = pctl(by[q.conns[qt.conn].class], 0.5)
		qt.measured = qt.service
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

package whatif

// The queueing server model: a server fitted on the capture (a worker pool
// behind a bounded queue) and replayed as a discrete-event simulation, for
// the overload the linear load model cannot see: SYNs dropped because the
// queue was full, which removing load (DROP SYN) relieves.

import (
	"slices"

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
	unit      int
}

// queueTx is one transaction's measured service at the capture point.
type queueTx struct {
	conn      int
	pos       int   // position on its connection
	arrival   int64 // request's last byte
	measured  int64 // request's last byte -> response's first byte; -1: none
	service   int64 // intrinsic service time (no queueing)
	pipelined bool  // sent before the previous response began
}

// queueData is what every simulation of one dataset shares.
type queueData struct {
	conns     []queueConn
	txs       []queueTx // by dataset transaction index
	maxConc   int       // the largest measured concurrency
	synLosses int       // measured SYN retransmissions after server drops
}

// buildQueueData derives the simulation's input from the dataset.
func (d *Dataset) buildQueueData() *queueData {
	q := &queueData{txs: make([]queueTx, len(d.txs))}
	connOf := map[string]int{}
	for i := range d.txs {
		t := &d.txs[i]
		qt := queueTx{conn: -1, arrival: t.tx.RequestLast, measured: -1}
		if s, e, ok := serviceTimes(t); ok {
			qt.measured = e - s
			q.maxConc = max(q.maxConc, int(d.conc[i]))
		}
		key := t.tx.ConnectionID
		if key == "" {
			key = "tx:" + t.tx.ID
		}
		ci, ok := connOf[key]
		if !ok {
			ci = len(q.conns)
			connOf[key] = ci
			qc := queueConn{unit: t.unit}
			if t.fresh {
				syn, _ := reconstruct.HandshakeWaits(t.conn)
				qc.fresh, qc.synStart = true, t.conn.SYNTimes[0]
				for _, at := range t.conn.SYNTimes {
					qc.synAt = append(qc.synAt, at-qc.synStart)
				}
				for _, w := range syn {
					qc.synWait += w
				}
				qc.synLosses = len(syn)
				q.synLosses += len(syn)
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
		q.txs[i].service = max(q.txs[i].measured, 0)
	}
	return q
}

// order lists the transactions the server served, by arrival (request's
// last byte), for reconstructService.
func (q *queueData) order() []int {
	var idx []int
	for i := range q.txs {
		if q.txs[i].measured >= 0 {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpInt64(q.txs[a].arrival, q.txs[b].arrival) })
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
// until it departed. It returns the share of transactions the pool cannot
// explain (one departed before a worker was free for it: the pool is too
// small); those keep their measured time.
func (q *queueData) reconstructService(order []int, workers int) float64 {
	free := make(minheap.Heap[workerFree], 0, workers)
	for range workers {
		free.Push(workerFree(0))
	}
	bad := 0
	for _, i := range order {
		qt := &q.txs[i]
		dep := qt.arrival + qt.measured
		w := free.Pop()
		start := max(qt.arrival, int64(w))
		if start > dep {
			bad++
			start = qt.arrival
			free.Push(w) // that worker is still busy
			qt.service = qt.measured
			continue
		}
		qt.service = dep - start
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

// queueChange is what a replay changed about the traffic: units delayed
// (admitted late) or gone (failed), transactions removed.
type queueChange struct {
	unitDelay  []int64 // by unit
	unitGone   []bool
	txsRemoved []bool // by transaction
}

// queueOutcome is one simulation's result.
type queueOutcome struct {
	server  []int64 // simulated service+queueing per transaction, -1: not served
	synWait []int64 // simulated wait for dropped SYNs per connection
	failed  []bool  // per connection: every SYN dropped
	// drops counts the SYNs dropped, connDrops per connection.
	drops     int
	connDrops []int
	waitMax   int // longest queue seen
}

// qEvent is a simulation event.
type qEvent struct {
	t    int64
	kind int8 // qDone before qSYN before qArrive at the same instant
	id   int  // transaction (done, arrive) or connection (SYN)
	n    int  // SYN attempt
}

const (
	qDone int8 = iota
	qSYN
	qArrive
)

func (a qEvent) Before(b qEvent) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.id < b.id
}

// queueSim is one run of the server: workers serving transactions first
// come first served; a SYN arriving while backlog or more transactions
// wait is dropped (backlog 0: never), and the client sends it again on its
// schedule.
type queueSim struct {
	d        *Dataset
	q        *queueData
	o        *Options
	workers  int
	backlog  int
	ch       *queueChange
	out      queueOutcome
	h        minheap.Heap[qEvent]
	busy     int
	waiting  []int // FIFO of transactions
	arrivedT []int64
	shift    []int64 // per connection: how much later than measured its next transaction comes
	next     []int   // per connection: position of its next transaction
}

// simulate runs the server with workers and backlog on the traffic as
// changed by ch (nil: as captured).
func (d *Dataset) simulate(q *queueData, o *Options, workers, backlog int, ch *queueChange) queueOutcome {
	s := &queueSim{d: d, q: q, o: o, workers: workers, backlog: backlog, ch: ch}
	s.out = queueOutcome{server: make([]int64, len(q.txs)), synWait: make([]int64, len(q.conns)), failed: make([]bool, len(q.conns)),
		connDrops: make([]int, len(q.conns))}
	for i := range s.out.server {
		s.out.server[i] = -1
	}
	s.arrivedT = make([]int64, len(q.txs))
	s.shift = make([]int64, len(q.conns))
	s.next = make([]int, len(q.conns))
	for ci := range q.conns {
		c := &q.conns[ci]
		var delay int64
		if ch != nil {
			if ch.unitGone[c.unit] {
				continue
			}
			delay = ch.unitDelay[c.unit]
		}
		s.shift[ci] = delay
		if c.fresh {
			s.h.Push(qEvent{t: c.synStart + delay, kind: qSYN, id: ci})
		} else {
			s.scheduleNext(ci, 0)
		}
	}
	for len(s.h) > 0 {
		ev := s.h.Pop()
		switch ev.kind {
		case qSYN:
			s.syn(ev)
		case qArrive:
			s.arrive(ev.id, ev.t)
		case qDone:
			s.done(ev.id, ev.t)
		}
	}
	return s.out
}

// scheduleNext schedules connection ci's next transaction, not before at.
func (s *queueSim) scheduleNext(ci int, at int64) {
	c := &s.q.conns[ci]
	if s.next[ci] >= len(c.txs) {
		return
	}
	ti := c.txs[s.next[ci]]
	s.next[ci]++
	s.h.Push(qEvent{t: max(at, s.q.txs[ti].arrival+s.shift[ci]), kind: qArrive, id: ti})
}

// syn decides one SYN. The capture's own SYNs are anchors: one the
// server accepted is accepted (unless the replay moved the connection);
// one it dropped is dropped only if the replayed queue is full then (or
// no backlog is modelled), so less load admits it. Any further SYN is the
// model's to decide.
func (s *queueSim) syn(ev qEvent) {
	c := &s.q.conns[ev.id]
	full := s.backlog > 0 && len(s.waiting) >= s.backlog
	moved := s.ch != nil && s.ch.unitDelay[c.unit] != 0
	drop := full
	switch {
	case moved || ev.n > c.synLosses:
	case ev.n < c.synLosses:
		drop = full || s.backlog == 0
	default:
		drop = false
	}
	if drop {
		s.out.drops++
		s.out.connDrops[ev.id]++
		next := ev.n + 1
		if next >= max(s.o.SYNAttempts, c.synLosses+1) {
			s.out.failed[ev.id] = true
			return
		}
		var at int64
		if next < len(c.synAt) && !moved {
			at = c.synAt[next]
		} else {
			at = s.d.synSchedule(&s.d.units[c.unit], s.o).waitBefore(next)
		}
		s.h.Push(qEvent{t: c.synStart + s.shift[ev.id] + at, kind: qSYN, id: ev.id, n: next})
		return
	}
	wait := ev.t - c.synStart - s.shift[ev.id]
	s.out.synWait[ev.id] = wait
	// The connection's requests come as much later as its handshake did.
	s.shift[ev.id] += wait - c.synWait
	s.scheduleNext(ev.id, ev.t)
}

func (s *queueSim) arrive(ti int, t int64) {
	qt := &s.q.txs[ti]
	s.arrivedT[ti] = t
	if c := &s.q.conns[qt.conn]; s.next[qt.conn] == qt.pos+1 && qt.pos+1 < len(c.txs) && s.q.txs[c.txs[qt.pos+1]].pipelined {
		s.scheduleNext(qt.conn, t)
	}
	if qt.measured < 0 || (s.ch != nil && s.ch.txsRemoved[ti]) {
		// Not served here (no service seen, or removed): it passes through
		// as measured and holds no worker.
		s.h.Push(qEvent{t: t + max(qt.measured, 0), kind: qDone, id: ti})
		return
	}
	if s.busy < s.workers {
		s.busy++
		s.h.Push(qEvent{t: t + qt.service, kind: qDone, id: ti})
		return
	}
	s.waiting = append(s.waiting, ti)
	s.out.waitMax = max(s.out.waitMax, len(s.waiting))
}

func (s *queueSim) done(ti int, t int64) {
	qt := &s.q.txs[ti]
	served := qt.measured >= 0 && (s.ch == nil || !s.ch.txsRemoved[ti])
	if served {
		s.out.server[ti] = t - s.arrivedT[ti]
		s.shift[qt.conn] += s.out.server[ti] - qt.measured
		s.busy--
		if len(s.waiting) > 0 {
			next := s.waiting[0]
			s.waiting = s.waiting[1:]
			s.busy++
			s.h.Push(qEvent{t: t + s.q.txs[next].service, kind: qDone, id: next})
		}
	}
	if s.next[qt.conn] == qt.pos+1 {
		s.scheduleNext(qt.conn, t)
	}
}

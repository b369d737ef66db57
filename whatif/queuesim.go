package whatif

// The server simulation the queue model replays: workers, the listen
// backlog, the clients' SYN and request resends.

import (
	"math/rand/v2"
	"slices"

	"github.com/rtmon/rtmon/internal/minheap"
)

// queueChange is what a replay changed about the traffic: units delayed
// (admitted late) or gone (failed), transactions removed.
type queueChange struct {
	connDelay   []int64 // by connection
	connGone    []bool
	connSpliced []bool // a splicer completes its handshakes
	// connBindsAtHello: the splicer does not terminate TLS, so on HTTPS it
	// binds at the ClientHello (see queueConn.tlsLead).
	connBindsAtHello []bool
	// connFastSYN: the front end's FAST SYN gap for the connection (0:
	// none): it sends the SYN again every gap until the server answers.
	connFastSYN []int64
	// connAttempt: the client's SYN attempt that reaches the server first
	// (the rules dropped the earlier ones at the front end).
	connAttempt []int
	txsRemoved  []bool // by transaction
	// freeSYNs: the model judges every SYN, the capture's fates kept for
	// none (the free null replay: how far the model running alone, as
	// FAST SYN and SPLICE have it, is from the capture).
	freeSYNs bool
}

// queueOutcome is one simulation's result.
type queueOutcome struct {
	server  []int64 // simulated service+queueing per transaction, -1: not served
	synWait []int64 // simulated wait for dropped SYNs per connection
	failed  []bool  // per connection: every SYN dropped
	// drops counts the SYNs dropped, connDrops per connection.
	drops     int
	connDrops []int
	// queueAtAccept (null replay): how many the queue held (what full
	// compares with the backlog) when the SYN the server accepted came,
	// per connection; queueAtDrop: when each SYN it dropped came.
	queueAtAccept []int
	queueAtDrop   [][]int
	// queueAtCopy (null replay): per transaction the capture shows left
	// half-open, how many the queue held at each copy the server refused.
	queueAtCopy [][]int
	// limbo counts connections whose handshake completed into a full
	// accept queue (see queueSim.limbo).
	limbo int
	// doneAt: when each transaction left the server.
	doneAt []int64
}

// qEvent is a simulation event.
type qEvent struct {
	t    int64
	kind int8 // qDone, qFree, qHalfOpen, qSYN, qArrive in this order at the same instant
	id   int  // transaction (done, arrive) or connection (SYN)
	n    int  // SYN attempt
	// syn: what a qSYN is (the client's SYN, the front end's copy, the
	// client giving up).
	syn synKind
}

type synKind int8

const (
	synClient synKind = iota
	synCopy           // FAST SYN: the front end's copy, a gap after the last
	synGiveUp         // the client's last SYN timed out, copies unanswered
)

const (
	qDone int8 = iota
	qFree      // a worker that held on through the transfer comes free
	qHalfOpen
	qSYN
	qArrive
	qJoin // a splicer's handshake completes: after every SYN of the instant
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
// come first served; a SYN arriving while backlog or more connections are
// half-open (for a round trip after their SYN is accepted) or waiting for
// a worker is dropped (backlog 0: never), and the client sends it again
// on its schedule.
type queueSim struct {
	d *Dataset
	q *queueData
	o *Options
	serverShape
	ch  *queueChange
	out queueOutcome
	h   minheap.Heap[qEvent]
	// jitter moves each timer the model sets on its own (a replay
	// member's, see Options.Members; nil: none moves); copies counts the
	// front end's FAST SYN copies sent.
	jitter   *rand.Rand
	copies   int
	busy     int
	halfOpen int   // accepted SYNs whose handshake is not complete
	waiting  []int // FIFO of transactions
	arrivedT []int64
	// ready: when a transaction's request is there to be served.
	ready []int64
	shift []int64 // per connection: how much later than measured its next transaction comes
	next  []int   // per connection: position of its next transaction
	// bindTries counts a spliced connection's server SYNs (0: not bound
	// yet; -1 bound).
	bindTries []int
	// synDone: the connection's handshake is settled (a SYN accepted, or
	// the client gave up), so SYNs and copies still scheduled are void;
	// copying: the front end has started copying its SYN.
	synDone, copying []bool
	// rttSample (a replay that changed the traffic): per connection the
	// model let in (a FAST SYN copy, or a SYN the capture does not
	// decide), the round trip its client measured on the handshake (see
	// limbo); else 0. key: per transaction, its place in the
	// accept queue when limbo decided it (nil until then).
	rttSample []int64
	key       []int64
	// nullQueue and nullDropQueue are the null replay's queueAtAccept and
	// queueAtDrop in a replay that changed the traffic (nil in the null
	// replay itself).
	nullQueue     []int
	nullDropQueue [][]int
	nullCopyQueue [][]int // the null replay's queueAtCopy, likewise
	// onDone and onFail, when set, hear of each transaction leaving the
	// server and each connection whose every SYN was dropped.
	onDone func(ti int)
	onFail func(ci int)
	// gated: per container transaction, the connections its pageview's
	// client opened only once it had the container (see release);
	// nullDone: the null replay's doneAt.
	gated    map[int][]int
	nullDone []int64
}

// serverShape is the simulated server: its worker pool and listen
// backlog, and whether half-open handshakes take backlog slots.
type serverShape struct {
	workers, backlog int
	// halfOpenSlots: a SYN is dropped while half-open and waiting
	// connections together fill the backlog (a SYN queue as small as the
	// backlog and no SYN cookies); else only while the connections waiting
	// for a worker fill it (Linux's default: with SYN cookies a full SYN
	// queue answers with a cookie, and only a full accept queue drops).
	halfOpenSlots bool
	// overflowDrops: the server drops a handshake that completes into a
	// full accept queue, leaving the connection half-open (see limbo), as
	// Linux does; known when the capture shows such connections.
	overflowDrops bool
	// holding: a worker stays busy until the response's last byte is sent
	// (see QueueModel.HoldsTransfer).
	holding bool
}

// simulate runs the server shaped sh on the traffic as changed by ch
// (nil: as captured).
func (d *Dataset) simulate(q *queueData, o *Options, sh serverShape, ch *queueChange) queueOutcome {
	s := d.newQueueSim(q, o, sh, ch)
	for ci := range q.conns {
		if ch == nil || !ch.connGone[ci] {
			s.start(ci)
		}
	}
	for len(s.h) > 0 {
		s.step()
	}
	return s.out
}

// newQueueSim is a server with nothing scheduled yet.
func (d *Dataset) newQueueSim(q *queueData, o *Options, sh serverShape, ch *queueChange) *queueSim {
	s := &queueSim{d: d, q: q, o: o, serverShape: sh, ch: ch}
	s.out = queueOutcome{server: make([]int64, len(q.txs)), synWait: make([]int64, len(q.conns)), failed: make([]bool, len(q.conns)),
		connDrops: make([]int, len(q.conns)), queueAtAccept: make([]int, len(q.conns)), queueAtDrop: make([][]int, len(q.conns)),
		queueAtCopy: make([][]int, len(q.txs)), doneAt: make([]int64, len(q.txs))}
	for i := range s.out.server {
		s.out.server[i] = -1
	}
	for i := range s.out.queueAtAccept {
		s.out.queueAtAccept[i] = -1 // no SYN accepted
	}
	s.arrivedT = make([]int64, len(q.txs))
	s.ready = make([]int64, len(q.txs))
	s.shift = make([]int64, len(q.conns))
	s.next = make([]int, len(q.conns))
	s.bindTries = make([]int, len(q.conns))
	s.synDone, s.copying = make([]bool, len(q.conns)), make([]bool, len(q.conns))
	if ch != nil {
		s.rttSample = make([]int64, len(q.conns))
	}
	return s
}

// start schedules connection ci: its first SYN (or, without a captured
// handshake, its first request), later by its delay in ch.
func (s *queueSim) start(ci int) {
	c := &s.q.conns[ci]
	if s.ch != nil {
		s.shift[ci] = s.ch.connDelay[ci]
	}
	if c.fresh {
		n := 0
		if s.ch != nil {
			n = s.ch.connAttempt[ci]
		}
		s.h.Push(qEvent{t: c.synStart + s.shift[ci], kind: qSYN, id: ci, n: n})
	} else {
		s.scheduleNext(ci, 0)
	}
}

// step processes the next event.
func (s *queueSim) step() {
	ev := s.h.Pop()
	switch ev.kind {
	case qSYN:
		s.syn(ev)
	case qArrive:
		s.arrive(ev)
	case qJoin:
		s.join(ev)
	case qDone:
		s.done(ev.id, ev.t)
	case qFree:
		s.free(ev.t)
	case qHalfOpen:
		s.halfOpen--
	}
}

// scheduleNext schedules connection ci's next transaction, not before at.
func (s *queueSim) scheduleNext(ci int, at int64) {
	c := &s.q.conns[ci]
	if s.next[ci] >= len(c.txs) {
		return
	}
	ti := c.txs[s.next[ci]]
	s.next[ci]++
	qt := &s.q.txs[ti]
	switch {
	case qt.leftHalfOpen() && s.limboJudged(ci):
		// The replay moved its handshake: the capture's half-open wait no
		// longer says when the server took it (limbo decides).
		s.h.Push(qEvent{t: max(at, qt.sent+s.shift[ci]), kind: qArrive, id: ti})
	case qt.leftHalfOpen() && s.spliced(ci):
		// The splicer, not the server, took the client's first copy.
		s.h.Push(qEvent{t: max(at, qt.sent+s.shift[ci]), kind: qArrive, id: ti})
	case qt.leftHalfOpen():
		// Left half-open in the capture: in a replay that changed the
		// traffic a copy before the one the server took may find room;
		// the null replay notes the queue each met (n counts the copies).
		s.h.Push(qEvent{t: max(at, qt.sent+s.shift[ci]), kind: qArrive, id: ti, n: 1})
	case s.spliced(ci):
		s.h.Push(qEvent{t: max(at, qt.arrival-s.bindLead(ci, ti)+s.shift[ci]), kind: qArrive, id: ti})
	default:
		// The server takes the connection when its handshake completes
		// (queued), in that order, and its request when it has come: the
		// worker that accepted it waits for it, as a prefork server's
		// does in read(2). So the order among requests that came at once
		// is the accept queue's, as the fit (reconstructService) has it.
		s.h.Push(qEvent{t: max(at, qt.accepted()+s.shift[ci]), kind: qArrive, id: ti})
	}
}

// syn decides one SYN. The capture's own SYNs are anchors: one the
// server accepted is accepted (unless the replay moved the connection);
// one it dropped is dropped only if the replayed queue is full then (or
// no backlog is modelled), so less load admits it. Any further SYN is the
// model's to decide.
func (s *queueSim) syn(ev qEvent) {
	c := &s.q.conns[ev.id]
	if s.synDone[ev.id] {
		return // answered (a copy or the client's SYN got in) or given up
	}
	if s.spliced(ev.id) {
		// The splicer answers the client at once; the server sees the
		// connection only when the request comes (bind).
		s.shift[ev.id] -= c.synWait
		s.scheduleNext(ev.id, ev.t)
		return
	}
	if ev.syn == synGiveUp {
		s.giveUp(ev.id, ev.t-c.synStart-s.shift[ev.id], ev.t)
		return
	}
	full := s.full()
	moved := s.ch != nil && s.ch.connDelay[ev.id] != 0
	drop := full
	gap := s.fastGap(ev.id)
	judged := ev.syn == synCopy || moved || gap > 0 || ev.n > c.synLosses || s.ch != nil && s.ch.freeSYNs
	switch {
	case judged:
		// The model alone judges a SYN the capture does not decide: a
		// copy, one of a connection the rules moved, or one the front end
		// copies (the capture's fates were decided against a queue without
		// the copies; with every waiting client's SYN coming again each
		// gap, a slot that frees goes to a copy, so an accepted SYN of the
		// capture no longer says it got in: kept as an anchor it predicted
		// a p50 of 199 ms where the server really gave 412 ms).
	case s.ch == nil:
		// The null replay: each SYN keeps its fate in the capture, and the
		// queue it met is noted (the fit compares those with the backlog;
		// a replay that changed the traffic compares its own). Judged by
		// the model's queue instead, a dropped SYN that found room got in
		// early, the null replay drifted from the capture, and the backlog
		// that kept it closest was 2 to 4 on baselines whose server holds
		// 5 (see fitBacklog).
		drop = ev.n < c.synLosses
		if drop {
			s.out.queueAtDrop[ev.id] = append(s.out.queueAtDrop[ev.id], s.occupancy())
		} else {
			s.out.queueAtAccept[ev.id] = s.occupancy()
		}
	case ev.n < c.synLosses:
		// Dropped in the capture: let in only where the queue has room
		// and holds fewer than the null replay's did then (less load
		// than the capture had, not the model's error).
		drop = full || s.backlog == 0 || ev.n >= len(s.nullDropQueue[ev.id]) ||
			s.occupancy() >= s.nullDropQueue[ev.id][ev.n]
	default:
		// A replay that changed the traffic drops it only if its queue is
		// full and holds more than the null replay's did then: more load
		// than the capture had, not the model's error (the null replay's
		// queue is itself full at some SYNs the server accepted).
		drop = full && s.occupancy() > s.nullQueue[ev.id]
	}
	if drop {
		s.out.drops++
		s.out.connDrops[ev.id]++
		if gap > 0 && (ev.syn == synCopy || !s.copying[ev.id]) {
			// The front end copies the SYN a gap after the last copy, or
			// after the first SYN it saw go unanswered.
			s.copying[ev.id] = true
			s.copies++
			s.h.Push(qEvent{t: ev.t + gap + s.moved(), kind: qSYN, id: ev.id, n: ev.n, syn: synCopy})
		}
		if ev.syn == synCopy {
			return
		}
		s.resendSYN(ev, moved)
		return
	}
	s.synDone[ev.id] = true
	wait := ev.t - c.synStart - s.shift[ev.id]
	s.out.synWait[ev.id] = wait
	switch {
	case s.rttSample == nil:
	case ev.syn == synCopy:
		// The client times its handshake from the SYN the server answered,
		// by its timestamp: the front end's copies repeat the client's
		// first SYN, so the whole wait counts as one round trip.
		s.rttSample[ev.id] = max(c.rtt, 0) + wait
	case judged:
		// The model let this handshake in where the capture does not say
		// when: whether its ACK, a round trip later, meets a full accept
		// queue is the model's to decide too (limbo). Queued regardless,
		// such connections overfilled the queue: replaying twelve
		// unchanged overload captures with every SYN judged by the model,
		// the high class's p90 came out 12% over on average (5% with
		// this; see docs/whatif.md).
		s.rttSample[ev.id] = max(c.rtt, 1)
	}
	s.hold(ev.t, c.rtt)
	// The connection's requests come as much later as its handshake did.
	s.shift[ev.id] += wait - c.synWait
	s.scheduleNext(ev.id, ev.t)
}

// resendSYN schedules the client's next SYN after ev (its own, dropped),
// or its giving up when that was its last.
func (s *queueSim) resendSYN(ev qEvent, moved bool) {
	c := &s.q.conns[ev.id]
	next := ev.n + 1
	sched := s.d.synScheduleOf(c.client, c.class, s.o)
	// A connection admitted late by the rules (moved) already spent
	// its first attempts at the front end: the client's count goes
	// on from there, its waits measured from the attempt admitted.
	a0 := 0
	if s.ch != nil {
		a0 = s.ch.connAttempt[ev.id]
	}
	sent := sched.attemptsFor(s.o.SYNAttempts)
	limit := max(sent, c.synLosses+1)
	switch {
	case moved:
		limit = sent
	case c.gaveUp:
		limit = len(c.synAt)
	}
	if next >= limit {
		// The client waited out its last SYN's timeout too.
		wait := sched.waitBefore(limit) - sched.waitBefore(a0)
		if s.copying[ev.id] {
			// The front end's copies may still get in meanwhile.
			s.h.Push(qEvent{t: c.synStart + s.shift[ev.id] + wait, kind: qSYN, id: ev.id, syn: synGiveUp})
			return
		}
		s.giveUp(ev.id, wait, ev.t)
		return
	}
	var at int64
	if next < len(c.synAt) && !moved {
		at = c.synAt[next]
	} else {
		at = sched.waitBefore(next) - sched.waitBefore(a0)
	}
	s.h.Push(qEvent{t: c.synStart + s.shift[ev.id] + at, kind: qSYN, id: ev.id, n: next})
}

// giveUp ends connection ci's handshake: every SYN it and the front end
// sent was dropped, and the client gave up after waiting wait.
func (s *queueSim) giveUp(ci int, wait, now int64) {
	for _, ti := range s.q.conns[ci].txs {
		// Its pageview's other connections go as captured (the unit
		// failed; they hold the server as the capture had them).
		s.release(ti, now, 0)
	}
	s.synDone[ci] = true
	s.out.failed[ci] = true
	s.out.synWait[ci] = wait
	if s.onFail != nil {
		s.onFail(ci)
	}
}

// moved is how far this replay member moves a timer the model sets on
// its own (a FAST SYN copy, a half-open connection's resent request):
// within ±memberJitter, 0 for the first member.
func (s *queueSim) moved() int64 {
	if s.jitter == nil {
		return 0
	}
	return s.jitter.Int64N(2*memberJitter+1) - memberJitter
}

// fastGap is the FAST SYN gap the front end copies connection ci's SYN
// at (0: none). Only a modelled backlog decides copies: SYN losses no
// full queue explains (lost on the path) keep the analytic model, in
// which the copy succeeds when the client's later SYN did.
func (s *queueSim) fastGap(ci int) int64 {
	if s.ch == nil || s.backlog == 0 || !s.q.conns[ci].fresh {
		return 0
	}
	return s.ch.connFastSYN[ci]
}

// full: the backlog holds as many connections as it may (see
// serverShape): a SYN is dropped while it is full.
func (s *queueSim) full() bool {
	return s.backlog > 0 && s.occupancy() >= s.backlog
}

// occupancy is what the backlog holds: the connections waiting for a
// worker, and the half-open ones where they take slots.
func (s *queueSim) occupancy() int {
	n := len(s.waiting)
	if s.halfOpenSlots {
		n += s.halfOpen
	}
	return n
}

// hold takes a backlog slot for a handshake accepted at t, for rtt.
func (s *queueSim) hold(t, rtt int64) {
	if rtt > 0 {
		s.halfOpen++
		s.h.Push(qEvent{t: t + rtt, kind: qHalfOpen})
	}
}

func (s *queueSim) arrive(ev qEvent) {
	ti, t := ev.id, ev.t
	qt := &s.q.txs[ti]
	halfOpen := qt.leftHalfOpen() && !s.spliced(qt.conn) && !s.limboJudged(qt.conn)
	if halfOpen && !s.halfOpenCopy(ev) {
		return
	}
	if !halfOpen && s.limbo(ev) {
		return
	}
	if s.bind(ev) {
		return
	}
	s.ready[ti] = t
	switch {
	case !halfOpen && ev.n > 0:
		// Out of limbo with the client's resend (limbo noted when the
		// request was first sent, where its server time runs from).
	case !halfOpen:
		s.ready[ti] = t + qt.arrival - qt.accepted()
		s.arrivedT[ti] = s.ready[ti]
	case s.arrivedT[ti] == 0:
		// Taken at the capture's copy: its server time runs from the
		// first copy, as the client's did (halfOpenCopy noted the first
		// copy of a replay that resent).
		s.arrivedT[ti] = t - (qt.arrival - qt.sent)
	}
	s.serve(ti, t)
}

// serve queues or starts transaction ti, which arrived at t.
func (s *queueSim) serve(ti int, t int64) {
	qt := &s.q.txs[ti]
	if c := &s.q.conns[qt.conn]; s.next[qt.conn] == qt.pos+1 && qt.pos+1 < len(c.txs) && s.q.txs[c.txs[qt.pos+1]].pipelined {
		s.scheduleNext(qt.conn, t)
	}
	if qt.unexplained && (s.ch == nil || !s.ch.txsRemoved[ti]) {
		// Served beside the pool (see reconstructService): its measured
		// server time, from its first copy, and no worker. Taking one
		// ahead of the queue, five such responses (0.9%) of the testbed's
		// overloaded server delayed the rest: the null replay's server
		// times came out 15% long.
		s.h.Push(qEvent{t: max(t, s.arrivedT[ti]+qt.measured), kind: qDone, id: ti})
		return
	}
	if qt.measured < 0 || (s.ch != nil && s.ch.txsRemoved[ti]) {
		// Not served here (no service seen, or removed): it passes through
		// as measured and holds no worker.
		s.h.Push(qEvent{t: t + max(qt.measured, 0), kind: qDone, id: ti})
		return
	}
	if s.busy < s.workers {
		s.busy++
		s.h.Push(qEvent{t: max(t, s.ready[ti]) + qt.service, kind: qDone, id: ti})
		return
	}
	// Waiting in the order the server takes them: a prefork server's
	// workers accept connections in the order their handshakes completed
	// (the accept queue), which need not be the order their requests came
	// in; the fit (reconstructService) assumes the same.
	key := s.queueKey(ti)
	at := len(s.waiting)
	for at > 0 && s.queueKey(s.waiting[at-1]) > key {
		at--
	}
	s.waiting = slices.Insert(s.waiting, at, ti)
}

func (s *queueSim) done(ti int, t int64) {
	qt := &s.q.txs[ti]
	served := qt.measured >= 0 && (s.ch == nil || !s.ch.txsRemoved[ti])
	if served {
		s.out.server[ti] = t - s.arrivedT[ti]
		s.shift[qt.conn] += s.out.server[ti] - qt.measured
	}
	if served && !qt.unexplained {
		if s.holding && qt.transfer > 0 {
			s.h.Push(qEvent{t: t + qt.transfer, kind: qFree})
		} else {
			s.free(t)
		}
	}
	s.out.doneAt[ti] = t
	if s.next[qt.conn] == qt.pos+1 {
		s.scheduleNext(qt.conn, t)
	}
	if s.gated != nil {
		s.release(ti, t, t-s.nullDone[ti])
	}
	if s.onDone != nil {
		s.onDone(ti)
	}
}

// free: a worker came free at t and takes the next waiting transaction.
func (s *queueSim) free(t int64) {
	s.busy--
	if len(s.waiting) > 0 {
		next := s.waiting[0]
		s.waiting = s.waiting[1:]
		s.busy++
		s.h.Push(qEvent{t: max(t, s.ready[next]) + s.q.txs[next].service, kind: qDone, id: next})
	}
}

package whatif

// The accept queue's overflow: a handshake that completes while the
// server's accept queue is full leaves the connection half-open, and the
// client's resent requests decide when the server takes it.

import "time"

// halfOpenCopy decides one copy of a request the capture shows the server
// took only after a half-open wait (its accept queue full): the copy is
// taken if copyTaken says so, else the client sends the next on its
// doubling timer. The copy the server took in the capture (n 0) is an
// anchor, as an accepted SYN is. It reports whether the request arrives
// now.
func (s *queueSim) halfOpenCopy(ev qEvent) bool {
	qt := &s.q.txs[ev.id]
	if ev.n == 0 {
		return true
	}
	if ev.n == 1 {
		s.arrivedT[ev.id] = ev.t
	}
	anchor := qt.arrival + s.shift[qt.conn]
	if ev.t >= anchor || s.copyTaken(ev) {
		return true
	}
	next := s.arrivedT[ev.id] + qt.rto*(1<<min(ev.n, 20)-1)
	if next >= anchor {
		s.h.Push(qEvent{t: anchor, kind: qArrive, id: ev.id})
	} else {
		s.h.Push(qEvent{t: next, kind: qArrive, id: ev.id, n: ev.n + 1})
	}
	return false
}

// copyTaken decides a copy the capture shows the server refused, as syn
// decides a SYN it dropped: the null replay keeps that fate and notes the
// queue the copy met; a replay that changed the traffic takes it early
// only where the queue has room and holds fewer than the null replay's
// did then (less load than the capture had, not the model's error).
// Judged by the model's queue alone, copies got in early where nothing
// had changed: in a replay without rules, the queue held the backlog or
// more at 59% of the copies the server really took (nine overload
// baselines), since the early ones sat in it, and the model's handshakes
// found it full more often than the server's did.
func (s *queueSim) copyTaken(ev qEvent) bool {
	ti := ev.id
	if s.ch == nil {
		s.out.queueAtCopy[ti] = append(s.out.queueAtCopy[ti], s.occupancy())
		return false
	}
	if s.backlog == 0 {
		return true
	}
	if len(s.waiting) >= s.backlog {
		return false
	}
	if s.nullCopyQueue == nil {
		return true // no null replay to compare with
	}
	k := ev.n - 1
	return k < len(s.nullCopyQueue[ti]) && s.occupancy() < s.nullCopyQueue[ti][k]
}

// limbo decides whether the handshake of a connection the model let in
// (a FAST SYN copy, or a SYN whose fate the capture does not decide: one
// the rules moved or copied, or a later one than the capture's) completes
// into a full accept queue. Linux then drops the client's ACK and its
// request (a listen overflow) while the client believes it is connected:
// it sends the request again on its loss-probe and retransmission timers,
// and the first copy that finds room gets the connection queued. Those
// timers scale with the round trip the client measured on the handshake,
// which for an answered copy is the whole wait: a copy taken 1.5 s in, on
// a 100 ms path, is next tried 3.4 s after the request. (In the testbed's
// FAST SYN runs, requests whose SYN a copy got in after 200 ms were
// resent 0.78 s or more later.) Connections whose SYN got in as the
// capture has it keep the capture's evidence instead: its half-open waits
// (halfOpenCopy). The server's own SYN/ACK resends are not modelled: a
// SYN queue that full answers with cookies, which the server does not
// resend. It reports whether the request waits.
func (s *queueSim) limbo(ev qEvent) bool {
	ti := ev.id
	qt := &s.q.txs[ti]
	ci := qt.conn
	if !s.limboJudged(ci) || qt.pos != 0 {
		return false
	}
	if len(s.waiting) < s.backlog || ev.n >= maxLimboResends {
		s.queuedAt(ti, ev.t)
		return false
	}
	if ev.n == 0 {
		s.arrivedT[ti] = ev.t + qt.arrival - qt.accepted()
		s.out.limbo++
	}
	next := ev.n + 1
	s.h.Push(qEvent{t: s.arrivedT[ti] + requestResend(s.rttSample[ci], next) + s.moved(), kind: qArrive, id: ti, n: next})
	return true
}

// limboJudged: the model let connection ci in, so limbo (not the
// capture) decides when the server takes it, on a server the capture
// shows dropping handshakes that meet a full accept queue.
func (s *queueSim) limboJudged(ci int) bool {
	// A sample is set only where the model let a fresh connection in
	// (see syn).
	return s.overflowDrops && s.rttSample != nil && s.rttSample[ci] != 0
}

// maxLimboResends bounds the resends limbo waits for (Linux's
// tcp_retries2 is 15; the timers back off to minutes long before).
const maxLimboResends = 15

// requestResend is when a Linux client sends its unanswered request for
// the n-th time (n >= 1), after the first send, given the round trip its
// handshake measured: a tail-loss probe at twice the round trip plus
// 200 ms (one segment out), or when the retransmission timer (the round
// trip plus twice it, at least 200 ms more) would fire if that is sooner;
// then that timer from the probe, doubling, at most 120 s each. The probe
// goes first either way: on the overload baselines, requests on 80 ms
// paths were taken 0.58, 1.16 and 2.31 s after they were sent (resends
// every 0.28 s, then doubling), and 862 of 934 half-open waits ended
// within 60 ms of a resend so timed, 526 with the timer alone after a
// probe that never came.
func requestResend(rtt int64, n int) int64 {
	rto := rtt + max(2*rtt, linuxRTOMin)
	at := min(2*rtt+linuxRTOMin, rto)
	for k := range n - 1 {
		at += min(rto<<k, int64(120*time.Second))
	}
	return at
}

// queuedAt puts transaction ti in the accept queue's order at t, behind
// those queued before it (see queueKey).
func (s *queueSim) queuedAt(ti int, t int64) {
	if s.key == nil {
		s.key = make([]int64, len(s.q.txs))
	}
	s.key[ti] = t
}

// queueKey is transaction ti's place in the accept queue's order: when
// its connection's handshake completed (as the capture has it, moved by
// the replay), or when limbo let it in.
func (s *queueSim) queueKey(ti int) int64 {
	if s.key != nil && s.key[ti] != 0 {
		return s.key[ti]
	}
	qt := &s.q.txs[ti]
	return qt.queued + s.shift[qt.conn]
}

package whatif

// The splicer under the queue model: it answers the client's handshake
// itself and connects to the server when the request comes, with Linux's
// connect(2) (its SYN timer and the kernel's timer wheel) meeting the
// server's accept queue.

import "time"

// bindLead is how long before its request the splicer binds connection
// ci, whose first transaction is ti: the TLS handshake's lead when it binds
// at the ClientHello, else 0 (at the request).
func (s *queueSim) bindLead(ci, ti int) int64 {
	c := &s.q.conns[ci]
	if s.ch == nil || !s.ch.connBindsAtHello[ci] || len(c.txs) == 0 || c.txs[0] != ti {
		return 0
	}
	return c.tlsLead
}

// spliced reports whether connection ci is a splicer's.
func (s *queueSim) spliced(ci int) bool {
	c := &s.q.conns[ci]
	return c.fresh && s.ch != nil && s.ch.connSpliced[ci]
}

// spliceRetry is when a splicer sends its server SYN again after the n-th
// was dropped: the timer of Linux's connect(2) (a splicer connects so, as
// the testbed's does) as kernels have it by default since 6.x
// (net.ipv4.tcp_syn_linear_timeouts = 4): the timer stays at 1 s while
// the retransmissions so far do not exceed that count, so five retries a
// second apart, then doubling (a blackholed connect on Linux 6.18 sent
// its SYNs at 0, 1, 2, 3, 4, 5, 7 and 11 s). With the doubling from the
// first retry of older kernels, the replay had spliced connections wait
// 15 s where the real splicer's waited 4 s (the overload validation's
// p90: +145%).
func spliceRetry(n int) int64 {
	if n <= spliceLinearRetries {
		return int64(time.Second)
	}
	return int64(time.Second) << (n - spliceLinearRetries)
}

// spliceRetryAt is when a splicer whose n-th server SYN was dropped at t
// sends the next: spliceRetry later, when the kernel's timer wheel fires.
// Linux files a timer a second or more away in a bucket of 8 or 64
// jiffies (32 or 256 ms at the usual HZ=250) and fires the whole bucket
// at once, so the splicer's SYNs that were dropped within those 32 ms come
// again together (measured on Linux 6.18: connect(2)'s SYNs 1.012 s, then
// 1.024 s apart).
func spliceRetryAt(t int64, n int) int64 {
	d := spliceRetry(n)
	jiffies := d / int64(linuxJiffy)
	var gran int64
	switch {
	case jiffies < 64:
		gran = int64(linuxJiffy)
	case jiffies < 512:
		gran = 8 * int64(linuxJiffy)
	case jiffies < 4096:
		gran = 64 * int64(linuxJiffy)
	default:
		gran = 512 * int64(linuxJiffy)
	}
	at := t + d
	return (at + gran - 1) / gran * gran
}

// linuxJiffy is a kernel tick at HZ=250, Debian's and most distributions'.
const linuxJiffy = 4 * time.Millisecond

// join completes the handshake of a splicer's connection whose SYN the
// server took: the connection joins the accept queue, or, the queue full
// (other SYNs of the same instant took the room first: the kernel checks
// the queue at each SYN, and queues the connection only at its ACK), it is
// left half-open. The splicer, connected as it sees it, sends the request
// and sends it again on its retransmission timer until one copy finds
// room (in the overload validation 5% of the splicer's connections waited
// so, 0.4-1.6 s). Without this the replay had the SYNs of a bucket of
// retries (spliceRetryAt) dropped one after another as each took the room:
// connections with two or more dropped SYNs came out 2.5 times as many
// as the real splicer's.
func (s *queueSim) join(ev qEvent) {
	ti := ev.id
	if !s.full() || ev.n >= maxLimboResends {
		// In the accept queue's order from now: its captured handshake,
		// seconds of dropped SYNs earlier, would put it ahead of those
		// that got in meanwhile.
		s.queuedAt(ti, ev.t)
		s.serve(ti, ev.t)
		return
	}
	rtt := max(s.q.conns[s.q.txs[ti].conn].rttServer, 0)
	first := ev.t
	if ev.n == 0 {
		s.out.limbo++
	} else {
		first -= requestResend(rtt, ev.n)
	}
	s.h.Push(qEvent{t: first + requestResend(rtt, ev.n+1), kind: qJoin, id: ti, n: ev.n + 1})
}

// spliceLinearRetries is how many retries connect(2) sends a second apart:
// Linux's default tcp_syn_linear_timeouts (4) plus the one its check
// (more retransmissions than the setting) lets through.
const spliceLinearRetries = 5

// bind judges the splicer's own SYN to the server for a spliced
// connection's first request (ev): dropped while the server's queue is
// full, sent again on its timer, else its handshake completes (join). It
// reports whether ev was the splicer's.
func (s *queueSim) bind(ev qEvent) bool {
	ti, t := ev.id, ev.t
	ci := s.q.txs[ti].conn
	if !s.spliced(ci) || s.bindTries[ci] < 0 {
		return false
	}
	// The splicer's own SYN to the server, at the request: dropped
	// while the server's queue is full, sent again on its timer.
	// Its server time counts from when the request would have come
	// had the first SYN got in (a bind at the ClientHello precedes
	// the request by the TLS handshake, which the client's Ttls holds).
	lead := s.bindLead(ci, ti)
	if s.full() && s.bindTries[ci] < maxSpliceTries {
		if s.bindTries[ci] == 0 {
			s.arrivedT[ti] = t + lead
		}
		s.bindTries[ci]++
		s.out.drops++
		s.out.connDrops[ci]++
		s.h.Push(qEvent{t: spliceRetryAt(t, s.bindTries[ci]), kind: qArrive, id: ti})
		return true
	}
	if s.bindTries[ci] == 0 {
		s.arrivedT[ti] = t + lead
	}
	s.bindTries[ci] = -1
	rtt := max(s.q.conns[ci].rttServer, 0)
	s.hold(t, rtt)
	// Bound at the ClientHello, the request follows the TLS handshake
	// through the splice; the worker that accepted waits for it.
	s.ready[ti] = t + lead
	s.h.Push(qEvent{t: t + rtt, kind: qJoin, id: ti})
	return true
}

// maxSpliceTries bounds a splicer's dropped server SYNs: connect(2) with
// Linux's defaults (tcp_syn_retries 6, four linear timeouts) sends SYNs at
// 0, 1, 2, 3, 4, 5, 7, 11, 19, 35 and 67 s and fails at 134 s (measured on
// Linux 6.18), so the replay lets the eleventh in. A splicer that gave up
// sooner would fail the request, which the replay does not model. At 6
// (in at 7 s), the replay let in connections that the testbed's splicer
// really held for 11-19 s behind a server overloaded for a minute.
const maxSpliceTries = 10

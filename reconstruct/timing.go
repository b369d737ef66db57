package reconstruct

import (
	"strconv"
	"time"
)

// emit computes a transaction's client-perceived times and hands it on.
//
// The capture point is at the server side, rtt (the capture point <-> client
// round trip) away from the client, and one-way delay is taken as rtt/2:
//   - the client started a fresh connection at firstSYN - rtt/2 and learnt it
//     was connected at handshakeACK - rtt/2, so Tconn = handshakeACK - firstSYN
//     (SYN and SYN/ACK loss waits included), as curl's time_connect measures;
//   - it sent a request byte at capture time - rtt/2 and received a response
//     byte at capture time + rtt/2, so Tserver = responseFirst - requestLast + rtt
//     and Ttransfer = responseLast - responseFirst, where responseLast is the
//     last needed transmission of the last byte (the client's ACK confirms
//     arrival; a spurious retransmission does not count, see loss.go);
//   - on a TLS connection the client's handshake ended when its Finished
//     left, at clientFinished - rtt/2, so Ttls = clientFinished - handshakeACK;
//   - Trequest runs from the moment the client was connected and done with
//     TLS (fresh connection) or started sending (reused connection) to its
//     last request byte, so the components always add up to Total = End - Start.
//
// A request whose first copy was lost before the capture point started one
// client retransmission wait before the copy seen (requestSent); the wait is
// request time. The phase boundaries are finally put in order, so that no
// component is ever negative whatever the capture held (requests completed
// by a late hole fill, responses that began before their request ended).
func (c *conn) emit(st *txState) {
	if c.tls != nil && c.tls.multiplexed && st.is(tfHeuristic) {
		st.tx.Flags |= FlagHTTP2 | FlagTurnEstimate // keyless HTTP/2: a turn, not a stream
	}
	if c.tls != nil && c.tls.protoUnsure {
		c.tlsHold(st) // TLS 1.3 hid the protocol: maybe HTTP/2's frames
		return
	}
	c.emitTimed(st)
}

// handedOn drops what st and the connection hold of it once it is handed
// on: no chain of past transactions stays reachable, and an idle
// connection keeps only its last response's end, final now.
func (c *conn) handedOn(st *txState) {
	if st.sent != nil {
		st.sent.prev = prevResp{}
	}
	if c.lastResp.st == st {
		c.lastResp = prevResp{last: st.tx.ResponseLast}
	}
}

// emitTimed times st as emit says and hands it on.
func (c *conn) emitTimed(st *txState) {
	tx := &st.tx
	r := &c.rec
	rtt := c.clientRTT()
	half := rtt / 2
	back := rtt - half // so that Tserver gets the whole rtt
	if c.handshakeRTT() == 0 {
		tx.Flags |= FlagRTTEstimated
	}
	if r.Flags&FlagMidStream != 0 {
		tx.Flags |= FlagMidStream
	}
	if !st.is(tfRespStarted) {
		tx.Flags |= FlagNoResponse
	}
	hasRequest := tx.RequestFirst != 0
	sent := tx.RequestFirst
	defer c.handedOn(st)
	if st.is(tfResent) {
		tx.Flags |= FlagUpstreamLoss
	}
	var from, to int64 // when an estimated send may really have been
	if hasRequest && st.tx.upLost > 0 {
		if est, lo, hi, ok := c.requestSent(st); ok {
			sent, from, to = est, lo, hi
			tx.Flags |= FlagUpstreamLoss
		}
	}
	connected := c.connectedAt()
	freshConn := hasRequest && st.opensConn() && len(r.synTimes()) > 0
	if freshConn && connected > 0 && to > 0 && connected >= from-estimateSlack/8 && connected <= to+estimateSlack/8 {
		// An estimate that cannot be told from the connect: the client
		// sent as it connected, as clients that connect to send do.
		sent = connected
	}
	idle := sent - max(connected, c.tlsReady()) + c.ackQueue() // TLS done first; the ACK's queue (handshakeSample)
	if c.is(cfHsAckLost) {
		// connected is then the SYN/ACK's departure plus the path's least
		// round trip, the earliest the client could have connected; a
		// queue may have held the SYN/ACK up to about a round trip more.
		idle -= c.clientRTT()
	}
	if freshConn && connected > 0 && idle > preconnectIdle && !c.sentEarly(st) {
		// The client opened this connection ahead of need (a browser's
		// preconnect or spare socket) and used it later: the wait for the
		// handshake was not part of this request's time.
		freshConn = false
		tx.Flags |= FlagPreconnected
	}
	// Phase boundaries at the client: start, connected, request sent,
	// first response byte received, last response byte received.
	var b0, b1, bT, b2, b3, end int64
	switch {
	case freshConn:
		if connected == 0 || connected > sent {
			// The handshake ACK was not captured: the first request also
			// acknowledges the SYN/ACK.
			connected = sent
		}
		b0, b1 = r.synTimes()[0]-half, connected-half
		bT = c.tlsDoneFor(st, b1, half)
		b2 = tx.RequestLast - half
	case hasRequest:
		b0 = sent - half
		b1, b2 = b0, tx.RequestLast-half
	default:
		// A response without its request: only the transfer is known.
		tx.Flags |= FlagNoRequest
		b0 = tx.ResponseFirst + half
		b1, b2 = b0, b0
	}
	b3, end = b2, b2
	if st.is(tfRespStarted) {
		b3, end = tx.ResponseFirst+back, tx.ResponseLast+back
		if !hasRequest {
			b3, end = b0, tx.ResponseLast+half
		}
	}
	if tx.ResponseAcked == 0 && st.is(tfRespDone) {
		tx.Flags |= FlagNoAck
	}
	// In order, each boundary within [start, end]. A response that began
	// before its request ended (an early error) shortens the request: the
	// overlap is request time, not server time.
	end = max(end, b0)
	b3 = min(max(b3, b0), end)
	b2 = min(max(b2, b0), b3)
	bT = min(max(bT, b1, b0), b2) // = connected without TLS
	b1 = min(max(b1, b0), bT)
	c.t.emitTransaction(c.transaction(st, rtt, [6]int64{b0, b1, bT, b2, b3, end}))
}

// transaction is st's Transaction record, for the sink to own: what st
// kept, the connection's ids and endpoints, and the client-side phase
// boundaries b (start, connected, TLS done, request sent, first and last
// response byte received) with the client's RTT.
func (c *conn) transaction(st *txState, rtt int64, b [6]int64) *Transaction {
	in, r := &st.tx, &c.rec
	id := c.id()
	out := &Transaction{
		ID: id + "-" + strconv.Itoa(int(in.Index)), ConnectionID: id, Index: int(in.Index),
		Interface: int(r.Interface), Client: r.Client(), ClientPort: r.ClientPort, BodyCut: in.BodyCut,
		Server: r.Server(), ServerPort: r.ServerPort, Flags: in.Flags,
		RequestFirst: in.RequestFirst, RequestLast: in.RequestLast,
		ResponseFirst: in.ResponseFirst, ResponseLast: in.ResponseLast,
		ResponseAcked: in.ResponseAcked, RequestAcked: in.RequestAcked,
		Start: b[0], End: b[5],
		Tconn: b[1] - b[0], Ttls: b[2] - b[1], Trequest: b[3] - b[2], Tserver: b[4] - b[3], Ttransfer: b[5] - b[4],
		Total: b[5] - b[0], RTTClient: rtt,
		RetransBytes: st.retransBytes(), RequestBytes: in.RequestBytes, ResponseBytes: in.ResponseBytes,
		BodyBytes: in.BodyBytes, Method: in.reqVal(reqMethod), Host: in.reqVal(reqHost), URL: in.reqVal(reqURL),
		Status: int(in.Status), ContentType: in.contentType(), Referer: in.reqVal(reqReferer),
		UserAgent: in.reqVal(reqUserAgent), Accept: in.reqVal(reqAccept),
		HoleBytes: st.holeBytes(), SecFetchDest: in.reqVal(reqFetchDest), Location: st.location(),
		ContentEncoding: in.contentEncoding(), Body: st.body(),
	}
	st.setBody(nil) // the sink's now: a later request's prev must not keep it
	return out
}

// connectedAt is the capture time that stands for the client's connect: its
// handshake ACK, or, when that ACK was lost before the capture point and the
// first request completed the handshake, the SYN/ACK's time plus the round
// trip to the client. 0 when the handshake was not seen.
func (c *conn) connectedAt() int64 {
	est := c.rec.Established
	if c.is(cfHsAckLost) && est > 0 {
		if rtt := c.clientRTT(); rtt > 0 && c.lastSynAck() > 0 {
			est = min(est, c.lastSynAck()+rtt)
		}
	}
	return est
}

// requestSent estimates when the first copy of st's request, lost before
// the capture point, would have passed it: the client's retransmission wait
// (clientTimer, as the request started) before the copy seen. The estimate
// must fall after
// the moment the client could first have sent the request (connected, or
// the previous response received); the most lost copies that fit are
// taken, and if none does, the lost packets were something else (ACKs)
// and ok is false.
//
// [from, to] is when the send may really have been: the timer wheel's
// spread around the estimate, and for one lost copy every wait the client
// could have had (its RTO from the handshake alone up to the tail loss
// probe, which caps a longer RTO from a remembered RTT the tracker may not
// have seen grow).
func (c *conn) requestSent(st *txState) (sent, from, to int64, ok bool) {
	timer := st.sentAt().timer
	if timer.srtt == 0 {
		// No sample of the client's own (its handshake ACK was lost): the
		// round trip to it and on to the server stands in.
		timer.sample(c.clientRTT()+c.rec.RTTServer, false) // its first
	}
	earliest := c.connectedAt() - c.ackQueue()
	if last := st.sentAt().prev.end(); last > 0 {
		// The copy of the previous response that reached the client, as
		// judged by now (a copy still unjudged is not assumed needed).
		earliest = max(earliest, last+c.clientRTT())
	}
	if earliest == 0 {
		return st.tx.RequestFirst, 0, 0, false
	}
	// Some of the lost packets may have been ACKs nobody could account
	// for: the most copies whose wait fits the client's timing win. A
	// timer estimate a little too long puts the send just before the
	// client could send: that is rounding, not evidence against loss.
	//
	// Weaker evidence must be corroborated by the timing: the copy came
	// one wait after the client could first have sent, within the error of
	// the timer estimate. That is so for numbering seen for only a step or
	// two (a handshake; a host-wide counter passes as easily), and for a
	// loss an ACK explains as well: a request that carries an ACK of new
	// data was sent within the client's delayed-ACK time of that data's
	// arrival, else the client would have sent a pure ACK first.
	//
	// A client whose handshake timestamps gave its own RTT sample
	// (handshakeSample) is a Linux-like stack, which numbers each
	// connection's packets: its numbering is no weak evidence, and its
	// timer is known, so a copy later than one wait after connecting was
	// sent later (a spare connection), not as the client connected.
	weak := c.ipid.steps < 3 && st.sentBy() == 0 && !c.is(cfOwnSample)
	fresh := st.opensConn() && len(c.rec.synTimes()) > 0
	ackOrCopy := st.is(tfUpAckOrCopy) && st.sentBy() == 0
	ok = false
	var wait, spread int64
	k := int(st.tx.upLost)
	for ; k >= 1; k-- {
		wait, spread = timer.lostWait(k, st.is(tfUpMulti))
		sent = st.tx.RequestFirst - wait
		switch {
		case ackOrCopy:
			ok = sent >= earliest-max(estimateSlack, wait/8) && sent <= earliest+linuxDelAck
		case weak:
			ok = sent >= earliest-max(estimateSlack, wait/8) && sent <= earliest+wait/4
			if !ok && k == 1 && fresh {
				// A young connection's one missing packet before its
				// first request: nothing else is sent then. The copy
				// came sooner than the estimate when the handshake ACK
				// queued on the way (rtmon's RTT sample then includes
				// the queue, the client's does not), so only a copy
				// later than one wait after connecting, or one sooner
				// than any timer fires even after such a queue, speaks
				// against a lost first copy.
				//
				// When exactly one number is missing, the client's own
				// timer may also run well longer than the estimate: its
				// RTT sample took whatever held up the SYN/ACK on its way
				// (seen: a copy 450 ms after the handshake where 300 ms
				// was estimated). A copy within three waits of connecting
				// is still the lost first one; a spare connection used
				// later, or gaps of several numbers (a host-wide
				// counter), are not.
				late := wait / 4
				if st.tx.upLost == 1 {
					late = 2 * wait
				}
				ok = sent <= earliest+late && st.tx.RequestFirst-earliest >= freshResendMin
				if ok && sent > earliest+wait/4 {
					// Nothing else leaves a young connection before its
					// first request: the lost copy left as it connected.
					return earliest, earliest, earliest, true
				}
			}
		default:
			ok = sent >= earliest-wait/4
		}
		if ok {
			break
		}
	}
	if !ok && st.sentBy() == 0 {
		return st.tx.RequestFirst, 0, 0, false
	}
	from, to = sent-spread, sent+spread
	if k == 1 {
		lo, hi := timer.firstWaitRange(st.is(tfUpMulti))
		from, to = min(from, st.tx.RequestFirst-hi), max(to, st.tx.RequestFirst-lo)
	}
	if st.sentBy() != 0 {
		sent = min(sent, st.sentBy()) // it left before the ACK that showed it
	}
	return c.rearmedSend(st, min(max(sent, earliest), st.tx.RequestFirst), earliest, wait), from, to, true
}

// rearmedSend corrects the send estimate of st's lost first copy for the
// client's timer restarting: Linux restarts it at each ACK of new data, so
// a copy lost with earlier data in flight was resent one wait after the
// server's last such ACK reached the client, however long before that it
// first left. An estimate that falls where that ACK came back says so:
// the copy left any time from earliest on, and a client sends as soon as
// it can (seen on the HTTPS testbed: an HTTP/2 request sent 10 ms after
// its page's redirect, resent 308 ms after a WINDOW_UPDATE's ACK, timed
// 123 ms short).
func (c *conn) rearmedSend(st *txState, sent, earliest, wait int64) int64 {
	rearmAt := st.sentAt().rearmAt
	if rearmAt == 0 || st.sentBy() != 0 {
		return sent
	}
	restart := rearmAt + c.clientRTT()
	if earliest < restart && restart <= st.tx.RequestFirst && max(sent-restart, restart-sent) <= max(estimateSlack, wait/8) {
		return earliest
	}
	return sent
}

// estimateSlack is how far the client's retransmission wait may be
// misjudged (its timer samples, the timer wheel's granule), and
// linuxDelAck the delayed-ACK time within which a request carries the
// client's acknowledgement of data just received (TCP_DELACK_MIN).
const (
	estimateSlack = int64(25 * time.Millisecond)
	linuxDelAck   = int64(40 * time.Millisecond)
)

// freshResendMin is the shortest time from a handshake ACK to the resent
// first request that a lost first copy explains: half of TCP_RTO_MIN, the
// least any Linux retransmission timer waits, for an ACK that queued up to
// that long on its way to the capture point.
const freshResendMin = linuxRTOMin / 2

// preconnectIdle is how long a connection may sit between its handshake and
// its first request before the connect is no longer counted in that
// request's time. The gap is measured at the capture point, where the
// handshake ACK and the request arrive over the same path, so it is the
// client's own delay whatever the RTT: a client that connects in order to
// send does so within a millisecond or two (curl: ~0.1 ms), while a
// browser's spare connection waits for the HTML to need it (tens of ms to
// seconds). 25 ms leaves a loaded client room for its own scheduling.
const preconnectIdle = int64(25 * time.Millisecond)

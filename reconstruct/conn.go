package reconstruct

import (
	"bytes"
	"net/netip"
	"slices"
	"strconv"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct/http1"
)

// conn is one tracked TCP connection: handshake bookkeeping, the two
// reassembled directions, their HTTP parsers and the transactions in flight.
type conn struct {
	prev, next *conn // Tracker.lru
	t          *Tracker
	clientIsA  bool
	firstSeq   uint32 // enters the stable id, computed when the record is emitted
	twin       uint8  // earlier connections with the same id inputs (see Tracker.instant)
	rec        Connection

	c2s, s2c       halfStream
	c2sLog, s2cLog deliveryLog

	synSeen, synackSeen bool
	synackSinceSyn      bool
	clientISN           uint32
	serverISN           uint32
	lastSynAck          int64
	// synackTS: the two latest SYN/ACKs' timestamp values and times, so the
	// handshake ACK's echo names the one it answers.
	synackTS [2]struct {
		at    int64
		tsval uint32
	}
	handshakeRTT int64
	dataRTT      int64
	probes       rttProbes

	// The parsers exist only while a direction is inside a message: idle
	// keep-alive connections keep just the offsets (see http1.Acquire).
	reqParser, respParser *http1.Parser
	reqOff, respOff       int64
	reqH                  requestEvents
	respH                 responseEvents
	curTS                 int64 // capture time of the bytes being parsed

	pending   []*txState // requests in order, waiting for their responses
	resp      *txState   // response being received
	awaiting  []*txState // complete responses waiting for the client's ACK
	nextIndex int

	// truncated: the snap length cut payload, so parsing gives way to timing
	// by sequence numbers and direction changes.
	truncated bool
	lastAck   int64 // client's highest acknowledged server offset
	serverFIN bool
	clientFIN bool
	rttSaved  bool // the client's RTT went to the tracker's rttCache
	// srvDataAt is the capture time of the server's latest new data;
	// srvQuickFrom the offset where its data resumed after a silence the
	// client answers with an immediate ACK (see noteServerData), -1 none.
	srvDataAt    int64
	srvQuickFrom int64

	// Evidence of loss before the capture point (see loss.go).
	ipid    ipidTrack // the client's IPv4 IDs
	pktLost int       // packets the client lost just before the one being processed, less those explained as ACKs
	pktGap  int       // all packets the client lost just before the one being processed
	pktNew  bool      // the packet being processed was sent after all before it (IP IDs)
	// pktAckOrCopy: the packet's lost predecessors may have been ACKs or
	// its own first copy (see explainLost).
	pktAckOrCopy bool
	srvResent    resentLog // server retransmissions since the client's last packet
	// timer is the client's retransmission timer (see clientTimer);
	// reqAck the latest complete request the server has not acknowledged
	// yet: its end offset and capture time, for the client's next sample.
	timer  clientTimer
	reqAck struct{ end, at int64 }
	// aheadOff: a client pure ACK's sequence number said it had sent the
	// stream up to here (by aheadAt) when the capture had not seen it.
	aheadOff, aheadAt int64
	lostCarry         int // client packets lost before pure ACKs that no ACK explains (see explainLost)
	// oooLost: packets the client lost just before the first segment that
	// arrived ahead of a hole (at offset oooOff): if they outnumber the
	// segments before it, that segment was itself a retransmission.
	oooLost   int
	oooOff    int64
	hsAckLost bool     // the handshake ACK was lost: the first request completed the handshake
	lastResp  *txState // the latest complete response (see requestSent)

	lastSeen   int64
	done       bool
	finishedAt int64
}

// txState is a transaction under construction.
type txState struct {
	tx           Transaction
	reqStartOff  int64
	reqEndOff    int64
	respStartOff int64
	respEndOff   int64
	reqDone      bool
	respStarted  bool
	respDone     bool
	heuristic    bool // timed from sequence numbers, not parsed

	// upLost: copies of the request's first segment lost before the
	// capture point; prev is the connection's latest complete response
	// when the request started, read when the request is timed (a verdict
	// on its retransmissions may come later; see requestSent).
	upLost      int
	upMulti     bool        // upLost counts rounds of a multi-segment flight
	upAckOrCopy bool        // the lost packets may have been ACKs: timing must decide
	timer       clientTimer // the client's retransmission timer when the request started
	sentBy      int64       // the client had sent the request by then (a later pure ACK's sequence number)
	resent      bool        // a segment of the request was resent after a loss before the capture point (see deliverClient)
	prev        *txState
	rtx         []pendingRetrans // nil unless retransmissions await a verdict
}

func newConn(t *Tracker, p *capture.Packet) *conn {
	c := &conn{t: t, firstSeq: p.Seq, srvQuickFrom: -1}
	c.reqH.c, c.respH.c = c, c
	senderIsClient := t.senderIsClient(p)
	_, fromA := makeKey(p)
	c.clientIsA = fromA == senderIsClient
	var client, server netip.AddrPort
	if senderIsClient {
		client, server = netip.AddrPortFrom(p.SrcIP, p.SrcPort), netip.AddrPortFrom(p.DstIP, p.DstPort)
	} else {
		client, server = netip.AddrPortFrom(p.DstIP, p.DstPort), netip.AddrPortFrom(p.SrcIP, p.SrcPort)
	}
	c.rec = Connection{
		Interface:  p.Interface,
		Client:     client.Addr(),
		ClientPort: client.Port(),
		Server:     server.Addr(),
		ServerPort: server.Port(),
		FirstSeen:  p.Timestamp,
	}
	if p.Flags&(capture.FlagSYN|capture.FlagACK) != capture.FlagSYN {
		c.rec.Flags |= FlagMidStream
	}
	if c.rec.Flags&FlagMidStream != 0 {
		c.reqP().Resync()
		c.respP().Resync()
	}
	return c
}

// senderIsClient decides the direction of a connection first seen with p.
func (t *Tracker) senderIsClient(p *capture.Packet) bool {
	if p.Flags&capture.FlagSYN != 0 {
		return p.Flags&capture.FlagACK == 0
	}
	for _, port := range t.cfg.ServerPorts {
		if p.DstPort == port {
			return true
		}
		if p.SrcPort == port {
			return false
		}
	}
	for _, n := range t.cfg.ServerNets {
		if n.Contains(p.DstIP) {
			return true
		}
		if n.Contains(p.SrcIP) {
			return false
		}
	}
	if len(p.Payload) > 0 {
		if http1.LooksLikeRequest(p.Payload) {
			return true
		}
		if bytes.HasPrefix(p.Payload, []byte("HTTP/1.")) {
			return false
		}
	}
	// The lower well-known port serves; failing that, the lower port.
	srcWK, dstWK := p.SrcPort < 1024, p.DstPort < 1024
	if srcWK != dstWK {
		return dstWK
	}
	return p.DstPort <= p.SrcPort
}

// startsNewConnection: a SYN with a new ISN on a known tuple is a new
// connection (port reuse); a retransmitted SYN is not.
func (c *conn) startsNewConnection(p *capture.Packet) bool {
	if p.Flags&(capture.FlagSYN|capture.FlagACK) != capture.FlagSYN {
		return false
	}
	return !(c.synSeen && p.Seq == c.clientISN && c.rec.Established == 0)
}

func (c *conn) packet(p *capture.Packet, fromClient bool) {
	ts := p.Timestamp
	c.rec.LastSeen = ts
	if c.done {
		return // late ACKs and retransmitted FINs of a finished connection
	}
	c.pktLost, c.pktGap, c.pktNew, c.pktAckOrCopy = 0, 0, false, false
	if fromClient && p.SrcIP.Is4() {
		completes := c.rec.Established == 0 && p.PayloadLen > 0 && p.Flags&capture.FlagACK != 0
		c.pktLost = c.ipid.step(p.IPID, completes)
		c.pktGap = c.pktLost
		c.pktNew = c.ipid.sent()
	}
	if p.Flags&capture.FlagSYN != 0 {
		c.handshake(p, fromClient)
		return
	}
	if p.Flags&capture.FlagRST != 0 {
		c.rec.Flags |= FlagReset
		c.rec.Closed = ts
		c.end(0)
		return
	}
	if p.PayloadLen > len(p.Payload) && !c.truncated {
		c.truncated = true
		for _, st := range c.pending {
			st.tx.Flags |= FlagTruncatedPayload
		}
		if c.resp != nil {
			c.resp.tx.Flags |= FlagTruncatedPayload
		}
	}
	if fromClient {
		c.fromClient(p)
		c.pktLost = 0 // it described this packet only
		c.srvResent = resentLog{}
	} else {
		c.fromServer(p)
	}
	if c.clientFIN && !c.rttSaved && (c.serverFIN || !fromClient) {
		// The client's FIN is acknowledged (the server ACKs it at once):
		// the client stores its RTT for the destination now.
		c.rttSaved = true
		c.t.rtts.save(c.addrs(), c.timer.srtt, ts)
	}
	if c.clientFIN && c.serverFIN && !c.done {
		c.rec.Closed = ts
		c.end(0)
	}
}

func (c *conn) addrs() addrPair { return addrPair{c.rec.Client, c.rec.Server} }

func (c *conn) handshake(p *capture.Packet, fromClient bool) {
	ts := p.Timestamp
	if fromClient && p.Flags&capture.FlagACK == 0 {
		if !c.synSeen {
			c.synSeen = true
			c.clientISN = p.Seq
			c.c2s.setBase(p.Seq + 1)
			if p.MSS > 0 {
				c.rec.MSSClient = int(p.MSS)
			}
		} else if c.synackSinceSyn {
			c.rec.SYNACKLosses++
		} else {
			c.rec.SYNLosses++
		}
		c.rec.SYNTimes = append(c.rec.SYNTimes, ts)
		c.synackSinceSyn = false
		return
	}
	if !fromClient && p.Flags&capture.FlagACK != 0 {
		if !c.synackSeen {
			c.synackSeen = true
			c.serverISN = p.Seq
			c.s2c.setBase(p.Seq + 1)
			if p.MSS > 0 {
				c.rec.MSSServer = int(p.MSS)
			}
		}
		if c.synackSinceSyn {
			// The server retransmitted its SYN/ACK: the first never got an answer.
			c.rec.SYNACKLosses++
		} else if n := len(c.rec.SYNTimes); n > 0 {
			c.rec.RTTServer = ts - c.rec.SYNTimes[n-1]
		}
		c.rec.SYNACKTimes = append(c.rec.SYNACKTimes, ts)
		c.synackSinceSyn = true
		c.lastSynAck = ts
		if p.HasTimestamps {
			c.synackTS[0] = c.synackTS[1]
			c.synackTS[1].at, c.synackTS[1].tsval = ts, p.TSVal
		}
	}
}

func (c *conn) fromClient(p *capture.Packet) {
	ts := p.Timestamp
	if p.Flags&capture.FlagACK != 0 {
		if c.synackSeen && c.rec.Established == 0 && p.Ack == c.serverISN+1 {
			c.rec.Established = ts
			if p.PayloadLen > 0 && c.pktLost > 0 {
				// The handshake ACK was lost before the capture point and
				// the request completed the handshake: its time is not the
				// client's connect time, and one lost packet is explained.
				c.hsAckLost = true
				c.pktLost--
				if c.pktLost == 0 {
					// The request itself was not lost: sent as the SYN/ACK
					// arrived, it bounds the round trip from above.
					c.dataRTT = ts - c.lastSynAck
				}
			} else {
				c.handshakeRTT = ts - c.answeredSynAck(p)
				c.timer.sample(ts - c.answeredSyn())
			}
			c.timer.initRTO = c.t.rtts.initialRTO(c.addrs(), &c.timer, ts)
		}
		if !c.s2c.baseKnown {
			c.s2c.setBase(p.Ack) // mid-stream: the client tells where the server's stream is
		}
		a := c.clientAckInfo(p)
		c.explainLost(p, a)
		c.clientAck(a)
	}
	if p.PayloadLen == 0 && p.Flags&capture.FlagFIN == 0 {
		if c.c2s.baseKnown {
			// A pure ACK whose sequence number is past every byte seen:
			// the client had sent bytes the capture never got.
			if off := c.c2s.offset(p.Seq); off > c.c2s.highest && off > c.aheadOff {
				c.aheadOff, c.aheadAt = off, ts
			}
		}
		return
	}
	if !c.c2s.baseKnown {
		c.c2s.setBase(p.Seq)
	}
	hadHole := c.c2s.ooo != nil
	retrans, reordered := c.c2s.segment(ts, p.Seq, p.Payload, p.PayloadLen, p.Flags&capture.FlagFIN != 0,
		c.t.cfg.MaxBufferedBytes, c.deliverClient, c.gapClient)
	c.account(&c.c2s, retrans, reordered)
	if reordered && !hadHole {
		c.oooLost, c.oooOff = c.pktLost, c.c2s.offset(p.Seq)
	}
	if c.c2s.finReady() {
		c.c2s.closed = true
		c.clientFIN = true
		c.curTS = ts
		c.reqP().Close(&c.reqH)
	}
}

func (c *conn) fromServer(p *capture.Packet) {
	ts := p.Timestamp
	if p.Flags&capture.FlagACK != 0 {
		if !c.c2s.baseKnown {
			c.c2s.setBase(p.Ack)
		}
		if c.reqAck.end > 0 && c.c2s.offset(p.Ack) >= c.reqAck.end {
			// The client's sample for its request: out, and this ACK back.
			c.timer.sample(ts - c.reqAck.at + c.clientRTT())
			c.reqAck.end = 0
		}
		if off := c.c2s.offset(p.Ack); off > c.c2s.next {
			c.c2s.acked(off, c.deliverClient, c.gapClient)
		}
	}
	if p.PayloadLen == 0 && p.Flags&capture.FlagFIN == 0 {
		return
	}
	if !c.s2c.baseKnown {
		c.s2c.setBase(p.Seq)
	}
	off := c.s2c.offset(p.Seq)
	if p.PayloadLen > 0 && off >= c.s2c.highest {
		c.noteServerData(ts, off)
	}
	retrans, reordered := c.s2c.segment(ts, p.Seq, p.Payload, p.PayloadLen, p.Flags&capture.FlagFIN != 0,
		c.t.cfg.MaxBufferedBytes, c.deliverServer, c.gapServer)
	c.account(&c.s2c, retrans, reordered)
	if retrans > 0 {
		c.srvResent.add(p)
		c.serverRetransmitted(p, off, off+int64(retrans))
	}
	if c.s2c.finReady() {
		c.closeServerStream()
	}
}

func (c *conn) account(h *halfStream, retrans int, reordered bool) {
	if reordered {
		c.t.stats.OutOfOrderSegments++
	}
	switch {
	case retrans < 0:
		c.t.stats.OutOfWindow++
	case retrans > 0:
		c.t.stats.RetransSegments++
		h.retransBytes += int64(retrans)
	}
}

// closeServerStream ends the server's byte stream: a close-delimited body
// ends with the last byte before the FIN, timed by that byte's packet.
func (c *conn) closeServerStream() {
	c.s2c.closed = true
	c.serverFIN = true
	c.curTS = c.s2cLog.last() // a close-delimited body ended with its last byte
	if c.truncated {
		c.endHeuristicResponse()
		return
	}
	c.respP().Close(&c.respH)
}

// serverRetransmitted handles server bytes [from, to) sent again by p: a
// response is complete at the client only when its last needed byte
// arrived, and the bytes count against the transaction they belong to.
// Bytes the client had acknowledged were resent spuriously; bytes beyond
// its last ACK wait for its next ACK to say whether it lacked them.
func (c *conn) serverRetransmitted(p *capture.Packet, from, to int64) {
	c.probes.reset() // Karn: an ACK after a retransmission is ambiguous
	for _, st := range c.awaiting {
		if from < st.respEndOff && to > st.respStartOff {
			if to > c.lastAck {
				c.addRetrans(st, pendingRetrans{at: p.Timestamp, from: from, to: to, hasTS: p.HasTimestamps, tsVal: p.TSVal,
					tail: to >= st.respEndOff})
			} else {
				st.tx.Flags |= FlagSpuriousRetrans
			}
			st.tx.RetransBytes += min(to, st.respEndOff) - max(from, st.respStartOff)
		}
	}
	if c.resp != nil {
		c.resp.tx.RetransBytes += to - from
	}
}

// clientAck processes the client's cumulative ACK of the server's stream.
func (c *conn) clientAck(a ackInfo) {
	ts, off := a.ts, a.off
	for _, st := range c.awaiting {
		if len(st.rtx) > 0 {
			c.judgeRetrans(st, a)
		}
	}
	if off > c.s2c.next && off <= c.s2c.highest+1 {
		c.s2c.acked(off, c.deliverServer, c.gapServer)
		if c.s2c.finReady() {
			c.closeServerStream()
		}
	}
	if off <= c.lastAck {
		return
	}
	c.lastAck = off
	if sent, ok := c.probes.acked(off); ok {
		if s := ts - sent; c.dataRTT == 0 || s < c.dataRTT {
			c.dataRTT = s
		}
	}
	for len(c.awaiting) > 0 && c.awaiting[0].respEndOff <= off {
		st := c.awaiting[0]
		c.awaiting[0] = nil
		c.awaiting = c.awaiting[1:]
		st.tx.ResponseAcked = ts
		c.emit(st)
	}
}

func (c *conn) deliverClient(ts, arrived, off int64, captured []byte, wireLen int) {
	c.curTS = ts
	lost := c.pktLost
	c.c2sLog.add(off, off+int64(wireLen), ts, lost, c.pktAckOrCopy)
	c.pktLost = 0 // the losses came before the packet's own bytes, delivered first
	if c.truncated {
		c.heuristicClientData(ts, off, captured, wireLen)
		return
	}
	p := c.reqP()
	p.SegmentStart()
	p.Feed(captured, &c.reqH)
	if len(captured) < wireLen {
		p.Gap(int64(wireLen-len(captured)), &c.reqH)
	}
	c.releaseIdleParsers()
	if n := len(c.pending); n > 0 {
		st := c.pending[n-1]
		switch {
		case off < st.reqStartOff:
		case arrived < ts:
			// A later piece of the request overtook its first one: the
			// client was sending by the time it passed. If what filled the
			// hole was sent after the pieces that overtook it (IP IDs), it
			// was a retransmission: the first copy was lost before the
			// capture point.
			st.tx.RequestFirst = min(st.tx.RequestFirst, arrived)
			if c.pktNew {
				st.resent = true
			}
			if c.oooLost > 0 && off <= c.oooOff && c.oooOff < off+int64(wireLen) {
				// The piece that overtook the hole came after lost packets;
				// those beyond the request's segments before it were
				// copies of the flight, so this piece was resent too (a
				// tail probe resends the last segment first).
				seg := c.sendMSS()
				before := int((c.oooOff - st.reqStartOff + seg/2) / seg)
				if rounds := c.oooLost - before; rounds > 0 && arrived == st.tx.RequestFirst {
					st.upLost, st.upMulti = rounds, true
				}
				c.oooLost = 0
			}
		case lost > 0 && off > st.reqStartOff:
			// A later segment of the request came after lost packets: its
			// first copy was lost (the wait is in RequestLast already).
			st.resent = true
		}
	}
}

func (c *conn) deliverServer(ts, _, off int64, captured []byte, wireLen int) {
	c.curTS = ts
	c.s2cLog.add(off, off+int64(wireLen), ts, 0, false)
	c.probes.sent(off+int64(wireLen), ts)
	if c.truncated {
		c.heuristicServerData(ts, off, captured, wireLen)
		return
	}
	p := c.respP()
	p.SegmentStart()
	p.Feed(captured, &c.respH)
	if len(captured) < wireLen {
		p.Gap(int64(wireLen-len(captured)), &c.respH)
	}
	c.releaseIdleParsers()
}

func (c *conn) gapClient(off, n int64) {
	c.t.stats.Holes++
	c.t.stats.HoleBytes += uint64(n)
	if st := c.currentRequest(); st != nil {
		st.tx.Flags |= FlagHole
		st.tx.HoleBytes += n
	}
	if !c.truncated {
		c.reqP().Gap(n, &c.reqH)
		c.releaseIdleParsers()
	}
}

func (c *conn) gapServer(off, n int64) {
	c.t.stats.Holes++
	c.t.stats.HoleBytes += uint64(n)
	if c.resp != nil {
		c.resp.tx.Flags |= FlagHole
		c.resp.tx.HoleBytes += n
	}
	if !c.truncated {
		c.respP().Gap(n, &c.respH)
		c.releaseIdleParsers()
	}
}

// currentRequest is the request whose bytes are arriving, if any.
func (c *conn) currentRequest() *txState {
	if n := len(c.pending); n > 0 && !c.pending[n-1].reqDone {
		return c.pending[n-1]
	}
	return nil
}

func (c *conn) newTx() *txState {
	st := &txState{}
	st.tx.Index = c.nextIndex
	c.nextIndex++
	if c.truncated {
		st.tx.Flags |= FlagTruncatedPayload
	}
	return st
}

// addPending queues a new request; past the bound the oldest is given up as
// unanswered so pipelined garbage cannot grow memory.
func (c *conn) addPending(st *txState) {
	if len(c.pending) >= c.t.cfg.MaxPendingRequests {
		c.t.stats.PendingOverflows++
		old := c.pending[0]
		c.pending = slices.Delete(c.pending, 0, 1)
		old.tx.Flags |= FlagNoResponse
		c.emit(old)
	}
	c.pending = append(c.pending, st)
}

// takeRequest pairs a starting response with the oldest unanswered request.
func (c *conn) takeRequest() *txState {
	if len(c.pending) == 0 {
		st := c.newTx()
		st.tx.Flags |= FlagNoRequest
		return st
	}
	st := c.pending[0]
	c.pending = slices.Delete(c.pending, 0, 1)
	return st
}

// completeResponse moves the finished response to wait for the client's ACK,
// or emits it at once if that ACK already went by.
func (c *conn) completeResponse(st *txState) {
	st.respDone = true
	if c.resp == st {
		c.resp = nil
	}
	c.lastResp = st
	if st.respEndOff <= c.lastAck {
		st.tx.ResponseAcked = c.curTS
		c.emit(st)
		return
	}
	c.awaiting = append(c.awaiting, st)
}

// end finishes the connection: whatever is buffered is delivered, parsers
// are closed, and every transaction still open is emitted with flags saying
// what is missing.
func (c *conn) end(flags Flags) {
	if c.done {
		return
	}
	c.done = true
	c.rec.Flags |= flags
	c.c2s.flush(c.deliverClient, c.gapClient)
	c.s2c.flush(c.deliverServer, c.gapServer)
	if !c.c2s.closed {
		c.c2s.closed = true
		c.reqP().Close(&c.reqH)
	}
	if !c.s2c.closed {
		c.closeServerStream()
	}
	c.releaseParsers()
	for _, st := range c.awaiting {
		st.tx.Flags |= FlagNoAck | (flags & FlagEvicted)
		for _, r := range st.rtx {
			c.settleRetrans(st, r, false) // no word from the client: assume it needed the bytes
		}
		st.rtx = nil
		c.emit(st)
	}
	c.awaiting = nil
	if c.resp != nil {
		c.resp.tx.Flags |= FlagIncomplete | flags
		c.emit(c.resp)
		c.resp = nil
	}
	for _, st := range c.pending {
		st.tx.Flags |= FlagNoResponse | flags
		if !st.reqDone {
			st.tx.Flags |= FlagIncomplete
		}
		c.emit(st)
	}
	c.pending = nil
}

// finalizeConnection fills the connection's derived fields.
func (c *conn) finalizeConnection() {
	r := &c.rec
	r.ID = c.id()
	r.RTTClient = c.clientRTT()
	if len(r.SYNTimes) > 0 {
		if r.Established > 0 {
			r.Tconn = max(c.connectedAt()-r.SYNTimes[0], 0)
		} else {
			r.Flags |= FlagIncomplete // the handshake never completed
		}
	}
	r.BytesClient = c.c2s.bytes
	r.BytesServer = c.s2c.bytes
	r.RetransBytes = c.c2s.retransBytes + c.s2c.retransBytes
	r.Transactions = c.nextIndex
	r.SYNLossGap, r.SYNACKLossGap = handshakeLossGaps(r)
	if c.handshakeRTT == 0 {
		r.Flags |= FlagRTTEstimated
	}
}

// id is the connection's stable id, made on first use: most connections
// need it only once, when their first record goes out.
func (c *conn) id() string {
	if c.rec.ID == "" {
		c.rec.ID = connectionID(netip.AddrPortFrom(c.rec.Client, c.rec.ClientPort),
			netip.AddrPortFrom(c.rec.Server, c.rec.ServerPort), c.rec.FirstSeen, c.firstSeq)
		if c.twin > 0 {
			c.rec.ID += "." + strconv.Itoa(int(c.twin))
		}
	}
	return c.rec.ID
}

// answeredSynAck is the capture time of the SYN/ACK a handshake ACK
// answers: the one whose timestamp it echoes, else the latest. After a
// lost SYN/ACK the server may send two close together (its own timer's and
// the answer to the client's retransmitted SYN); the client answers the
// first to arrive.
func (c *conn) answeredSynAck(p *capture.Packet) int64 {
	if p.HasTimestamps {
		for _, s := range c.synackTS {
			if s.at != 0 && s.tsval == p.TSEcr {
				return s.at
			}
		}
	}
	return c.lastSynAck
}

// answeredSyn is the capture time of the SYN the server first answered: the
// client's round-trip sample runs from it, for Linux takes the sample from
// the SYN/ACK's timestamp echo, and a retransmitted SYN/ACK still echoes
// that SYN (so after a lost SYN/ACK the sample spans the SYN timeout).
func (c *conn) answeredSyn() int64 {
	r := &c.rec
	answered := r.SYNTimes[len(r.SYNTimes)-1]
	if len(r.SYNACKTimes) > 0 {
		for _, syn := range r.SYNTimes {
			if syn <= r.SYNACKTimes[0] {
				answered = syn
			}
		}
	}
	return answered
}

// sendMSS is the client's payload per full segment: the MSS the server
// advertised, less the timestamp option most stacks send.
func (c *conn) sendMSS() int64 {
	if c.rec.MSSServer > 12 {
		return int64(c.rec.MSSServer - 12)
	}
	return 1448
}

// key is the table key, rebuilt from the record instead of stored twice.
func (c *conn) key() flowKey {
	k, _ := keyOf(c.rec.Client, c.rec.Server, c.rec.ClientPort, c.rec.ServerPort)
	return k
}

// clientRTT is the round trip between the capture point and the client: the
// smallest sample of the handshake (SYN/ACK out, ACK back) and of data/ACK
// pairs. Queueing or a delayed ACK only ever inflates a sample, so the
// minimum is the best estimate of the path itself.
func (c *conn) clientRTT() int64 {
	switch {
	case c.handshakeRTT > 0 && c.dataRTT > 0:
		return min(c.handshakeRTT, c.dataRTT)
	case c.handshakeRTT > 0:
		return c.handshakeRTT
	}
	return c.dataRTT
}

// rttProbes remembers when recent server segments left, so the client's ACKs
// yield RTT samples when no handshake was captured. The newest segment an ACK
// covers gives the sample: the client acknowledges on receipt (or within its
// delayed-ACK timer, which the minimum over samples filters out). With more
// segments in flight than the ring holds (a bulk transfer), the ring's
// entries are gone before their ACKs come back; one segment is then timed
// until its ACK arrives (as TCP senders time one segment per round trip),
// a sample that may include the gap to the segment that triggered the ACK.
type rttProbes struct {
	ring [3]struct{ end, ts int64 }
	head int // next slot to write
	n    int
	held struct{ end, ts int64 } // ts 0: none
}

func (r *rttProbes) sent(end, ts int64) {
	r.ring[r.head].end, r.ring[r.head].ts = end, ts
	r.head = (r.head + 1) % len(r.ring)
	if r.n < len(r.ring) {
		r.n++
	}
	if r.held.ts == 0 {
		r.held.end, r.held.ts = end, ts
	}
}

// acked returns the send time of the newest segment ending at or before off
// and forgets every segment the ACK covers.
func (r *rttProbes) acked(off int64) (int64, bool) {
	held := r.held
	if held.ts != 0 && held.end <= off {
		r.held.ts = 0
	}
	for i := 0; i < r.n; i++ {
		slot := (r.head - 1 - i + len(r.ring)) % len(r.ring)
		if r.ring[slot].end <= off {
			ts := r.ring[slot].ts
			r.n = i // older entries are covered too
			return ts, true
		}
	}
	if held.ts != 0 && held.end <= off {
		return held.ts, true
	}
	return 0, false
}

func (r *rttProbes) reset() { r.n, r.held.ts = 0, 0 }

func (c *conn) reqP() *http1.Parser {
	if c.reqParser == nil {
		c.reqParser = http1.Acquire(http1.Request, c.t.cfg.MaxHeaderBytes, c.reqOff)
	}
	return c.reqParser
}

func (c *conn) respP() *http1.Parser {
	if c.respParser == nil {
		c.respParser = http1.Acquire(http1.Response, c.t.cfg.MaxHeaderBytes, c.respOff)
	}
	return c.respParser
}

// releaseIdleParsers hands back parsers that hold no state but their offset.
func (c *conn) releaseIdleParsers() {
	if p := c.reqParser; p != nil && p.Idle() {
		c.reqOff = p.Offset()
		p.Release()
		c.reqParser = nil
	}
	if p := c.respParser; p != nil && p.Idle() {
		c.respOff = p.Offset()
		p.Release()
		c.respParser = nil
	}
}

func (c *conn) releaseParsers() {
	if c.reqParser != nil {
		c.reqParser.Release()
		c.reqParser = nil
	}
	if c.respParser != nil {
		c.respParser.Release()
		c.respParser = nil
	}
}

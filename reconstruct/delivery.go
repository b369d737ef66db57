package reconstruct

import (
	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct/http1"
)

// Delivery: the in-order bytes and gaps of each direction handed to its HTTP
// parser, and the client's ACKs of the response.

// serverRetransmitted handles server bytes [from, to) sent again by p: a
// response is complete at the client only when its last needed byte
// arrived, and the bytes count against the transaction they belong to.
// Bytes the client had acknowledged were resent spuriously; bytes beyond
// its last ACK wait for its next ACK to say whether it lacked them. That
// holds for the response still being sent too: a delay spike makes the
// server's timer resend the head of a window while the rest is unsent.
// Bytes before a response that the client lacks hold it back as well, as
// TCP delivers in order: a TLS 1.3 session ticket lost on the way to the
// client kept the response sent after it from the Go client for the RTO (192 ms
// on the HTTPS testbed).
func (c *conn) serverRetransmitted(p *capture.Packet, from, to int64) {
	c.s2cLog.resetProbes() // Karn: an ACK after a retransmission is ambiguous
	lacked := to > c.lastAck
	for _, st := range c.awaiting() {
		if from < st.respEndOff && (to > st.respStartOff || lacked) {
			c.responseCopy(st, p, from, to, to >= st.respEndOff)
			st.addRetransBytes(min(to, st.respEndOff) - max(from, st.respStartOff))
		}
	}
	if st := c.resp; st != nil && (to > st.respStartOff || lacked) {
		c.responseCopy(st, p, from, to, false) // its end is not known yet
		st.addRetransBytes(to - max(from, st.respStartOff))
	}
}

// responseCopy records a copy of st's response bytes [from, to).
func (c *conn) responseCopy(st *txState, p *capture.Packet, from, to int64, tail bool) {
	if to <= c.lastAck {
		st.tx.Flags |= FlagSpuriousRetrans
		return
	}
	c.addRetrans(st, pendingRetrans{at: p.Timestamp, from: from, to: to, hasTS: p.HasTimestamps, tsVal: p.TSVal, tail: tail})
}

// clientAck processes the client's cumulative ACK of the server's stream.
func (c *conn) clientAck(a ackInfo) {
	ts, off := a.ts, a.off
	for _, st := range c.awaiting() {
		if len(st.retrans()) > 0 {
			c.judgeRetrans(st, a)
		}
	}
	if c.resp != nil && len(c.resp.retrans()) > 0 {
		c.judgeRetrans(c.resp, a)
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
	if sent, ok := c.s2cLog.acked(off); ok {
		if s := ts - sent; c.dataRTT == 0 || s < c.dataRTT {
			c.dataRTT = s
		}
	}
	for l := c.awaiting(); len(l) > 0 && l[0].respEndOff <= off; l = c.awaiting() {
		st := l[0]
		l[0] = nil
		c.setAwaiting(l[1:])
		st.tx.ResponseAcked = ts
		c.emit(st)
	}
}

func (c *conn) deliverClient(ts, arrived, off int64, captured []byte, wireLen int) {
	c.curTS = ts
	lost := c.pktLost
	// A piece that arrives now and whose successors wait buffered since
	// they overtook it: resent, if it left after them.
	_, oooOff, oooAt := c.oooNote()
	refill := arrived == ts && c.is(cfPktNew) && c.c2s.ooo != nil && oooOff >= off+int64(wireLen)
	first := arrived
	if refill {
		// TCP sends new data in sequence order: the lost first copy left
		// before the first segment that overtook it, which reached the
		// capture point at oooAt.
		first = min(first, oooAt)
	}
	c.addClientPiece(deliveryPiece{off: off, end: off + int64(wireLen), ts: ts, arrived: first, lost: lost,
		ackOrCopy: c.is(cfPktAckOrCopy), refill: refill})
	c.pktLost = 0 // the losses came before the packet's own bytes, delivered first
	c.maybeStartTLS(off, captured)
	switch {
	case c.tls != nil:
		c.tlsData(true, ts, off, captured, wireLen)
	case c.is(cfTruncated):
		c.heuristicClientData(ts, off, captured, wireLen)
		return
	default:
		c.feed(c.reqP(), (*requestEvents)(c), captured, wireLen)
	}
	if n := len(c.pending()); n > 0 {
		st := c.pending()[n-1]
		switch {
		case off < st.reqStartOff:
		case arrived < ts:
			// A later piece of the request overtook its first one: the
			// client was sending by the time it passed. If what filled the
			// hole was sent after the pieces that overtook it (IP IDs), it
			// was a retransmission: the first copy was lost before the
			// capture point.
			st.tx.RequestFirst = min(st.tx.RequestFirst, arrived)
			if c.is(cfPktNew) {
				st.set(tfResent, true)
			}
			if oooLost, oooOff, _ := c.oooNote(); oooLost > 0 && off <= oooOff && oooOff < off+int64(wireLen) {
				// The piece that overtook the hole came after lost packets;
				// those beyond the request's segments before it were
				// copies of the flight, so this piece was resent too (a
				// tail probe resends the last segment first).
				seg := c.sendMSS()
				before := int((oooOff - st.reqStartOff + seg/2) / seg)
				if rounds := oooLost - before; rounds > 0 && arrived == st.tx.RequestFirst {
					st.tx.upLost = int8(rounds) // rounds <= oooLost, an int8's
					st.set(tfUpMulti, true)
				}
				c.loss.oooLost = 0
			}
		case lost > 0 && off > st.reqStartOff && !c.tlsPastEarly(st, off):
			// A later segment of the request came after lost packets: its
			// first copy was lost (the wait is in RequestLast already).
			st.set(tfResent, true)
		}
	}
}

func (c *conn) deliverServer(ts, _, off int64, captured []byte, wireLen int) {
	c.curTS = ts
	c.s2cLog.add(off, off+int64(wireLen), ts)
	switch {
	case c.tls != nil:
		c.tlsData(false, ts, off, captured, wireLen)
	case c.is(cfTruncated):
		c.heuristicServerData(ts, off, captured, wireLen)
	default:
		c.feed(c.respP(), (*responseEvents)(c), captured, wireLen)
	}
}

// feed hands one segment's bytes to a direction's parser: the captured
// ones, then the part the snap length cut off as a gap.
func (c *conn) feed(p *http1.Parser, h http1.Handler, captured []byte, wireLen int) {
	p.SegmentStart()
	p.Feed(captured, h)
	if len(captured) < wireLen {
		p.Gap(int64(wireLen-len(captured)), h)
	}
	c.releaseIdleParsers()
}

func (c *conn) gapClient(off, n int64) {
	c.notes().gapped[0] += n
	c.t.stats.Holes++
	c.t.stats.HoleBytes += uint64(n)
	if st := c.currentRequest(); st != nil {
		st.addHole(n)
	}
	switch {
	case c.tls != nil:
		c.tlsGap(true, n)
	case !c.is(cfTruncated):
		c.reqP().Gap(n, (*requestEvents)(c))
		c.releaseIdleParsers()
	}
}

func (c *conn) gapServer(off, n int64) {
	c.notes().gapped[1] += n
	c.t.stats.Holes++
	c.t.stats.HoleBytes += uint64(n)
	if c.resp != nil {
		c.resp.addHole(n)
	}
	switch {
	case c.tls != nil:
		c.tlsGap(false, n)
	case !c.is(cfTruncated):
		c.respP().Gap(n, (*responseEvents)(c))
		c.releaseIdleParsers()
	}
}

func (c *conn) reqP() *http1.Parser {
	if c.reqParser == nil {
		c.reqParser = http1.Acquire(http1.Request, c.t.cfg.MaxHeaderBytes, c.reqOff)
		c.reqParser.SetBudget(&c.t.headers)
	}
	return c.reqParser
}

func (c *conn) respP() *http1.Parser {
	if c.respParser == nil {
		if st := c.parkedIn(); st != nil {
			c.respParser = st.parked.Resume(c.t.cfg.MaxHeaderBytes, c.respOff)
		} else {
			c.respParser = http1.Acquire(http1.Response, c.t.cfg.MaxHeaderBytes, c.respOff)
		}
		c.respParser.SetBudget(&c.t.headers)
	}
	return c.respParser
}

// parkedIn is the transaction whose txState holds the parked response
// parser, nil if none does: the response arriving, else a request
// waiting for its response (see releaseIdleParsers).
func (c *conn) parkedIn() *txState {
	if c.resp != nil && c.resp.parked.Held() {
		return c.resp
	}
	for _, st := range c.pending() {
		if st.parked.Held() {
			return st
		}
	}
	return nil
}

// releaseIdleParsers hands back parsers that hold no state but their offset,
// and parks a response parser inside a body, or waiting for the responses
// of pending requests, in the txState of the response arriving or of the
// newest request (respP resumes it): these are the states most
// connections that carry data wait in, and a parser would be a fifth of
// their memory. Only a plain HTTP connection's: elsewhere (TLS, a
// truncated capture) c.resp and the queue also change by paths that do
// not go through the parser.
func (c *conn) releaseIdleParsers() {
	if p := c.reqParser; p != nil && p.Idle() {
		c.reqOff = p.Offset()
		p.Release()
		c.reqParser = nil
	}
	p := c.respParser
	switch {
	case p == nil:
	case p.Idle():
		c.respOff = p.Offset()
		p.Release()
		c.respParser = nil
	case c.tls == nil && !c.is(cfTruncated):
		st := c.resp
		if n := len(c.pending()); st == nil && n > 0 {
			st = c.pending()[n-1]
		}
		if st == nil || st.parked.Held() {
			return
		}
		if off := p.Offset(); p.Park(&st.parked) {
			c.respOff = off
			c.respParser = nil
		}
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

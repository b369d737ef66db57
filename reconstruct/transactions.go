package reconstruct

import "slices"

// Transactions: requests waiting for their responses, and what a
// connection's end emits.

// currentRequest is the request whose bytes are arriving, if any.
func (c *conn) currentRequest() *txState {
	if n := len(c.pending); n > 0 && !c.pending[n-1].reqDone {
		return c.pending[n-1]
	}
	return nil
}

// requestsAcked stamps the complete requests a server ACK up to off covers
// for the first time. They wait in order, so the first one not covered
// ends the search.
func (c *conn) requestsAcked(off, ts int64) {
	for _, st := range c.pending {
		if !st.reqDone || st.reqEndOff > off {
			return
		}
		if st.tx.RequestAcked == 0 {
			st.tx.RequestAcked = max(ts, st.tx.RequestLast) // a capture's clock may step back
		}
	}
}

func (c *conn) newTx() *txState {
	st := &txState{}
	st.tx.Index = c.nextIndex
	c.nextIndex++
	if c.truncated {
		st.tx.Flags |= FlagTruncatedPayload
	}
	if c.tls != nil {
		st.tx.Flags |= FlagTLS
		st.tx.Host = c.rec.SNI
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
	c.lastResp = prevResp{st: st}
	if st.respEndOff <= c.lastAck {
		st.tx.ResponseAcked = c.curTS
		c.settleUnanswered(st)
		c.emit(st)
		return
	}
	if len(c.awaiting) >= c.t.cfg.MaxPendingRequests {
		// A client that acknowledges nothing must not grow memory: the
		// oldest response is given up as never acknowledged.
		c.t.stats.AwaitingOverflows++
		old := c.awaiting[0]
		c.awaiting = slices.Delete(c.awaiting, 0, 1)
		old.tx.Flags |= FlagNoAck
		c.settleUnanswered(old)
		c.emit(old)
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
	c.ensureFlow()
	c.done = true
	c.rec.Flags |= flags
	c.c2s.flush(c.deliverClient, c.gapClient)
	c.s2c.flush(c.deliverServer, c.gapServer)
	if c.tls != nil {
		c.tlsEarlyReplay() // no ServerHello came: keyless
	}
	if !c.c2s.closed {
		c.c2s.closed = true
		c.reqP().Close(&c.reqH)
	}
	if !c.s2c.closed {
		c.closeServerStream()
	}
	c.releaseParsers()
	if c.tls != nil {
		c.tlsKeyWaitEnd()
		c.tlsPlainEnd()
		c.tlsAccount() // done: the session's count goes back
	}
	if c.tls != nil && c.tls.protoUnsure {
		// No sign of HTTP/2 to the end: what was held is HTTP/1.1's,
		// and what follows is emitted at once.
		c.tlsSettleHTTP1()
	}
	for _, st := range c.awaiting {
		st.tx.Flags |= FlagNoAck | (flags & FlagEvicted)
		c.settleUnanswered(st)
		c.emit(st)
	}
	c.awaiting = nil
	if c.resp != nil {
		c.resp.tx.Flags |= FlagIncomplete | flags
		c.settleUnanswered(c.resp)
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

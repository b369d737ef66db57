package reconstruct

import (
	"slices"

	"github.com/rtmon/rtmon/reconstruct/http1"
)

// Transactions: requests waiting for their responses, and what a
// connection's end emits.

// currentRequest is the request whose bytes are arriving, if any.
func (c *conn) currentRequest() *txState {
	if n := len(c.pending()); n > 0 && !c.pending()[n-1].is(tfReqDone) {
		return c.pending()[n-1]
	}
	return nil
}

// requestsAcked stamps the complete requests a server ACK up to off covers
// for the first time. They wait in order, so the first one not covered
// ends the search.
func (c *conn) requestsAcked(off, ts int64) {
	for _, st := range c.pending() {
		if !st.is(tfReqDone) || st.reqEndOff > off {
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
	if c.is(cfTruncated) {
		st.tx.Flags |= FlagTruncatedPayload
	}
	if c.tls != nil {
		st.tx.Flags |= FlagTLS
		st.tx.setReq([nReqVals]string{reqHost: c.tls.sni})
	}
	return st
}

// addPending queues a new request; past the bound the oldest is given up as
// unanswered so pipelined garbage cannot grow memory.
func (c *conn) addPending(st *txState) {
	if len(c.pending()) >= c.t.cfg.MaxPendingRequests {
		c.t.stats.PendingOverflows++
		old := c.pending()[0]
		c.setPending(slices.Delete(c.pending(), 0, 1))
		old.tx.Flags |= FlagNoResponse
		c.emit(old)
	}
	c.setPending(append(c.pending(), st))
}

// takeRequest pairs a starting response with the oldest unanswered request.
func (c *conn) takeRequest() *txState {
	if len(c.pending()) == 0 {
		st := c.newTx()
		st.tx.Flags |= FlagNoRequest
		return st
	}
	st := c.pending()[0]
	c.setPending(slices.Delete(c.pending(), 0, 1)) // emptied, it holds no array
	if c.tls == nil && st.tx.upLost == 0 {
		// Out of the queue, a plain HTTP request's loss count is final
		// (only deliverClient raises it, on the newest pending request):
		// nothing will time a lost first copy.
		st.sent = nil
	}
	return st
}

// completeResponse moves the finished response to wait for the client's ACK,
// or emits it at once if that ACK already went by.
func (c *conn) completeResponse(st *txState) {
	st.set(tfRespDone, true)
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
	if len(c.awaiting()) >= c.t.cfg.MaxPendingRequests {
		// A client that acknowledges nothing must not grow memory: the
		// oldest response is given up as never acknowledged.
		c.t.stats.AwaitingOverflows++
		old := c.awaiting()[0]
		c.setAwaiting(slices.Delete(c.awaiting(), 0, 1))
		old.tx.Flags |= FlagNoAck
		c.settleUnanswered(old)
		c.emit(old)
	}
	c.setAwaiting(append(c.awaiting(), st))
}

// end finishes the connection: whatever is buffered is delivered, parsers
// are closed, and every transaction still open is emitted with flags saying
// what is missing.
func (c *conn) end(flags Flags) {
	if c.is(cfDone) {
		return
	}
	c.ensureFlow()
	c.set(cfDone, true)
	c.rec.Flags |= flags
	c.c2s.flush(c.deliverClient, c.gapClient)
	c.s2c.flush(c.deliverServer, c.gapServer)
	if c.tls != nil {
		c.tlsEarlyReplay() // no ServerHello came: keyless
	}
	if !c.c2s.closed {
		c.c2s.closed = true
		c.reqP().Close((*requestEvents)(c))
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
	for _, st := range c.awaiting() {
		st.tx.Flags |= FlagNoAck | (flags & FlagEvicted)
		c.settleUnanswered(st)
		c.emit(st)
	}
	c.setAwaiting(nil)
	if c.resp != nil {
		c.resp.tx.Flags |= FlagIncomplete | flags
		c.settleUnanswered(c.resp)
		c.emit(c.resp)
		c.resp = nil
	}
	for _, st := range c.pending() {
		st.tx.Flags |= FlagNoResponse | flags
		if !st.is(tfReqDone) {
			st.tx.Flags |= FlagIncomplete
		}
		c.emit(st)
	}
	c.setPending(nil)
}

// txQueues is a connection's transactions waiting in line, made while
// more than one waits (flowState.one holds a lone one): an idle
// keep-alive connection, or one with a single request or response
// waiting, does not carry its two slice headers (48 B) nor an array.
type txQueues struct {
	pending  []*txState // requests in order, waiting for their responses
	awaiting []*txState // complete responses waiting for the client's ACK
}

func (f *flowState) pending() []*txState {
	switch {
	case f.q != nil:
		return f.q.pending
	case f.one[0] != nil && !f.oneAwaits:
		return f.one[:]
	}
	return nil
}

func (f *flowState) awaiting() []*txState {
	switch {
	case f.q != nil:
		return f.q.awaiting
	case f.one[0] != nil && f.oneAwaits:
		return f.one[:]
	}
	return nil
}

// setPending and setAwaiting replace a queue; an emptied one keeps no
// array, a lone transaction waiting takes flowState.one, and only more
// than one make a txQueues.
func (f *flowState) setPending(l []*txState) { f.setQueue(l, f.awaiting()) }

func (f *flowState) setAwaiting(l []*txState) { f.setQueue(f.pending(), l) }

// setQueue makes pending and awaiting the queues. Either may be the
// caller's view of f.one, so it is read before f.one changes.
func (f *flowState) setQueue(pending, awaiting []*txState) {
	switch len(pending) + len(awaiting) {
	case 0:
		f.q, f.one[0], f.oneAwaits = nil, nil, false
	case 1:
		f.oneAwaits = len(awaiting) == 1
		if f.oneAwaits {
			f.one[0] = awaiting[0]
		} else {
			f.one[0] = pending[0]
		}
		f.q = nil
	default:
		own := func(l []*txState) []*txState {
			if len(l) == 0 {
				return nil
			}
			if &l[0] == &f.one[0] {
				return []*txState{l[0]} // out of the slot, which is emptied
			}
			return l
		}
		if f.q == nil {
			f.q = &txQueues{}
		}
		f.q.pending, f.q.awaiting = own(pending), own(awaiting)
		f.one[0] = nil
	}
}

// txState is a transaction under construction. Its fields are ordered
// so that it fits the 208-byte size class (issue 15).
type txState struct {
	tx           txRec
	reqStartOff  int64
	reqEndOff    int64
	respStartOff int64
	respEndOff   int64

	// sent, sentBy (in rare) and tx.upLost time a request whose first copy
	// was lost before the capture point (see requestSent).
	sent *sentNotes
	rare *txRare // nil until one of its fields is set
	// parked is the response parser while it waits inside this response's
	// body (see releaseIdleParsers).
	parked http1.Parked
}

// txFlags are a transaction's booleans, bits of a byte in its txRec's
// padding, so that txState fits the 208-byte size class.
type txFlags uint8

const (
	tfUpMulti     txFlags = 1 << iota // upLost counts rounds of a multi-segment flight
	tfUpAckOrCopy                     // the lost packets may have been ACKs: timing must decide
	tfResent                          // a segment of the request was resent after a loss before the capture point (see deliverClient)
	tfReqDone
	tfRespStarted
	tfRespDone
	tfHeuristic // timed from sequence numbers, not parsed
)

func (st *txState) is(f txFlags) bool { return st.tx.bits&f != 0 }

func (st *txState) set(f txFlags, on bool) {
	if on {
		st.tx.bits |= f
	} else {
		st.tx.bits &^= f
	}
}

// sentNotes is the connection's state as a request started, which timing
// reads if the request's first copy was lost before the capture point
// (requestSent): pointer-held, so that a plain HTTP request whose loss
// count can no longer rise drops it as its response starts (takeRequest)
// and the response in flight does not carry it.
type sentNotes struct {
	timer   clientTimer // the client's retransmission timer when the request started
	rearmAt int64       // the server's latest ACK of new client data when the request's copy came (srvAckNewAt)
	// prev is the connection's latest complete response when the request
	// started, read when the request is timed (a verdict on its
	// retransmissions may come later).
	prev prevResp
}

// notes is st's sentNotes, made if it has none yet: for writing.
func (st *txState) notes() *sentNotes {
	if st.sent == nil {
		st.sent = &sentNotes{}
	}
	return st.sent
}

// sentAt is st's sentNotes for reading, zero without them.
func (st *txState) sentAt() sentNotes {
	if st.sent == nil {
		return sentNotes{}
	}
	return *st.sent
}

// txRare is what few transactions have, apart so that the others do not
// carry it: made with the first of its fields set.
type txRare struct {
	rtx    []pendingRetrans // the response's retransmissions awaiting a verdict
	sentBy int64            // the client had sent the request by then (a later pure ACK's sequence number)
	// location is Transaction.Location, a redirect's target.
	location string
	// body is Transaction.Body, retransBytes Transaction.RetransBytes,
	// holeBytes Transaction.HoleBytes.
	body         []byte
	retransBytes int64
	holeBytes    int64
	// h2ID: the HTTP/2 stream of a decrypted connection's transaction.
	h2ID uint32
}

// more is st's txRare, made if it has none yet: for writing.
func (st *txState) more() *txRare {
	if st.rare == nil {
		st.rare = &txRare{}
	}
	return st.rare
}

// retrans is st's retransmissions awaiting a verdict.
func (st *txState) retrans() []pendingRetrans {
	if st.rare == nil {
		return nil
	}
	return st.rare.rtx
}

// setRetrans makes l st's retransmissions awaiting a verdict.
func (st *txState) setRetrans(l []pendingRetrans) {
	if len(l) == 0 {
		l = nil
		if st.rare == nil {
			return
		}
	}
	st.more().rtx = l
}

// sentBy is when a later pure ACK showed the request sent (0: none did).
func (st *txState) sentBy() int64 {
	if st.rare == nil {
		return 0
	}
	return st.rare.sentBy
}

// location is the response's Location header value.
func (st *txState) location() string {
	if st.rare == nil {
		return ""
	}
	return st.rare.location
}

func (st *txState) setLocation(loc string) {
	if loc != "" || st.rare != nil {
		st.more().location = loc
	}
}

// body is the response body kept (see responseEvents.Body).
func (st *txState) body() []byte {
	if st.rare == nil {
		return nil
	}
	return st.rare.body
}

func (st *txState) setBody(b []byte) {
	if b != nil || st.rare != nil {
		st.more().body = b
	}
}

// retransBytes is what the response's segments carried again.
func (st *txState) retransBytes() int64 {
	if st.rare == nil {
		return 0
	}
	return st.rare.retransBytes
}

func (st *txState) addRetransBytes(n int64) {
	if n > 0 {
		st.more().retransBytes += n
	}
}

// holeBytes is what the capture missed of the transaction's bytes.
func (st *txState) holeBytes() int64 {
	if st.rare == nil {
		return 0
	}
	return st.rare.holeBytes
}

// addHole counts n bytes the capture missed, flagging the transaction.
func (st *txState) addHole(n int64) {
	st.tx.Flags |= FlagHole
	st.more().holeBytes += n
}

// h2ID is the HTTP/2 stream of a decrypted connection's transaction (0
// otherwise).
func (st *txState) h2ID() uint32 {
	if st.rare == nil {
		return 0
	}
	return st.rare.h2ID
}

// prevResp is the connection's latest complete response as a request
// came: the response itself while the tracker still holds it (a resent
// copy may yet move its end), then only its end. An idle keep-alive
// connection so keeps 8 bytes of its last transaction, not all of it.
type prevResp struct {
	st   *txState
	last int64 // st's ResponseLast, once st was handed on
}

// end is the response's ResponseLast so far (0: none).
func (p prevResp) end() int64 {
	if p.st != nil {
		return p.st.tx.ResponseLast
	}
	return p.last
}

// opensConn reports whether st is its connection's first request, the
// one a fresh connection's setup is timed with: the first transaction,
// or on HTTP/2, whose streams complete in any order (and are indexed so),
// the client's first stream: clients number their streams up from 1.
func (st *txState) opensConn() bool {
	if id := st.h2ID(); id != 0 {
		return id == 1
	}
	return st.tx.Index == 0
}

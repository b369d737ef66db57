package reconstruct

import (
	"github.com/rtmon/rtmon/reconstruct/http1"
)

// flowState is the part of a connection that data needs: delivery, parsing,
// transactions in flight, loss evidence and TLS. A connection gets it with
// its first packet that is not a SYN or SYN/ACK (or when it ends).
type flowState struct {
	c2sLog deliveryLog
	s2cLog serverLog // with the RTT probes
	// The parsers exist only while a direction is inside a message: idle
	// keep-alive connections keep just the offsets (see http1.Acquire).
	reqParser, respParser *http1.Parser
	reqOff, respOff       int64
	// respFirstByte is the capture time of the response message now
	// starting; it becomes the response's first byte only once the status
	// line shows it is final (an interim 100 Continue is not the response).
	respFirstByte int64
	curTS         int64 // capture time of the bytes being parsed

	// q: the requests waiting for their responses and the complete
	// responses waiting for the client's ACK (see txQueues), while more
	// than one waits; one is a lone one, a response if oneAwaits.
	q         *txQueues
	one       [1]*txState
	resp      *txState // response being received
	nextIndex int32    // as Transaction.Index
	oneAwaits bool
	// tls: the client's first bytes were a ClientHello (see tls.go).
	tls     *tlsSession
	lastAck int64 // client's highest acknowledged server offset
	// srvDataAt is the capture time of the server's latest new data;
	// srvQuickFrom the offset where its data resumed after a silence the
	// client answers with an immediate ACK (see noteServerData), -1 none.
	srvDataAt    int64
	srvQuickFrom int64
	reqAck       struct{ end, at int64 }
	// srvAck is the server's highest ACK of the client's stream (an
	// offset), srvAckNewAt when an ACK last raised it: the client's
	// retransmission timer restarted as that ACK arrived (rearmedSend).
	srvAck, srvAckNewAt int64
	// dataRTT is the least round trip from a server segment to the
	// client's ACK of it (see clientRTT).
	dataRTT  int64
	lastResp prevResp // the latest complete response (see requestSent)
	// loss: evidence of loss most connections never see, made when some
	// is (see lossNotes).
	loss *lossNotes
}

// lossNotes is the evidence of loss before the capture point that only
// connections with retransmissions, reordering or lost client packets
// gather: apart from flowState, so that the others do not carry it. Nil
// reads as all zero, the values a connection starts with.
type lossNotes struct {
	srvResent resentLog // server retransmissions since the client's last packet
	// aheadOff: a client pure ACK's sequence number said it had sent the
	// stream up to here (by aheadAt) when the capture had not seen it.
	// aheadSilent and aheadReact: what the client could have sent the
	// data in reaction to (burstNote, sentBeforeAck).
	aheadOff, aheadAt int64
	aheadReact        int64
	aheadSilent       bool
	lostCarry         int // client packets lost before pure ACKs that no ACK explains (see explainLost)
	// delivered: the loss evidence of c2sLog's pieces.
	delivered deliveryLoss
	// gapped: the bytes of the client's (0) and the server's (1) stream
	// skipped as holes (halfStream.carried).
	gapped [2]int64
	// oooLost: packets the client lost just before the first segment that
	// arrived ahead of a hole (at offset oooOff): if they outnumber the
	// segments before it, that segment was itself a retransmission.
	oooLost int
	oooOff  int64
	oooAt   int64 // when that segment arrived
	// ackQueued: how much longer the capture point's view of the handshake
	// took than the client's own sample, the time its handshake ACK (or
	// SYN) spent queued on the way: the client was connected that much
	// before the capture saw it. Few handshakes show it.
	ackQueued int64
	// retransBytes: the bytes both directions carried again, for
	// Connection.RetransBytes (here, not in each halfStream, as only
	// lossy connections have any).
	retransBytes int64
}

// ackQueue is lossNotes.ackQueued, 0 without it.
func (c *conn) ackQueue() int64 {
	if c.flowState == nil || c.loss == nil {
		return 0
	}
	return c.loss.ackQueued
}

// retransBytes is what the connection's segments carried again.
// gapped is the bytes of the client's (dir 0) or server's (1) stream
// skipped as holes.
func (c *conn) gapped(dir int) int64 {
	if c.flowState == nil || c.loss == nil {
		return 0
	}
	return c.loss.gapped[dir]
}

func (c *conn) retransBytes() int64 {
	if c.flowState == nil || c.loss == nil {
		return 0
	}
	return c.loss.retransBytes
}

// notes is f's lossNotes, made if it has none yet: for writing.
func (f *flowState) notes() *lossNotes {
	if f.loss == nil {
		f.loss = &lossNotes{}
	}
	return f.loss
}

// ensureFlow gives c its flowState if it has none yet: the tracker's
// spare one if it holds one (see dropPristineFlow), else a new one.
func (c *conn) ensureFlow() {
	if c.flowState != nil {
		return
	}
	if f := c.t.spareFlow; f != nil {
		c.t.spareFlow = nil
		*f = flowState{srvQuickFrom: -1}
		c.flowState = f
		return
	}
	c.flowState = &flowState{srvQuickFrom: -1}
}

// dropPristineFlow hands back a flowState that holds nothing ensureFlow
// would not make again: an established connection that has sent no data
// yet (a browser's spare connection, a pool's idle one) costs no more
// than a half-open one. Any field off its start value keeps it. The one
// handed back becomes the tracker's spare: every connection's handshake
// ACK makes one and hands it back, and its first data takes one again,
// so recycling it spares the collector two flowStates a connection.
func (c *conn) dropPristineFlow() {
	f := c.flowState
	// An empty lossNotes counts as never made.
	if f.loss != nil && *f.loss != (lossNotes{}) || *f != (flowState{srvQuickFrom: -1, loss: f.loss}) {
		return
	}
	c.flowState = nil
	if c.t.spareFlow == nil {
		c.t.spareFlow = f
	}
}

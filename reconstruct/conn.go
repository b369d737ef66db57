package reconstruct

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strconv"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct/http1"
)

// conn is one tracked TCP connection: handshake bookkeeping, the two
// reassembled directions, their HTTP parsers and the transactions in flight.
type conn struct {
	prev, next *conn // Tracker.lru
	t          *Tracker
	rec        connRec

	// *flowState holds what only a connection carrying data needs; a
	// connection still in its handshake (a SYN flood's millions) has
	// none, which halves what it costs (see ensureFlow). hs is what only
	// the handshake reads, gone once the connection is established.
	*flowState
	hs *handshakeNotes

	c2s, s2c halfStream

	// timer is the client's retransmission timer (see clientTimer);
	// reqAck (in flowState) the latest complete request the server has not
	// acknowledged yet: its end offset and capture time, for the client's
	// next sample.
	timer clientTimer

	// counted is this connection's share of Tracker.connBytes: at most
	// the few KiB its state is counted at (footprint), so an int32.
	counted     int32
	byClientPos int32     // index in Tracker.byClient
	ipid        ipidTrack // the client's IPv4 IDs
	flags       connFlags
	// pktGap: all packets the client lost just before the one being
	// processed (an IP ID step: less than maxIPIDGap).
	pktGap int8
	// pktLost: packets the client lost just before the one being
	// processed, less those explained as ACKs (see loss.go). At most
	// maxIPIDGap plus a carried maxIPIDGap (explainLost), so a byte.
	pktLost int8
}

// connFlags are a connection's booleans, bits of one word so that the
// connection fits the 320-byte size class.
type connFlags uint16

const (
	cfClientIsA connFlags = 1 << iota
	cfSynSeen
	cfSynackSeen
	cfSynackSinceSyn
	// cfOwnSample: the client's handshake RTT sample was read from its own
	// timestamps (see handshakeSample), so its retransmission timer is
	// known, not guessed from the capture point's view.
	cfOwnSample
	// cfTruncated: the snap length cut payload, so parsing gives way to
	// timing by sequence numbers and direction changes.
	cfTruncated
	cfServerFIN
	cfClientFIN
	cfRttSaved // the client's RTT went to the tracker's rttCache
	cfPktNew   // the packet being processed was sent after all before it (IP IDs)
	// cfPktAckOrCopy: the packet's lost predecessors may have been ACKs or
	// its own first copy (see explainLost).
	cfPktAckOrCopy
	cfHsAckLost // the handshake ACK was lost: the first request completed the handshake
	cfDone
	cfRecorded // the connection's record went out
	// cfTimerSamples: the client's timer took more than one sample (see
	// clientTimer.sample).
	cfTimerSamples
	// cfClientData: the client's latest packet carried data, in order,
	// and acknowledged all the server had sent (lossNotes.aheadSilent).
	cfClientData
)

func (c *conn) is(f connFlags) bool { return c.flags&f != 0 }

func (c *conn) set(f connFlags, on bool) {
	if on {
		c.flags |= f
	} else {
		c.flags &^= f
	}
}

// sampleTimer adds a round-trip sample to the client's timer.
func (c *conn) sampleTimer(m int64) {
	if m <= 0 {
		return
	}
	second := c.timer.srtt != 0 && !c.is(cfTimerSamples)
	if c.timer.srtt != 0 {
		c.set(cfTimerSamples, true)
	}
	c.timer.sample(m, second)
}

func newConn(t *Tracker, p *capture.Packet) *conn {
	c := &conn{t: t}
	if p.Flags&(capture.FlagSYN|capture.FlagACK) != capture.FlagSYN {
		c.ensureFlow() // mid-stream: its parsers resync below
	}
	senderIsClient := t.senderIsClient(p)
	_, fromA := makeKey(p)
	c.set(cfClientIsA, fromA == senderIsClient)
	var client, server netip.AddrPort
	if senderIsClient {
		client, server = netip.AddrPortFrom(p.SrcIP, p.SrcPort), netip.AddrPortFrom(p.DstIP, p.DstPort)
	} else {
		client, server = netip.AddrPortFrom(p.DstIP, p.DstPort), netip.AddrPortFrom(p.SrcIP, p.SrcPort)
	}
	c.rec = connRec{
		Interface:  int32(p.Interface),
		ClientPort: client.Port(),
		ServerPort: server.Port(),
		FirstSeen:  p.Timestamp,
	}
	c.rec.client, c.rec.clientKind = packAddr(client.Addr())
	c.rec.server, c.rec.serverKind = packAddr(server.Addr())
	// The stable id's input the record does not hold otherwise: the
	// first packet's sequence number (see id).
	c.rec.firstSeq = p.Seq
	if p.Flags&(capture.FlagSYN|capture.FlagACK) != capture.FlagSYN {
		c.rec.Flags |= FlagMidStream
	}
	if c.rec.Flags&FlagMidStream != 0 {
		c.reqP().Resync()
		c.respP().Resync()
	}
	return c
}

// burstNote reads, as a pure ACK shows that the client sent data the
// capture never got, what the client could have sent it in reaction to
// (lossNotes.aheadSilent, aheadReact): acked is its ACK before that one.
// Silent: its packet before carried its data in order and acknowledged
// all the server had sent (cfClientData), so nothing reached it between
// the two but the answers to what it sent. Else, when a byte the server
// sent before its last data was still on its way, react is when the
// client had it (its send time and the client's round trip later), 0
// when the log no longer tells.
func (c *conn) burstNote(acked int64) (silent bool, react int64) {
	if c.is(cfClientData) {
		return true, 0
	}
	if sent := c.s2cLog.timeAt(acked, 0); sent > 0 && sent < c.c2sLog.last() {
		return false, sent + c.clientRTT()
	}
	return false, 0
}

// pureAckAhead is the client stream offset a pure ACK's sequence number
// names when it is past every byte seen (the client had sent bytes the
// capture never got), else 0.
func (c *conn) pureAckAhead(p *capture.Packet) int64 {
	if p.PayloadLen != 0 || !c.c2s.baseKnown {
		return 0
	}
	if off := c.c2s.offset(p.Seq); off > c.c2s.highest {
		return off
	}
	return 0
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
	return !(c.is(cfSynSeen) && p.Seq == c.clientISN() && c.rec.Established == 0)
}

func (c *conn) packet(p *capture.Packet, fromClient bool) {
	ts := p.Timestamp
	c.rec.LastSeen = ts
	if c.is(cfDone) {
		return // late ACKs and retransmitted FINs of a finished connection
	}
	c.pktLost, c.pktGap = 0, 0
	c.set(cfPktNew|cfPktAckOrCopy, false)
	if fromClient && p.SrcIP.Is4() {
		completes := c.rec.Established == 0 && p.PayloadLen > 0 && p.Flags&capture.FlagACK != 0
		c.pktLost = int8(c.ipid.step(p.IPID, completes))
		c.pktGap = c.pktLost
		c.set(cfPktNew, c.ipid.sent())
	}
	if p.Flags&capture.FlagSYN != 0 {
		c.handshake(p, fromClient)
		return
	}
	c.ensureFlow()
	if p.Flags&capture.FlagRST != 0 {
		if !c.resetAcceptable(p, fromClient) {
			// Another incarnation's reset (a client resetting the attempt
			// a reused port left half open): this connection goes on.
			c.t.stats.StrayResets++
			return
		}
		c.rec.Flags |= FlagReset
		c.rec.Closed = ts
		c.endOrAwaitKey()
		return
	}
	if p.PayloadLen > len(p.Payload) && !c.is(cfTruncated) {
		c.set(cfTruncated, true)
		for _, st := range c.pending() {
			st.tx.Flags |= FlagTruncatedPayload
		}
		if c.resp != nil {
			c.resp.tx.Flags |= FlagTruncatedPayload
		}
	}
	if fromClient {
		c.fromClient(p)
		c.set(cfClientData, p.PayloadLen > 0 && c.c2s.ooo == nil && c.s2c.highest <= c.lastAck)
		c.pktLost = 0 // it described this packet only
		if c.loss != nil {
			c.loss.srvResent = resentLog{}
		}
	} else {
		c.fromServer(p)
	}
	if c.is(cfClientFIN) && !c.is(cfRttSaved) && (c.is(cfServerFIN) || !fromClient) {
		// The client's FIN is acknowledged (the server ACKs it at once):
		// the client stores its RTT for the destination now.
		c.set(cfRttSaved, true)
		c.t.rtts.save(c.addrs(), c.timer.srtt, ts)
	}
	if c.is(cfClientFIN) && c.is(cfServerFIN) && !c.is(cfDone) && !c.tlsKeyAwaited() {
		c.rec.Closed = ts
		c.endOrAwaitKey()
	}
	if c.rec.Established == ts && p.PayloadLen == 0 && !c.is(cfDone) {
		c.dropPristineFlow() // the handshake's ACK
	}
}

// resetAcceptable reports whether a reset belongs to this connection: its
// sequence number lies near its sender's stream (RFC 5961 wants it in the
// window; the capture may have missed data, hence the slack), or, for the
// server's answer to a SYN it never accepted, it acknowledges the SYN.
func (c *conn) resetAcceptable(p *capture.Packet, fromClient bool) bool {
	h := &c.s2c
	if fromClient {
		h = &c.c2s
	}
	if h.baseKnown {
		return h.near(h.offset(p.Seq))
	}
	if !fromClient && c.is(cfSynSeen) && p.Flags&capture.FlagACK != 0 {
		return p.Ack == c.clientISN()+1
	}
	return true // a capture that began mid-connection has nothing to check it by
}

func (c *conn) addrs() addrPair { return addrPair{c.rec.Client(), c.rec.Server()} }

func (c *conn) fromClient(p *capture.Packet) {
	ts := p.Timestamp
	var ackedBefore int64 // the client's highest ACK before this packet's (burstNote)
	if c.flowState != nil {
		ackedBefore = c.lastAck
	}
	if p.Flags&capture.FlagACK != 0 {
		if c.is(cfSynackSeen) && c.rec.Established == 0 && p.Ack == c.serverISN()+1 {
			c.rec.Established = ts
			if p.PayloadLen > 0 && c.pktLost > 0 {
				// The handshake ACK was lost before the capture point and
				// the request completed the handshake: its time is not the
				// client's connect time, and one lost packet is explained.
				c.set(cfHsAckLost, true)
				c.pktLost--
				if c.pktLost == 0 {
					// The request itself was not lost: sent as the SYN/ACK
					// arrived, it bounds the round trip from above.
					c.dataRTT = ts - c.lastSynAck()
				}
			} else {
				c.rec.answered = c.answeredSynAck(p)
				if len(c.rec.synTimes()) > 0 { // a capture that began after the SYN has no sample
					c.sampleTimer(c.handshakeSample(p, ts-c.answeredSyn()))
				}
			}
			c.timer.initRTO = c.t.rtts.initialRTO(c.addrs(), &c.timer, ts)
			c.hs = nil // read no more (see handshakeNotes)
		}
		if !c.s2c.baseKnown {
			c.s2c.setBase(p.Ack) // mid-stream: the client tells where the server's stream is
		}
		a := c.clientAckInfo(p)
		opened := c.windowOpened(p, a) // against the window before this packet's
		c.noteWindow(p, &c.s2c, 0)
		c.explainLost(p, a, opened)
		if p.PayloadLen > 0 {
			// A client that writes as it reads is in Linux's ping-pong
			// mode and delays its ACKs: a quick ACK mode needs a new
			// silence (noteServerData).
			c.srvQuickFrom = -1
		}
		if c.tls != nil {
			if off := c.pureAckAhead(p); off > 0 {
				// The client sends a pure ACK for data that came after its
				// last segment, so the lost one had not acknowledged what
				// this one does.
				c.tlsNoteClientHole(ts, off)
			}
		}
		c.clientAck(a)
	}
	if p.PayloadLen == 0 && p.Flags&capture.FlagFIN == 0 {
		if off := c.pureAckAhead(p); off > 0 && (c.loss == nil || off > c.loss.aheadOff) {
			l := c.notes()
			l.aheadOff, l.aheadAt = off, ts
			l.aheadSilent, l.aheadReact = c.burstNote(ackedBefore)
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
		l := c.notes()
		l.oooLost, l.oooOff, l.oooAt = int(c.pktLost), c.c2s.offset(p.Seq), ts
		c.tlsNoteClientHole(ts, l.oooOff+int64(p.PayloadLen))
	}
	if c.c2s.finReady() {
		c.c2s.closed = true
		c.set(cfClientFIN, true)
		c.curTS = ts
		if w := c.tls.keyWaitOf(); w != nil {
			w.clientFIN = true // the parser closes once the held records are read
		} else {
			c.reqP().Close((*requestEvents)(c))
		}
	}
}

func (c *conn) fromServer(p *capture.Packet) {
	ts := p.Timestamp
	if p.Flags&capture.FlagACK != 0 {
		if !c.c2s.baseKnown {
			c.c2s.setBase(p.Ack)
		}
		if !c.c2s.near(c.c2s.offset(p.Ack)) {
			// It acknowledges bytes of another incarnation of the four-tuple:
			// a challenge ACK (RFC 5961) for the attempt a reused port
			// left half open. Taken as an ACK, it would skip a client
			// stream that has not begun.
			c.t.stats.OutOfWindow++
			return
		}
		if c.reqAck.end > 0 && c.c2s.offset(p.Ack) >= c.reqAck.end {
			// The client's sample for its request: out, and this ACK back.
			c.sampleTimer(ts - c.reqAck.at + c.clientRTT())
			c.reqAck.end = 0
		}
		if off := c.c2s.offset(p.Ack); off > c.c2s.next {
			c.c2s.acked(off, c.deliverClient, c.gapClient)
		}
		if off := c.c2s.offset(p.Ack); off > c.srvAck {
			c.srvAck, c.srvAckNewAt = off, ts
		}
		c.requestsAcked(c.c2s.offset(p.Ack), ts)
		c.noteWindow(p, &c.c2s, 1)
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
		c.notes().srvResent.add(p)
		c.serverRetransmitted(p, off, off+int64(retrans))
	}
	if c.s2c.finReady() {
		c.closeServerStream()
	}
}

// noteWindow takes the window offered by side (0 client, 1 server) in p,
// an ACK, for the stream h it receives. Only after a handshake whose SYN
// and SYN/ACK both were seen is the window's scale known; SYNs carry an
// unscaled window and are not taken.
func (c *conn) noteWindow(p *capture.Packet, h *halfStream, side int) {
	if !c.is(cfSynSeen) || !c.is(cfSynackSeen) || p.Flags&capture.FlagSYN != 0 || !h.baseKnown {
		return
	}
	scale := int8(0)
	if c.rec.wscale[0] >= 0 && c.rec.wscale[1] >= 0 {
		scale = c.rec.wscale[side]
	}
	h.advertised(h.offset(p.Ack), int64(p.Window)<<scale)
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
		c.notes().retransBytes += int64(retrans)
	}
}

// closeServerStream ends the server's byte stream: a close-delimited body
// ends with the last byte before the FIN, timed by that byte's packet.
func (c *conn) closeServerStream() {
	c.s2c.closed = true
	c.set(cfServerFIN, true)
	if w := c.tls.keyWaitOf(); w != nil {
		w.serverFIN = true // the parser closes once the held records are read
		return
	}
	c.closeServerParser()
}

// closeServerParser ends what reads the server's stream.
func (c *conn) closeServerParser() {
	c.curTS = c.s2cLog.last() // a close-delimited body ended with its last byte
	if c.tls != nil && !c.decrypting() {
		c.tlsTurnEnds()
		return
	}
	if c.is(cfTruncated) {
		c.endHeuristicResponse()
		return
	}
	c.respP().Close((*responseEvents)(c))
}

// id is the connection's stable id: a hash of its addresses, its first
// packet's time and sequence number, spelled out for each record, so an
// open connection holds 4 bytes of it (the sequence number), not a
// string nor the hash.
func (c *conn) id() string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], connectionHash(c.t.cfg.IDKey, netip.AddrPortFrom(c.rec.Client(), c.rec.ClientPort),
		netip.AddrPortFrom(c.rec.Server(), c.rec.ServerPort), c.rec.FirstSeen, c.rec.firstSeq))
	id := hex.EncodeToString(b[:])
	if c.rec.twin > 0 {
		id += "." + strconv.Itoa(int(c.rec.twin))
	}
	return id
}

// sendMSS is the client's payload per full segment: the MSS the server
// advertised, less the timestamp option most stacks send.
func (c *conn) sendMSS() int64 {
	if c.rec.MSSServer > 12 {
		return int64(c.rec.MSSServer) - 12
	}
	return 1448
}

// key is the table key, rebuilt from the record instead of stored twice:
// keyOf's order, which clientIsA keeps (equal endpoints give one key
// either way).
func (c *conn) key() flowKey {
	r := &c.rec
	if c.is(cfClientIsA) {
		return flowKey{r.client, r.server, r.ClientPort, r.ServerPort}
	}
	return flowKey{r.server, r.client, r.ServerPort, r.ClientPort}
}

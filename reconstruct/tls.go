package reconstruct

import (
	"slices"
	"time"
	"unsafe"

	"github.com/rtmon/rtmon/reconstruct/tlswire"
)

// Keyless HTTPS. A connection whose client spoke first with a TLS
// ClientHello carries HTTP that cannot be read without keys. Its handshake
// is read in the clear (tlswire) and timed as Ttls, from the client being
// connected to its Finished passing the capture point. After it, each run
// of the client's application-data records is a request and the server's
// records that answer it are its response: the turns of HTTP/1.1, timed
// from record boundaries as the snap-length heuristic times bytes. The
// URL, method and status stay unknown; the host is the SNI name. HTTP/2
// interleaves streams on one connection, so its turns are busy periods,
// not exchanges: they are estimated as tlsh2keyless.go says. TLS
// 1.3 hides which of h2 and HTTP/1.1 the server chose; the client's
// records tell (tlsSettleProtocol). With the connection's keys in a key
// log, tlsplain.go reads its HTTP instead.

// tlsSession is a TLS connection's handshake and turn state.
type tlsSession struct {
	wire tlswire.Conn
	// plain: the records are being decrypted (see tlsplain.go; read
	// through conn.plainOf). A pointer: keyless sessions are counted
	// without its size.
	plain *tlsPlain
	// The connection record's TLS fields, copied into it on emit (see
	// connRec): only TLS connections carry them.
	sni, alpn string
	ttls      int64
	version   uint16
	// finished: capture time of the client's Finished (0 before it); from
	// then on application data is HTTP. serverFinished: of the server's,
	// when it came after (a full TLS 1.2 handshake: the client waits for
	// it before it sends a request).
	finished, serverFinished int64
	// multiplexed: HTTP/2 was or may have been negotiated (see FlagHTTP2).
	multiplexed bool
	// protoUnsure: TLS 1.3 hid whether the server chose h2 or HTTP/1.1
	// of those the client offered; the transactions of its turns are
	// held, not emitted, until tlsSettleProtocol knows. answers counts
	// the client's records that answered the server meanwhile.
	protoUnsure bool
	held        []*txState
	answers     int
	// lost: a direction lost its record framing (bytes never captured
	// over a record header); turns are then read from the bytes as the
	// snap-length heuristic reads them.
	lost bool
	// TLS 1.3 servers that issue session tickets after the handshake
	// (OpenSSL's two, on the client's Finished) send them as application
	// data. Small server records starting within ticketWindow of the
	// Finished, before any other, are held as tickets; if the turn ends
	// with nothing else from the server, the last of them was the response.
	// The window is 10 ms: a loaded nginx on the HTTPS testbed sent its
	// tickets 2.1 ms after the Finished, and the 2 ms of old took them
	// for the response (Tserver 3.4 ms short). A response's small first
	// record held by mistake costs only the gap to its next record.
	tickets     [maxTickets]tlswire.Record
	nTickets    int
	ticketsDone bool
	// lateTickets: how many of the records held (the last ones) came past
	// the window. A busy server may write its tickets only with its first
	// answer (nginx 53 ms after the Finished, right before a 100
	// Continue): small records on the first turn are held past the window
	// too, and are tickets only if the interim follows them; otherwise
	// they are the response's first records, as without the hold.
	lateTickets int
	// counted: what the tracker's memory count holds for this session.
	counted int
	// keyWait: the records held for a key line not read yet (see
	// tlskeywait.go), nil when none is awaited.
	keyWait *keyWait
	// early: the client's 0-RTT records held for the ServerHello (see
	// tlsearly.go); earlyEnd the stream offset past the last of them (0:
	// no early data); serverFlightDone: the server's Finished passed;
	// earlyTickets: the tickets skipped after the client's Finished;
	// earlyAccepted: the client's EndOfEarlyData said the server took it.
	early            *earlyHold
	earlyEnd         int64
	serverFlightDone bool
	earlyTickets     int
	earlyAccepted    bool
	// interim: a server record the size of a 100 Continue, held while it
	// may be one (hasInterim; see tlsturns.go).
	interim    tlswire.Record
	hasInterim bool
	// h2Prefaced: the server's first application-data record of a
	// keyless HTTP/2 connection passed (see tlsh2keyless.go).
	// quietLen: while TLS 1.3 hid the protocol, the length of the first
	// record the server sent before anything was asked (a session ticket,
	// or the preface of a server that sent its tickets in its flight);
	// h2PrefaceSeen: a record of another length followed it then. If h2
	// it was, the records held as tickets after the preface were frames
	// (see tlsH2HeldAnswers).
	h2Prefaced, h2PrefaceSeen bool
	quietLen                  int32
	// h2Quiet: the client's last record the length of control frames
	// sent after it had every answer (hasH2Quiet): if the server answers
	// it, it was a short request after all and opens the turn.
	h2Quiet    tlswire.Record
	hasH2Quiet bool
	// clientFirst, clientSecond: the client's first two application-data
	// records (clientRecords counts to 2): an HTTP/2 client's first may
	// be its bare connection preface, sent before TLS 1.3 said h2.
	clientFirst, clientSecond tlswire.Record
	clientRecords             int
	// h2Asked: the client asked for a stream within the turn under way
	// that no server record has answered since.
	h2Asked bool
	// h2ServerEnd: the stream offset past the server's last record.
	h2ServerEnd int64
	// h2Hole: whether the connection was busy when the capture first saw
	// that the client had sent bytes it had not got (see tlsNoteClientHole).
	h2Hole clientHole
}

// tlsSessionSize is a session's own state, counted against the memory
// bound with the hellos it buffers.
var tlsSessionSize = int(unsafe.Sizeof(tlsSession{}))

const (
	ticketWindow = int64(10 * time.Millisecond)
	ticketMaxLen = 640
	maxTickets   = 4
	// minHTTPRecord: shorter application-data records are no HTTP message
	// (the shortest request line and blank line take 18 bytes, sealed
	// with a type byte and a 16-byte tag): a TLS 1.3 alert (close_notify,
	// 19 bytes) or key update.
	minHTTPRecord = 24
	// maxSNI bounds the server name kept (a DNS name is at most 253).
	maxSNI = 255
	// h2SettingsAckRecord is the length of a TLS 1.3 record holding one
	// HTTP/2 frame without payload (9 bytes, a type byte and a 16-byte
	// tag): the SETTINGS ACK an HTTP/2 client owes the server's SETTINGS,
	// alone in its record in Chromium, Go and curl. No HTTP/1.1 request
	// fits in it (the shortest takes 18 bytes).
	h2SettingsAckRecord = 9 + 1 + 16
	// maxHeld bounds the transactions held while the protocol is unsure.
	maxHeld = 4
)

// maybeStartTLS looks at a connection's first client bytes (stream offset
// 0): a ClientHello makes it a TLS connection.
func (c *conn) maybeStartTLS(off int64, captured []byte) {
	if off != 0 || c.tls != nil || c.nextIndex > 0 || !tlswire.LooksLikeClientHello(captured) {
		return
	}
	c.tls = &tlsSession{}
	c.rec.Flags |= FlagTLS
	c.t.stats.TLSConnections++
	if c.t.cfg.KeyLog != nil {
		c.tlsKeepBodies(true) // until the ServerHello says whether a key is there
	}
	c.tlsAccount()
}

// tlsAccount brings the tracker's memory count up to date with what the
// session holds: a peer that sends a hello in pieces makes it buffer up
// to tlswire.MaxHelloLen, which the memory bound must see.
func (c *conn) tlsAccount() {
	s := c.tls
	now := 0
	if !c.is(cfDone) {
		now = tlsSessionSize + s.wire.Client.Buffered() + s.wire.Server.Buffered() + c.tlsPlainHeld() + s.keyWait.held() + s.early.held()
	}
	c.t.tlsBytes += now - s.counted
	s.counted = now
}

// tlsData feeds a direction's bytes at stream offset off.
func (c *conn) tlsData(client bool, ts, off int64, captured []byte, wireLen int) {
	switch {
	case c.tls.lost && client && wireLen < 5+minHTTPRecord:
		// An alert (close_notify) or key update, not a request.
	case c.tls.lost && client:
		c.heuristicClientData(ts, off, captured, wireLen)
	case c.tls.lost:
		c.heuristicServerData(ts, off, captured, wireLen)
	case client:
		c.tlsEvents(true, c.tls.wire.FeedClient(captured, wireLen, ts))
	default:
		c.tlsEvents(false, c.tls.wire.FeedServer(captured, wireLen, ts))
	}
	c.tlsAccount()
}

// tlsGap reports n bytes of a direction never captured.
func (c *conn) tlsGap(client bool, n int64) {
	if c.tls.lost {
		return
	}
	s := &c.tls.wire.Server
	if client {
		s = &c.tls.wire.Client
	}
	c.tlsEvents(client, s.Gap(n))
	c.tlsAccount()
}

func (c *conn) tlsEvents(client bool, evs []tlswire.Event) {
	s := c.tls
	for i := range evs {
		if s.keyWait != nil {
			c.tlsAwaitKey(client, evs[i:])
			return
		}
		ev := &evs[i]
		switch ev.Kind {
		case tlswire.KindHandshake:
			if ev.Err == nil {
				c.tlsHello(ev.Handshake)
			}
		case tlswire.KindRecord:
			if client && c.tlsEarlyRecord(ev) {
				continue
			}
			if c.plainOf() != nil && c.tlsPlainRecord(client, ev.Record, ev.Body) {
				continue
			}
			if client {
				c.tlsClientRecord(ev.Record)
			} else {
				c.tlsServerRecord(ev.Record)
			}
		case tlswire.KindLost:
			// Without framing, the bytes still take turns: the rest of the
			// connection is timed as the snap-length heuristic times it.
			c.tlsPlainHole()
			c.tlsStopDecrypt(true)
			s.lost = true
			c.t.stats.TLSFramingLost++
			if st := c.currentRequest(); st != nil {
				st.tx.Flags |= FlagHole
			}
			return
		}
	}
}

// tlsHello takes what the hellos say in the clear.
func (c *conn) tlsHello(h tlswire.Handshake) {
	s := c.tls
	if ch := h.ClientHello; ch != nil {
		s.sni = clipString(ch.ServerName, maxSNI)
		if len(ch.ALPN) == 1 {
			s.alpn = clipString(ch.ALPN[0], maxSNI)
		}
		return
	}
	sh := h.ServerHello
	if sh == nil || sh.HelloRetryRequest {
		return
	}
	s.version = sh.Version()
	if sh.ALPN != "" {
		s.alpn = clipString(sh.ALPN, maxSNI)
	}
	offered := s.wire.ClientHello != nil && slices.Contains(s.wire.ClientHello.ALPN, "h2")
	switch {
	case s.alpn == "h2":
		c.tlsMultiplexed()
	case s.alpn == "" && offered && sh.Version() >= tls13:
		s.protoUnsure = true
	}
	c.tlsStartDecrypt(sh)
	c.tlsEarlyReplay()
}

// tlsMultiplexed marks the connection HTTP/2: keyless turns are estimates.
func (c *conn) tlsMultiplexed() {
	s := c.tls
	s.protoUnsure = false
	if !s.multiplexed {
		s.multiplexed = true
		c.rec.Flags |= FlagHTTP2
		c.t.stats.HTTP2Connections++
	}
}

// tlsSettleProtocol decides, on client application-data record r, what
// TLS 1.3 hid, and reports whether r was taken. A SETTINGS ACK's record
// is HTTP/2: the turns so far were its frames, and they and the
// transactions held from them are dropped. An HTTP/2 client acknowledges
// the server's SETTINGS, its first frames, as it reads them; so after
// two records that answered the server (sent a round trip or more after
// its turn began) with no ACK, the connection is HTTP/1.1.
func (c *conn) tlsSettleProtocol(r tlswire.Record) bool {
	s := c.tls
	if r.Len == h2SettingsAckRecord {
		c.tlsMultiplexed()
		c.tlsH2Settled()
		return true
	}
	var turnBegan int64
	switch {
	case c.resp != nil:
		turnBegan = c.resp.tx.ResponseFirst
	case s.nTickets > 0 && len(c.pending()) > 0:
		turnBegan = s.tickets[0].At
	default:
		return false
	}
	if r.StartAt >= turnBegan+c.clientRTT()*3/4 {
		if s.answers++; s.answers >= 2 {
			c.tlsSettleHTTP1()
		}
	}
	return false
}

// tlsHold keeps a transaction made while the protocol is unsure; past
// maxHeld the connection is taken for HTTP/1.1 (an HTTP/2 client would
// have acknowledged the server's SETTINGS long before).
func (c *conn) tlsHold(st *txState) {
	s := c.tls
	s.held = append(s.held, st)
	if len(s.held) >= maxHeld {
		c.tlsSettleHTTP1()
	}
}

// tlsSettleHTTP1 decides HTTP/1.1 and emits the transactions held.
func (c *conn) tlsSettleHTTP1() {
	s := c.tls
	s.protoUnsure = false
	held := s.held
	s.held = nil
	for _, st := range held {
		c.emit(st)
	}
}

const tls13 = 0x0304

// tlsClientRecord handles one client record: its Finished ends the
// handshake; after it, application data is a request.
func (c *conn) tlsClientRecord(r tlswire.Record) {
	s := c.tls
	if s.finished == 0 && !s.isEarly(r) {
		if s.isEndOfEarlyData(r) {
			s.earlyAccepted = true
			return
		}
		sh := s.wire.ServerHello
		tls13Finished := sh != nil && sh.Version() >= tls13 && r.Type == tlswire.TypeApplicationData
		if tls13Finished || r.Type == tlswire.TypeHandshake && r.Encrypted {
			s.finished = r.At
			c.noteTtls()
			c.tlsEarlyDone()
		}
		return // the handshake
	}
	if r.Type != tlswire.TypeApplicationData || r.Len < minHTTPRecord {
		return
	}
	first := s.noteClientRecord(r)
	if s.multiplexed && c.tlsH2Client(r, first) {
		return
	}
	if s.protoUnsure && c.tlsSettleProtocol(r) {
		return
	}
	c.tlsRequestRecord(r, c.tlsClientTurn(r))
}

// tlsRequestRecord adds client record r to the request being sent,
// starting one if none is (ambiguous: flagged turns_ambiguous).
func (c *conn) tlsRequestRecord(r tlswire.Record, ambiguous bool) {
	st := c.currentRequest()
	if st == nil {
		st = c.newTx()
		if ambiguous {
			st.tx.Flags |= FlagTurnsAmbiguous
		}
		st.set(tfHeuristic, true)
		var ackOrCopy bool
		st.tx.RequestFirst, st.tx.upLost, ackOrCopy = c.clientTimeAt(r.Offset, r.StartAt)
		st.set(tfUpAckOrCopy, ackOrCopy)
		st.sent = &sentNotes{timer: c.timer, rearmAt: c.srvAckNewAt, prev: c.lastResp}
		st.reqStartOff = r.Offset
		c.addPending(st)
	}
	end := recordEnd(r)
	st.tx.RequestLast = r.At
	st.reqEndOff = end
	st.tx.RequestBytes = end - st.reqStartOff
	c.reqAck.end, c.reqAck.at = end, r.At
}

// tlsServerRecord handles one server record: after the client's Finished,
// application data (but session tickets) is a response.
func (c *conn) tlsServerRecord(r tlswire.Record) {
	s := c.tls
	if r.Type == tlswire.TypeHandshake && r.Encrypted && s.finished > 0 && s.serverFinished == 0 {
		s.serverFinished = r.At
		c.noteTtls()
		return
	}
	if c.tlsEarlyServerFlight(r) || c.resp != nil && s.earlyTicket(r) || !s.multiplexed && c.tlsInterim(r) {
		return
	}
	// After the flight of a connection with early data, the server's
	// records answer the early request, also one begun before the
	// client's Finished and ended after it.
	if !s.serverFlightDone && (s.finished == 0 || r.StartAt < s.finished) || r.Type != tlswire.TypeApplicationData ||
		r.Len < minHTTPRecord || s.multiplexed && c.tlsH2Server(r) || s.protoUnsure && c.resp == nil && s.h2Control(r) {
		// The server's handshake flight (Go sends its tickets there), an
		// alert, or HTTP/2's frames that answer nothing (also while TLS
		// 1.3 hides the protocol: no HTTP/1.1 response is that short).
		return
	}
	if c.resp == nil && len(c.pending()) == 0 && c.nextIndex == 0 {
		// Nothing asked yet, so nothing answered: TLS 1.3 session
		// tickets, sent when the client's Finished arrives however late a
		// busy server gets to them (32 ms behind it on the testbed), or an
		// HTTP/2 server's preface. An HTTP/1 server never speaks first.
		if s.protoUnsure {
			// Tickets share one length; the first record of another is
			// an HTTP/2 server's preface.
			if s.quietLen == 0 {
				s.quietLen = int32(r.Len)
			} else if r.Len != int(s.quietLen) {
				s.h2PrefaceSeen = true
			}
		}
		return
	}
	ticketsAfter := c.tls.version >= tls13 // TLS 1.3 sends tickets as application data
	late := r.StartAt > s.finished+ticketWindow
	if ticketsAfter && !s.ticketsDone && c.resp == nil && s.nTickets < maxTickets && r.Len <= ticketMaxLen &&
		(!late || s.finished > 0 && !s.multiplexed && !s.protoUnsure) {
		// Past the window only for an interim that may follow (see
		// lateTickets): unless one does, the records are the response's.
		if late {
			s.lateTickets++
		}
		s.tickets[s.nTickets] = r
		s.nTickets++
		return
	}
	if !s.ticketsDone {
		c.tlsLateTicketsAnswer()
		s.ticketsDone = true
	}
	c.tlsResponseRecord(r)
}

// tlsLateTicketsAnswer hands the records held past the ticket window to
// the response, as they would have gone had they not been held: no
// interim followed them, so they were the response's first records.
func (c *conn) tlsLateTicketsAnswer() {
	s := c.tls
	for _, r := range s.tickets[s.nTickets-s.lateTickets : s.nTickets] {
		c.tlsResponseRecord(r)
	}
	s.lateTickets = 0
}

// tlsResponseRecord adds server record r to the response being received,
// starting one (the turn changed) if none is. A response begins for the
// client when its first record is whole (TLS hands nothing on before the
// record's tag checks out), so its first byte is that record's last: a
// 16 KB first record that outgrew the server's first window reached curl
// a round trip after its first byte (20 ms on a 20 ms link).
func (c *conn) tlsResponseRecord(r tlswire.Record) {
	c.turnResponse(r.At, r.Offset, recordEnd(r), r.At)
}

// tlsTurnEnds closes the server's turn before the client's next request
// (or the connection's end): the response is complete. Tickets held with
// nothing after them were a short response's record, the last of them.
func (c *conn) tlsTurnEnds() {
	s := c.tls
	if s.hasInterim && c.resp == nil && len(c.pending()) > 0 {
		// Nothing followed the record taken for a 100 Continue: it was
		// the response.
		s.hasInterim = false
		c.tlsResponseRecord(s.interim)
	}
	switch {
	case !s.ticketsDone && s.lateTickets > 0 && c.resp == nil && len(c.pending()) > 0:
		c.tlsLateTicketsAnswer()
	case !s.ticketsDone && s.nTickets > 0 && c.resp == nil && len(c.pending()) > 0:
		c.tlsResponseRecord(s.tickets[s.nTickets-1])
	}
	if s.finished > 0 && len(c.pending()) > 0 && !s.protoUnsure && !s.multiplexed {
		// (An HTTP/2 client sends its preface and first HEADERS as two
		// records, and the tickets come after both.)
		s.ticketsDone = true
	}
	if c.resp != nil {
		c.completeResponse(c.resp)
	}
}

// tlsReady stands for the moment the client was done with TLS and could
// send its request, as a capture time (the client was there rtt/2
// earlier): its Finished leaving, or in a full TLS 1.2 handshake the
// server's Finished reaching it (a round trip later at the capture
// point). 0 when the connection has no TLS handshake seen.
func (c *conn) tlsReady() int64 {
	if c.tls == nil || c.tls.finished == 0 {
		return 0
	}
	if sf := c.tls.serverFinished; sf > 0 {
		return max(c.tls.finished, sf+c.clientRTT())
	}
	return c.tls.finished
}

// noteTtls sets the connection's Ttls: connected -> done with TLS.
func (c *conn) noteTtls() {
	if at := c.connectedAt(); at > 0 {
		c.tls.ttls = max(c.tlsReady()-at, 0)
	}
}

// recordEnd is the stream offset just past record r.
func recordEnd(r tlswire.Record) int64 { return r.Offset + 5 + int64(r.Len) }

// clipString bounds a string taken from the network.
func clipString(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

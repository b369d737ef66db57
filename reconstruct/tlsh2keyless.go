package reconstruct

import (
	"cmp"
	"slices"

	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/reconstruct/tlswire"
)

// Keyless HTTP/2, estimated by turns. Streams interleave on one
// connection, so without keys a record cannot be tied to a stream. What
// the records still show is the connection's busy periods: the client
// sends requests on a connection that was idle (it had the whole answer
// to everything before), and the server answers until the client next
// does so. Each such turn is a transaction flagged turn_estimate: from
// its first request record to the server's last record before the next
// turn, holding one stream (a sequential API client) or several (a
// browser's page and the objects it asks for while the page arrives).
// Frames that carry no request or answer are told by their sealed
// length: SETTINGS ACK (9 bytes of plaintext), WINDOW_UPDATE and
// RST_STREAM (13), PRIORITY (14: Chromium reprioritizes the streams of a
// page as it lays it out), PING and GOAWAY (17), alone or a WINDOW_UPDATE
// with another. They do not extend an answer, so a server's PING or
// GOAWAY minutes later does not stretch one; but a server's empty DATA
// frame (9 bytes) ends a stream's answer, so 9 bytes extend one under
// way. A client's record of such a length sent while the connection was
// busy is flow control. Sent when it was idle, it is noted (the last
// one), and opens a turn if the server answers it: a repeat GET under
// HPACK is often 22 to 30 bytes (Go's client sends one within a
// millisecond of the answer before). So a WINDOW_UPDATE sent as the
// client read an answer's end, followed by the answer of a slower stream
// asked for in the same turn, splits that turn in two at the update.
// The connection is busy while the client has not had all the server
// sent, and while a stream it asked for within the turn has had no
// server record since (a slow back end's page, a second tab's). The
// server's connection preface (its SETTINGS, the first record it sends)
// is no answer either. Under a suite whose record overhead is unknown
// (CBC) nothing is estimated. While TLS 1.3 hides the protocol, the
// records are read as HTTP/1.1 turns; when the client's SETTINGS ACK
// tells h2, those turns become HTTP/2 turns (tlsH2Settled).

// h2MaxPreface bounds the plaintext of a server's first record when it
// holds only the server's preface: a SETTINGS frame of up to 8
// parameters, a WINDOW_UPDATE and the SETTINGS ACK (nginx sends 3
// parameters, Go 4).
const h2MaxPreface = 9 + 8*6 + 13 + 9

// h2MaxClientPreface bounds the plaintext of a client's first record
// when it holds only the connection preface: the 24-byte magic, a
// SETTINGS frame of up to 8 parameters and a WINDOW_UPDATE. A client
// that sends its first request at once may put its HEADERS in the same
// record (curl does), which is then the request's first.
const h2MaxClientPreface = 24 + 9 + 8*6 + 13

// noteClientRecord keeps the client's first two application-data
// records and reports whether r is the first.
func (s *tlsSession) noteClientRecord(r tlswire.Record) (first bool) {
	switch s.clientRecords {
	case 0:
		s.clientFirst = r
	case 1:
		s.clientSecond = r
	default:
		return false
	}
	s.clientRecords++
	return s.clientRecords == 1
}

// h2MinHeaders: a client record shorter than this is taken for no new
// stream when it decides whether the turn waits for an answer (a
// request's body after its HEADERS was answered, as a beacon's 6 bytes
// are; browsers' HEADERS take 29 bytes and more).
const h2MinHeaders = 24

// h2ControlLen reports whether n bytes of plaintext are one HTTP/2
// frame without a request or an answer in it, or a WINDOW_UPDATE with
// another.
func h2ControlLen(n int) bool {
	switch n {
	case 9, 13, 14, 17, // SETTINGS ACK, empty DATA; WINDOW_UPDATE, RST_STREAM; PRIORITY; PING, GOAWAY
		22, 26, 30: // a WINDOW_UPDATE with one of them
		return true
	}
	return false
}

// h2Plain is the plaintext length of application-data record r of a
// keyless HTTP/2 connection; ok is false when the suite's overhead is
// not known (no estimates then).
func (s *tlsSession) h2Plain(r tlswire.Record) (n int, ok bool) {
	sh := s.wire.ServerHello
	if sh == nil {
		return 0, false
	}
	overhead, ok := tlsdecrypt.SealedLen(sh.Version(), sh.CipherSuite, 0)
	return int(r.Len) - overhead, ok
}

// h2Control reports whether record r holds HTTP/2 control frames only.
func (s *tlsSession) h2Control(r tlswire.Record) bool {
	n, ok := s.h2Plain(r)
	return ok && h2ControlLen(n)
}

// tlsH2Client reports whether client record r of a keyless HTTP/2
// connection opens or continues no turn: a request sent before the
// client had the whole answer so far, or before any answer to a stream
// it asked for so (other streams of the same busy period), or control
// frames (noted when the connection was idle).
func (c *conn) tlsH2Client(r tlswire.Record, first bool) (skip bool) {
	s := c.tls
	n, ok := s.h2Plain(r)
	if !ok || first && n <= h2MaxClientPreface {
		return true // or the client's bare connection preface
	}
	// Busy: the client had not all the server sent (a stream's answer
	// may be as short as control frames), or it asked for a stream since
	// the server's last record (a slow back end's stream keeps the turn
	// open although all sent so far arrived).
	busy := c.tlsH2Busy()
	if h := s.h2Hole; h.at > 0 && r.Offset < h.end && r.StartAt >= h.at {
		// Its first copy was lost before the capture point: the client
		// sent it before the bytes that overtook it, as things then were.
		busy = h.busy
	}
	if h2ControlLen(n) {
		if !busy && c.currentRequest() == nil && n > 9 {
			// (9 bytes hold no header block: a SETTINGS ACK.)
			s.h2Quiet, s.hasH2Quiet = r, true
		}
		return true
	}
	s.hasH2Quiet = false
	if busy && n >= h2MinHeaders {
		s.h2Asked = true // another stream of the turn, not answered yet
	}
	return busy
}

// tlsH2Busy reports whether a keyless HTTP/2 connection is in a turn:
// the client had not all the server sent (a record under way counts: a
// client that read every whole record of a long answer, as a window
// opened slowly after a loss, sends WINDOW_UPDATEs mid-answer), or asked
// for a stream within the turn that no server record answered since.
func (c *conn) tlsH2Busy() bool {
	return c.resp != nil && (max(c.resp.respEndOff, c.tls.h2ServerEnd, c.s2c.highest) > c.lastAck || c.tls.h2Asked)
}

// clientHole notes the first sign of a hole in the client's stream of a
// keyless HTTP/2 connection: at is when it came, end the stream offset
// the client had sent by then, busy whether the connection was in a turn
// (tlsH2Busy) or a request awaited its answer. A segment that overtook
// the lost one is judged with its own ACK (sent in the same burst, it
// acknowledges what the lost one did); a pure ACK before its ACK (the
// client sends one for data that came after its last segment, which the
// lost one could not acknowledge). A request lost before the capture
// point reaches it a retransmission later, when the client may have had
// every answer: read then, the streams it asked for with the turn's
// others (a page's objects, or after a redirect the page while the
// previous page's beacon was answered) opened a turn of their own.
type clientHole struct {
	at, end int64
	busy    bool
}

// tlsNoteClientHole notes a hole in the client's stream, first seen at
// ts, the client having sent up to end. A hole already noted and not yet
// filled keeps its note: a request sent after the lost one, while it
// went unanswered, belongs to the same turn (the client's ACKs may have
// covered every answer by then).
func (c *conn) tlsNoteClientHole(ts, end int64) {
	s := c.tls
	if s == nil || !s.multiplexed || s.protoUnsure || s.h2Hole.at > 0 && s.h2Hole.end > c.c2s.next {
		return
	}
	// A request still unanswered counts: the turn had begun.
	s.h2Hole = clientHole{at: ts, end: end, busy: c.tlsH2Busy() || c.currentRequest() != nil}
}

// tlsH2Server reports whether server record r of a keyless HTTP/2
// connection is no answer: control frames, the server's preface, or a
// record with no turn to answer (a server's own PING or GOAWAY, or its
// preface before the first request). A record that answers a short
// request noted as control frames opens that request's turn first.
func (c *conn) tlsH2Server(r tlswire.Record) (skip bool) {
	s := c.tls
	// Something came after the streams asked for: their answers begin
	// (a 204's HEADERS alone can be as short as control frames).
	s.h2Asked = false
	s.h2ServerEnd = recordEnd(r)
	n, ok := s.h2Plain(r)
	if !ok || h2ControlLen(n) && (n != 9 || c.resp == nil) {
		return true
	}
	if !s.h2Prefaced {
		s.h2Prefaced = true
		if c.resp == nil && n <= h2MaxPreface {
			return true
		}
	}
	if s.hasH2Quiet && c.currentRequest() == nil && (c.resp == nil || c.resp.respEndOff <= c.lastAck) {
		// The client had every answer when it sent the noted record,
		// and the server answers now: it was a request.
		s.hasH2Quiet = false
		c.tlsRequestRecord(s.h2Quiet, c.tlsClientTurn(s.h2Quiet))
		return false
	}
	return c.resp == nil && c.currentRequest() == nil
}

// tlsH2Settled turns what was read while TLS 1.3 hid the protocol into
// HTTP/2 turns: the request and answer under way go on as the first
// turn, and the turns held are emitted as estimates. Nothing of the
// connection was emitted before (emit held it all), so a turn that was
// only the client's bare preface (answered by the server's) is dropped
// and the others renumbered.
func (c *conn) tlsH2Settled() {
	s := c.tls
	answers := c.tlsH2HeldAnswers()
	s.ticketsDone = true
	s.h2Prefaced = true // the preface came before the client's SETTINGS ACK
	held := s.held
	s.held = nil
	if c.tlsH2PrefaceOnly(held) || c.tlsH2PrefaceOnly(c.pending()) || c.resp != nil && c.tlsIsPreface(c.resp) {
		c.tlsH2Renumber(held)
	}
	held = slices.DeleteFunc(held, c.tlsIsPreface)
	c.setPending(slices.DeleteFunc(c.pending(), c.tlsIsPreface))
	if c.resp != nil && c.tlsIsPreface(c.resp) {
		c.resp = nil
	}
	held = c.tlsH2Merge(held)
	c.tlsH2DropPreface(held)
	c.tlsH2DropPreface(c.pending())
	c.tlsH2DropPreface([]*txState{c.resp})
	if st := c.resp; st != nil && len(answers) > 0 {
		// The answer went on past the tickets' slots: it began earlier.
		st.tx.ResponseFirst, st.respStartOff = answers[0].At, answers[0].Offset
		st.tx.ResponseBytes = st.respEndOff - st.respStartOff
		answers = nil
	}
	for _, r := range answers {
		if !c.tlsH2Server(r) {
			c.tlsResponseRecord(r)
		}
	}
	for _, st := range held {
		c.emit(st)
	}
}

// tlsH2HeldAnswers returns the server records held as session tickets
// that were HTTP/2 frames, when a request still awaits its answer: those
// after the server's preface. A TLS 1.3 server sends its tickets as its
// handshake ends, before the application writes its preface; but a fast
// answer to a request that came with the client's Finished falls inside
// the ticket window too (nginx's whole answer to a small page, 3 ms after
// the Finished at the server's capture point), and without this the
// page's turn ran on into the next request's. The tickets of a
// connection share one length (OpenSSL's two, 282 bytes at nginx's); the
// preface is the first record of another, or is held alone if as short
// as one (nginx may put its preface and the answer's HEADERS in one
// record). When the answer outlasted the slots held, its response began
// at the record after them; the records returned began it.
func (c *conn) tlsH2HeldAnswers() []tlswire.Record {
	s := c.tls
	if s.nTickets == 0 {
		return nil
	}
	held := s.tickets[:s.nTickets]
	switch st := c.resp; {
	case !s.ticketsDone && st == nil && len(c.pending()) > 0:
	case s.ticketsDone && st != nil && st.tx.Index == 0 && s.lateTickets == 0 && st.respStartOff == recordEnd(held[len(held)-1]):
		// The answer's first records filled the slots for tickets, and
		// the record after them began it.
	default:
		return nil
	}
	if !s.h2PrefaceSeen {
		ticket := int(s.quietLen)
		if ticket == 0 {
			ticket = held[0].Len
		}
		for len(held) > 0 && held[0].Len == ticket {
			held = held[1:]
		}
		if len(held) > 0 {
			if n, ok := s.h2Plain(held[0]); ok && n <= h2MaxPreface {
				held = held[1:]
			}
		}
	}
	return held // s.tickets is not written again once h2 is settled
}

// tlsH2Merge joins the latest turn read as HTTP/1.1 while the protocol
// was unsure (its answer under way, or its request alone) to the turn
// before it (held, or awaiting the client's ACK), when its request came
// before the client had that turn's answer (turns_ambiguous): it was
// another stream of the same busy period (a second tab's page), as an
// HTTP/1.1 turn ends at any client record after the server's. It
// returns the turns held that are left.
func (c *conn) tlsH2Merge(held []*txState) []*txState {
	// The later turn: its answer under way, or its request alone.
	later := c.resp
	if later == nil && len(c.pending()) == 1 {
		later = c.pending()[0]
	}
	// Done turns wait held, or for the client's ACK of their end.
	done := append(slices.Clone(c.awaiting()), held...)
	if later == nil || c.resp != nil && len(c.pending()) > 0 || len(done) == 0 || later.tx.Flags&FlagTurnsAmbiguous == 0 {
		return held // the client had the answers before: a turn of its own
	}
	// The turn before goes on, its answer under way again.
	first := slices.MaxFunc(done, func(a, b *txState) int { return cmp.Compare(a.tx.Index, b.tx.Index) })
	if later.is(tfRespStarted) {
		first.tx.ResponseLast, first.respEndOff = later.tx.ResponseLast, later.respEndOff
		first.tx.ResponseBytes = first.respEndOff - first.respStartOff
	}
	first.set(tfRespDone, false)
	first.tx.ResponseAcked = 0
	first.tx.Flags = (first.tx.Flags | later.tx.Flags) &^ (FlagTurnsAmbiguous | FlagNoResponse | FlagNoAck)
	c.resp, c.lastResp = first, first.sentAt().prev
	c.setPending(nil)
	c.nextIndex = first.tx.Index + 1
	gone := func(st *txState) bool { return st == first }
	c.setAwaiting(slices.DeleteFunc(c.awaiting(), gone))
	return slices.DeleteFunc(held, gone)
}

// tlsIsPreface reports whether st's request is only the client's first
// record, its bare HTTP/2 connection preface.
func (c *conn) tlsIsPreface(st *txState) bool {
	s := c.tls
	n, ok := s.h2Plain(s.clientFirst)
	return ok && n <= h2MaxClientPreface && s.clientRecords > 0 && st.reqStartOff == s.clientFirst.Offset &&
		st.reqEndOff == recordEnd(s.clientFirst)
}

// tlsH2PrefaceOnly reports whether one of txs is a preface's turn.
func (c *conn) tlsH2PrefaceOnly(txs []*txState) bool {
	return slices.ContainsFunc(txs, c.tlsIsPreface)
}

// tlsH2Renumber numbers the connection's transactions but the preface's
// turn from 0, in their order (held, then pending, then the answer under
// way, which may be the first pending's).
func (c *conn) tlsH2Renumber(held []*txState) {
	all := append(slices.Clone(held), c.pending()...)
	if c.resp != nil {
		all = append(all, c.resp)
	}
	all = slices.DeleteFunc(all, c.tlsIsPreface)
	slices.SortFunc(all, func(a, b *txState) int { return cmp.Compare(a.tx.Index, b.tx.Index) })
	all = slices.Compact(all)
	for i, st := range all {
		st.tx.Index = int32(i)
	}
	c.nextIndex = int32(len(all))
}

// tlsH2DropPreface starts the first request at the client's second
// record when its first, read as HTTP/1.1 while the protocol was unsure,
// was the bare connection preface (a preconnected client sends its
// request long after).
func (c *conn) tlsH2DropPreface(txs []*txState) {
	s := c.tls
	n, ok := s.h2Plain(s.clientFirst)
	if !ok || n > h2MaxClientPreface || s.clientRecords < 2 {
		return
	}
	for _, st := range txs {
		if st != nil && st.reqStartOff == s.clientFirst.Offset && st.reqEndOff >= recordEnd(s.clientSecond) {
			r := s.clientSecond
			var ackOrCopy bool
			st.tx.RequestFirst, st.tx.upLost, ackOrCopy = c.clientTimeAt(r.Offset, r.StartAt)
			st.set(tfUpAckOrCopy, ackOrCopy)
			st.reqStartOff = r.Offset
			st.tx.RequestBytes = st.reqEndOff - st.reqStartOff
		}
	}
}

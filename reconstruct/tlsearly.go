package reconstruct

import (
	"slices"
	"unsafe"

	"github.com/rtmon/rtmon/reconstruct/tlswire"
)

// TLS 1.3 0-RTT. A client resuming a session that allows early data sends
// its request with the ClientHello, protected by the early secret, before
// the ServerHello; the server may answer it right after its own Finished,
// before the client's Finished reaches it (0.5-RTT data). So the request
// did not wait for the handshake: its transaction has no Ttls
// (FlagEarlyData), while the connection keeps its handshake time.
//
// The early records come before the ServerHello says how they are
// protected, so they are held until it passes and then replayed: through
// decryption when the key log has the connection (its early secret), else
// keyless as the connection's first request turn. Without keys the
// server's handshake flight is told from its answer by the length of its
// Finished record (EncryptedExtensions and Finished, no certificate on a
// resumption); its later records, before the client's Finished, answer
// the early request.

// earlyHold is a connection's early records held for the ServerHello.
type earlyHold struct {
	events []tlswire.Event
	bytes  int
	// replayed: the records were handed on; none is held again.
	replayed bool
}

// Bounds of what is held: a server accepts at most max_early_data bytes
// (nginx and OpenSSL 16 KiB), so more is no early data worth decrypting;
// records past the bounds keep their timing but lose their bodies.
const (
	maxEarlyBytes  = 64 << 10
	maxEarlyEvents = 64
)

var earlyHoldSize = int(unsafe.Sizeof(earlyHold{}))

// held is what h holds, for the memory count (0 for nil).
func (h *earlyHold) held() int {
	if h == nil {
		return 0
	}
	return earlyHoldSize + h.bytes + cap(h.events)*int(eventSize)
}

// tlsEarlyRecord holds a client record sent as early data (before the
// ServerHello, the ClientHello having offered it) and reports whether it
// was one.
func (c *conn) tlsEarlyRecord(ev *tlswire.Event) bool {
	s := c.tls
	ch := s.wire.ClientHello
	if s.wire.ServerHello != nil || s.finished != 0 || ch == nil || !ch.EarlyData ||
		ev.Record.Type != tlswire.TypeApplicationData || s.early != nil && s.early.replayed {
		return false
	}
	if s.early == nil {
		s.early = &earlyHold{}
		c.rec.Flags |= FlagEarlyData
		c.t.stats.TLSEarlyData++
	}
	h := s.early
	if len(h.events) >= maxEarlyEvents {
		return true // past any server's max_early_data: not HTTP it will read
	}
	held := *ev
	if h.bytes+len(held.Body) > maxEarlyBytes {
		held.Body = nil
	}
	h.bytes += len(held.Body)
	h.events = append(h.events, held)
	s.earlyEnd = recordEnd(ev.Record)
	return true
}

// tlsEarlyReplay hands the held early records on once the ServerHello
// has passed (or the connection ends without one): decrypted, held for a
// key line, or timed keyless, as the session now stands.
func (c *conn) tlsEarlyReplay() {
	s := c.tls
	h := s.early
	if h == nil || h.replayed {
		return
	}
	evs := h.events
	*h = earlyHold{replayed: true}
	c.tlsEvents(true, evs)
	c.tlsAccount()
}

// isEarly reports whether client record r was sent as early data.
func (s *tlsSession) isEarly(r tlswire.Record) bool {
	return r.Type == tlswire.TypeApplicationData && r.Offset < s.earlyEnd
}

// tlsEarlyServerFlight takes, on a connection with early data and before
// the client's Finished, the server's records of its handshake flight,
// and reports whether r was one: its records up to the Finished (told by
// length) are handshake, and after them come the early request's answer.
func (c *conn) tlsEarlyServerFlight(r tlswire.Record) bool {
	s := c.tls
	if s.earlyEnd == 0 || s.serverFlightDone {
		return false
	}
	if sh := s.wire.ServerHello; sh != nil && r.Type == tlswire.TypeApplicationData && r.Len == tls13FinishedRecord(sh.CipherSuite) {
		s.serverFlightDone = true
	}
	return true
}

// isEndOfEarlyData reports whether client record r, before its Finished,
// is the EndOfEarlyData that closes accepted early data (an empty
// handshake message alone in its record): not yet the Finished that ends
// the handshake.
func (s *tlsSession) isEndOfEarlyData(r tlswire.Record) bool {
	sh := s.wire.ServerHello
	return s.earlyEnd > 0 && sh != nil && r.Type == tlswire.TypeApplicationData &&
		r.Len == tls13FinishedRecord(sh.CipherSuite)-tls13HashLen(sh.CipherSuite)
}

// tls13HashLen is the length of the suite's hash.
func tls13HashLen(suite uint16) int {
	if suite == 0x1302 { // TLS_AES_256_GCM_SHA384
		return 48
	}
	return 32
}

// tls13FinishedRecord is the length of a TLS 1.3 record holding only a
// Finished message: its 4-byte header and the suite's hash, a type byte
// and the AEAD tag.
func tls13FinishedRecord(suite uint16) int {
	tag := 16
	if suite == 0x1305 { // TLS_AES_128_CCM_8_SHA256
		tag = 8
	}
	return 4 + tls13HashLen(suite) + 1 + tag
}

// earlyTicket reports whether server record r, on a connection with early
// data whose answer has begun, is a session ticket: the server issues them
// when the client's Finished reaches it, which may be while the early
// request's answer is still open, so they are not taken for its records.
// (Before the answer, tickets are held as on any TLS 1.3 connection.)
func (s *tlsSession) earlyTicket(r tlswire.Record) bool {
	if s.earlyEnd == 0 || s.finished == 0 || s.earlyTickets >= maxTickets || r.Len > ticketMaxLen ||
		r.StartAt < s.finished || r.StartAt > s.finished+ticketWindow {
		return false
	}
	s.earlyTickets++
	return true
}

// tlsPastEarly reports whether client bytes at stream offset off come after
// the early data that request st was sent in: the handshake's end, not
// part of the request.
func (c *conn) tlsPastEarly(st *txState, off int64) bool {
	return c.tls != nil && st.reqStartOff < c.tls.earlyEnd && off >= c.tls.earlyEnd
}

// tlsEarlyDone settles, at the client's Finished, what became of its early
// data: accepted if an EndOfEarlyData came before it. A server that
// refused it skipped those records, and the client sends the request
// again after its Finished: the early transactions are dropped, and the
// request is timed from its second sending.
func (c *conn) tlsEarlyDone() {
	s := c.tls
	if s.earlyEnd == 0 || s.earlyAccepted {
		return
	}
	c.t.stats.TLSEarlyRejected++
	dropped := c.nextIndex
	early := func(st *txState) bool {
		if st.reqStartOff < s.earlyEnd {
			dropped = min(dropped, st.tx.Index)
			return true
		}
		return false
	}
	c.setPending(slices.DeleteFunc(c.pending(), early))
	s.held = slices.DeleteFunc(s.held, early)
	if c.resp != nil && early(c.resp) {
		c.resp = nil
	}
	// Nothing came after the early data yet: the request sent again is
	// the connection's first, and it opened the connection.
	c.nextIndex = dropped
}

// sentEarly: st's request went as 0-RTT early data, with the ClientHello.
// The client began its handshake for this request, so however long after
// the connect it came (a loaded client: 80 ms), the connection was not
// opened ahead of need.
func (c *conn) sentEarly(st *txState) bool {
	return c.tls != nil && st.reqStartOff < c.tls.earlyEnd
}

// tlsDoneFor is the client-side moment a fresh connection's request st
// could leave as far as TLS goes (b1, connected, without TLS): its
// Finished sent, or for a request sent as 0-RTT early data, with the
// ClientHello, the connect itself: it did not wait for the handshake.
func (c *conn) tlsDoneFor(st *txState, b1, half int64) int64 {
	if c.sentEarly(st) {
		st.tx.Flags |= FlagEarlyData
		return b1
	}
	return max(b1, c.tlsReady()-half)
}

package reconstruct

import (
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/reconstruct/tlswire"
)

// Keyless turns that are not simple exchanges. A client that sends a
// request head with "Expect: 100-continue" waits for the server's interim
// "HTTP/1.1 100 Continue\r\n\r\n" before its body: two client turns and
// two server turns for one exchange. That interim is 25 bytes of
// plaintext, so its record has a length the suite fixes (42 under TLS 1.3,
// 49 under TLS 1.2 AES-GCM, 41 under ChaCha20), and no real response is
// that short (a status line and the headers servers always send take
// more). Such a record opening the server's turn is held: client records
// after it are the body, server records after it the final response, and
// if nothing follows it was the response after all.
//
// A client that sends its next request before it has the whole answer to
// the previous one (pipelining, or a body still going as the server
// answered early) leaves turns that cannot be told apart: its record's
// ACK does not cover the server's records that had passed. Both
// exchanges are flagged turns_ambiguous.

// continueHead is the interim response a server sends for "Expect:
// 100-continue".
const continueHead = "HTTP/1.1 100 Continue\r\n\r\n"

// maxInterimRecord bounds the length of a record that can hold it under
// any suite (49 under TLS 1.2 AES-GCM, the longest).
const maxInterimRecord = 64

// tlsContinued settles a held interim as a 100 Continue: what follows it,
// the client's body or the server's final response, goes on with the
// request it answered.
func (c *conn) tlsContinued() {
	c.tls.hasInterim = false
	if st := c.currentRequest(); st != nil {
		st.tx.Flags |= FlagContinued
	}
}

// tlsInterim holds server record r while it may be a 100 Continue (the
// first record of the server's turn, of the interim's sealed length), and
// reports whether it did. A record after a held one settles it: the
// final response follows the interim at once.
func (c *conn) tlsInterim(r tlswire.Record) bool {
	s := c.tls
	if s.hasInterim {
		c.tlsContinued()
		return false
	}
	// Cheap tests first: this runs on every server record.
	sh := s.wire.ServerHello
	if c.resp != nil || r.Len > maxInterimRecord || r.Type != tlswire.TypeApplicationData || sh == nil ||
		c.currentRequest() == nil {
		return false
	}
	if n, ok := tlsdecrypt.SealedLen(sh.Version(), sh.CipherSuite, len(continueHead)); !ok || r.Len != n {
		return false
	}
	s.interim, s.hasInterim = r, true
	s.ticketsDone = true // the server's turn has begun: what it held were tickets
	return true
}

// tlsClientTurn takes a client request record: after a held 100 Continue
// it is the request's body, going on; else it ends the server's turn.
// It reports whether the record came before the client had the whole
// answer of that turn (turns ambiguous).
func (c *conn) tlsClientTurn(r tlswire.Record) (ambiguous bool) {
	s := c.tls
	if s.hasInterim {
		c.tlsContinued()
		return false
	}
	if c.resp == nil && !s.ticketsDone && s.nTickets > 0 && c.currentRequest() != nil &&
		r.StartAt < s.tickets[s.nTickets-1].At+c.clientRTT()*3/4 {
		// The client began this record before the records held as
		// tickets can have reached it: they came while the request was
		// still being sent, so they are tickets, no answer, and the
		// request goes on (a body in several records; its later
		// records, which acknowledge them, must not take them for a
		// short response). A record's own ACK comes with its last
		// segment, a round trip into a long body, so its start decides.
		s.ticketsDone = true
		return false
	}
	if st := c.resp; st != nil && st.respEndOff > c.lastAck {
		st.tx.Flags |= FlagTurnsAmbiguous
		ambiguous = true
	}
	c.tlsTurnEnds()
	return ambiguous
}

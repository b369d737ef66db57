package reconstruct

import (
	"unsafe"

	"github.com/rtmon/rtmon/reconstruct/http2wire"
	"github.com/rtmon/rtmon/reconstruct/tlswire"
)

// Decrypted HTTP/2. A decrypted connection whose client began with the
// HTTP/2 preface is fed to an http2wire.Conn, and each stream it
// completes becomes a transaction flagged http2: method, URL (the
// :path), host (:authority), status, sizes, its request timed from the
// first byte of its HEADERS to its END_STREAM, its response likewise.
// Each record's plaintext is fed as its first byte, at the time the
// record's first byte was captured, then the rest, at the time the record
// completed: a frame that begins a record is timed from the record's
// start, one inside it (or after it, in the same record) from its end.
// A stream's transaction waits, like any response, for the client's ACK
// of the record that ended it. Indexes follow completion order; the
// connection's setup goes with the client's first stream (opensConn).
//
// What the pageview stage reads comes as over HTTP/1: Referer (redacted
// like the URL), Accept, Sec-Fetch-Dest, Location, Content-Encoding, and
// the body of a 2xx HTML or CSS response, which the parser keeps within
// MaxBodyBytes and whose bytes count in MaxBodyBudget from the moment it
// keeps them (tlsH2Reserve) until the transaction is emitted.

// h2 bounds: streams tracked at once and header values kept, within the
// tracker's memory count (h2StreamMemory each, which covers the dozen
// values a stream keeps at their usual lengths; bodies are counted apart),
// and the page bodies one connection's open streams may hold at once, in
// MaxBodyBytes, so that one connection cannot take all of MaxBodyBudget.
const (
	maxH2Streams   = 256
	maxH2ValueLen  = 2 << 10
	h2StreamMemory = 2 << 10
	maxH2Bodies    = 16
)

// tlsH2Start begins reading HTTP/2 from the connection's plaintext.
func (c *conn) tlsH2Start() {
	cfg := http2wire.Config{MaxStreams: maxH2Streams, MaxValueLen: maxH2ValueLen}
	if t := c.t; t.cfg.MaxBodyBytes > 0 {
		cfg.WantBody = wantH2Body
		// At most the whole budget, which also keeps the product from
		// overflowing for a huge MaxBodyBytes.
		cfg.MaxBodyLen, cfg.MaxBodyBuffered = t.cfg.MaxBodyBytes, t.cfg.MaxBodyBudget
		if t.cfg.MaxBodyBytes <= t.cfg.MaxBodyBudget/maxH2Bodies {
			cfg.MaxBodyBuffered = maxH2Bodies * t.cfg.MaxBodyBytes
		}
		cfg.Reserve = t.tlsH2Reserve
	}
	c.plainOf().h2 = http2wire.New(cfg)
}

// wantH2Body asks for the bodies HTTP/1 keeps (responseEvents.HeadersDone).
func wantH2Body(status int, contentType string) bool {
	return status/100 == 2 && pageBody(contentType)
}

// tlsH2Reserve grants what MaxBodyBudget leaves of n more body bytes and
// counts them held: they are held while their stream is open, not only
// once it is a transaction, and leave the count with it (emitTransaction).
// tlsH2Close makes the parser emit every stream, so none is left counted.
func (t *Tracker) tlsH2Reserve(n int) int {
	n = max(min(n, t.cfg.MaxBodyBudget-t.bodyBytes), 0)
	t.bodyBytes += n
	return n
}

// tlsH2Feed feeds record r's plaintext to the HTTP/2 parser.
func (c *conn) tlsH2Feed(client bool, r tlswire.Record, data []byte) {
	p := c.plainOf()
	dir := http2wire.ServerToClient
	if client {
		dir = http2wire.ClientToServer
	}
	p.h2End[dir] = recordEnd(r)
	if !client {
		p.spans[1].push(r, len(data)) // for h2ResponseEnd
		// The client reads none of a record before it is whole (see
		// tlsResponseRecord): the server's frames in it are all its last
		// byte's.
		c.h2Events(p.h2.Feed(dir, data, r.At))
		return
	}
	// The client's round-trip samples, as for requests (fromServer): one
	// per server ACK, from the oldest record it acknowledges, as Linux
	// takes them. Without them the client's timer stayed at the
	// handshake's (RTO 450 ms where the client's was 361 ms, on the HTTPS
	// testbed), and a lost request's resend did not fit it.
	if c.reqAck.end == 0 {
		c.reqAck.end, c.reqAck.at = recordEnd(r), r.At
	}
	c.h2Events(p.h2.Feed(dir, data[:1], c.h2ClientRecordStart(r)))
	if len(data) > 1 {
		end := r.At
		if pc, ok := c.clientPiece(recordEnd(r) - 1); ok {
			end = min(end, pc.arrived) // its last byte, as it first came
		}
		c.h2Events(p.h2.Feed(dir, data[1:], end))
	}
}

// h2ResentRecord is a client record whose first copy was lost before the
// capture point: its requests wait for requestSent's estimate.
type h2ResentRecord struct {
	at      int64 // the time its first byte was fed
	rearmAt int64 // srvAckNewAt as it came
	// prev and timer are the connection's as it came: the streams it
	// starts finish later, after other streams' responses.
	prev      prevResp
	timer     clientTimer
	lost      int
	ackOrCopy bool
	refill    bool
}

// h2ClientRecordStart is when client record r's first byte reached the
// capture point. Its streams are timed from there, not from the record's
// in-order delivery: a request that overtook a lost one was sent at its
// own time, and only waited at the server (head-of-line blocking, which
// is the client's wait too). A record that was resent after a loss is
// noted for h2Stream.
func (c *conn) h2ClientRecordStart(r tlswire.Record) int64 {
	pc, ok := c.clientPiece(r.Offset)
	if !ok {
		return r.StartAt
	}
	at := min(pc.arrived, r.StartAt)
	resent := pc.refill || pc.arrived == pc.ts && pc.lost > 0
	sent, ahead := c.sentBeforeAck(pc, r.Offset)
	switch {
	case ahead:
		// A pure ACK showed it sent before it came (sentBeforeAck): a
		// nanosecond apart from any piece's time, which keeps two
		// records' streams apart for h2RequestLoss.
		at = min(at, sent)
		c.noteH2Resent(h2ResentRecord{at: at, refill: true})
	case pc.refill:
		// Its first send is known from the segment that overtook it
		// (deliverClient): only the flag remains to give. A nanosecond
		// earlier than that segment keeps the two records' streams apart
		// for h2RequestLoss.
		at--
		c.noteH2Resent(h2ResentRecord{at: at, refill: true})
	case resent:
		// IP IDs show a lost first copy: the send is requestSent's to
		// estimate. (A piece that overtook a hole owes its IP ID gap to
		// the hole, whose filling is the resend.)
		c.noteH2Resent(h2ResentRecord{at: at, lost: int(pc.lost), ackOrCopy: pc.ackOrCopy, rearmAt: c.srvAckNewAt,
			prev: c.lastResp, timer: c.timer})
	}
	return at
}

// clientPrev is the client's remembered piece that ends where pc begins
// (zero when there is none).
func (c *conn) clientPrev(pc deliveryPiece) deliveryPiece {
	if p, ok := c.clientPiece(pc.off - 1); ok && p.end == pc.off {
		return p
	}
	return deliveryPiece{}
}

// sentBeforeAck is when the bytes of piece pc from offset off on (a
// record's) first left, when a pure ACK's sequence number passed off
// before the piece came (ok): the client had sent them before that ACK,
// and after the piece before it (TCP sends in order). Where in that
// window:
//   - one tail loss probe after the send (2 srtt with a flight out; Linux
//     arms it at each send) lands in the window: it left then. A probe
//     that lands at the piece before it says it left with that piece, the
//     last of a burst, when the client sent nothing else before the ACK
//     (aheadSilent).
//   - with the client silent, one retransmission timeout after the
//     server's ACK of the piece before it reached the client (Linux
//     restarts the timer at each ACK of new data): it left with that
//     piece too, as a client sends requests as soon as it can.
//   - a client that still had an answer on its way when it sent that
//     piece (aheadReact) sent it in reaction to that answer, as it came.
//   - else the ACK bounds it.
//
// A resend that overtaking data's SACK may have prompted (an RTT after
// that data) says only that it left no later than one probe before, so
// it is read as a probe only when the client was silent. Seen on the
// HTTPS testbed: a Go client's HEADERS for four objects, lost behind a
// fifth, timed from WINDOW_UPDATEs that overtook them 158 ms later; its
// favicon, lost beside its beacon, timed from the resend 534 ms later.
func (c *conn) sentBeforeAck(pc deliveryPiece, off int64) (sent int64, ok bool) {
	l := c.loss
	if l == nil || l.aheadAt == 0 || l.aheadAt >= pc.arrived || off >= l.aheadOff {
		return 0, false
	}
	hi := l.aheadAt
	prev := c.clientPrev(pc)
	if prev.end == 0 || prev.arrived >= hi || l.aheadOff < pc.end {
		return hi, true
	}
	lo := prev.arrived + 1
	wait, spread := c.timer.lostWait(1, true)
	est, tol := pc.ts-wait, spread+estimateSlack
	sack := pc.ts - pc.arrived - c.clientRTT() // from an RTT after the data that overtook it
	sackMaybe := pc.refill && max(sack, -sack) <= estimateSlack
	switch {
	case est < lo-tol || est > hi+tol:
		// No probe from a send in the window.
	case est <= lo+tol && l.aheadSilent:
		return lo, true
	case !sackMaybe:
		return min(max(est, lo), hi), true
	}
	if l.aheadSilent && c.srvAckNewAt >= prev.arrived && c.srvAck >= prev.end {
		wait, spread := c.timer.lostWait(1, false)
		if d := pc.ts - wait - (c.srvAckNewAt + c.clientRTT()); max(d, -d) <= spread+estimateSlack {
			return lo, true
		}
	}
	if l.aheadReact > 0 {
		return min(max(l.aheadReact, lo), hi), true
	}
	return hi, true
}

func (c *conn) noteH2Resent(e h2ResentRecord) {
	p := c.plainOf()
	p.h2Resent[p.h2Next] = e
	p.h2Next = (p.h2Next + 1) % len(p.h2Resent)
}

// h2RequestLoss gives st the loss evidence of the record its request began
// in (fed at at), as an HTTP/1 request gets its own (requestEvents).
func (c *conn) h2RequestLoss(st *txState, at int64) {
	for _, e := range c.plainOf().h2Resent {
		if (e.lost > 0 || e.refill) && e.at == at {
			st.tx.upLost, st.notes().rearmAt = int8(e.lost), e.rearmAt // e.lost is a pktLost
			st.set(tfUpAckOrCopy, e.ackOrCopy)
			if e.lost > 0 {
				st.sent.prev, st.sent.timer = e.prev, e.timer
			}
			st.set(tfResent, st.is(tfResent) || e.refill)
			return
		}
	}
}

// tlsH2Close ends the HTTP/2 parser: the streams still open are emitted,
// incomplete.
func (c *conn) tlsH2Close() {
	if p := c.plainOf(); p != nil && p.h2 != nil {
		c.h2Events(p.h2.Close(c.curTS))
		p.h2 = nil
	}
}

func (c *conn) h2Events(evs []http2wire.Event) {
	for i := range evs {
		switch ev := &evs[i]; ev.Kind {
		case http2wire.KindStream:
			c.h2Stream(ev.Stream)
		case http2wire.KindError:
			c.t.stats.ParseDesyncs++ // that direction is read no more
		}
	}
}

// h2Stream turns a completed stream into a transaction.
func (c *conn) h2Stream(s *http2wire.Stream) {
	p := c.plainOf()
	st := c.newTx()
	st.more().h2ID = s.ID
	tx, rq, rs := &st.tx, &s.Request, &s.Response
	tx.Flags |= FlagHTTP2
	st.sent = &sentNotes{prev: c.lastResp, timer: c.timer} // a resent request's are as it came (h2RequestLoss)
	if rq.Seen {
		v := tx.reqVals()
		v[reqMethod], v[reqURL], v[reqUserAgent] = rq.Method, c.t.redact(rq.Path), rq.UserAgent
		v[reqReferer], v[reqAccept], v[reqFetchDest] = c.t.redact(rq.Referer), rq.Accept, rq.SecFetchDest
		if rq.Authority != "" {
			v[reqHost] = rq.Authority
		}
		tx.setReq(v)
		tx.RequestFirst = rq.StartAt
		tx.RequestLast = max(rq.EndAt, rq.StartAt)
		c.h2RequestLoss(st, rq.StartAt)
		tx.RequestBytes = rq.HeaderBytes + rq.BodyBytes
	}
	st.set(tfReqDone, true)
	// A reset after the whole response (a server's RST_STREAM NO_ERROR
	// to stop a request body it needs no more) leaves it complete.
	if s.Incomplete || s.Reset != nil && !rs.Ended || s.Refused {
		tx.Flags |= FlagIncomplete
	}
	if s.Truncated {
		tx.Flags |= FlagHeaderTooLarge
	}
	// The body's bytes are counted held (tlsH2Reserve): the transaction
	// takes them whatever else it has, for emitTransaction to release.
	tx.BodyCut = rs.BodyCut
	st.setBody(rs.Body)
	if rs.BodyLimited {
		c.t.stats.BodiesCut++
	}
	first := rs.FinalHeadersAt
	if first == 0 {
		first = rs.StartAt
	}
	if first == 0 {
		c.emit(st) // no response: flagged so
		return
	}
	st.set(tfRespStarted, true)
	tx.Status = int32(max(rs.Status, 0))
	tx.setResp(rs.ContentType, rs.ContentEncoding)
	st.setLocation(rs.Location)
	tx.ResponseFirst = first
	tx.ResponseLast = max(rs.EndAt, first)
	tx.ResponseBytes = rs.HeaderBytes + rs.BodyBytes
	tx.BodyBytes = rs.BodyBytes
	st.reqEndOff, st.respEndOff = p.h2End[0], c.h2ResponseEnd(rs)
	c.completeResponse(st)
}

// h2ResponseEnd is the server stream offset past response rs: the record
// that carried its END_STREAM, not the latest record fed (a RST_STREAM
// after it, lost and resent, was judged as the response's own bytes: a
// beacon 204 ms long under 2% loss on the HTTPS testbed, 80 ms on the
// client's wire). The latest record when rs's is no longer remembered.
func (c *conn) h2ResponseEnd(rs *http2wire.Response) int64 {
	p := c.plainOf()
	if rs.Ended {
		if end, ok := p.spans[1].endOf(rs.EndAt); ok {
			return end
		}
	}
	return p.h2End[1]
}

// tlsPlainSize is a decrypted connection's own state (its session's keys
// are a few hundred bytes more, rounded in).
var tlsPlainSize = int(unsafe.Sizeof(tlsPlain{})) + 512

// tlsPlainHeld is what a decrypted connection holds beyond its record
// buffers, for the memory count.
func (c *conn) tlsPlainHeld() int {
	p := c.plainOf()
	if p == nil {
		return 0
	}
	if p.h2 == nil {
		return tlsPlainSize
	}
	return tlsPlainSize + p.h2.OpenStreams()*h2StreamMemory
}

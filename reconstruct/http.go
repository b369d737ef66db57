package reconstruct

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/rtmon/rtmon/reconstruct/http1"
)

// requestEvents turns the client stream's parser events into transactions.
// It is its conn under another method set, so the parser's handlers take
// no room of their own.
type requestEvents conn

func (h *requestEvents) MessageStart(m *http1.Message) {
	c := (*conn)(h)
	st := c.newTx()
	start, fallback := c.wireStart(true, m.Start)
	var ackOrCopy bool
	st.tx.RequestFirst, st.tx.upLost, ackOrCopy = c.clientTimeAt(start, fallback)
	st.set(tfUpAckOrCopy, ackOrCopy)
	st.sent = &sentNotes{timer: c.timer, rearmAt: c.srvAckNewAt, prev: c.lastResp}
	if l := c.loss; l != nil && start < l.aheadOff && l.aheadAt < st.tx.RequestFirst {
		// A pure ACK had already shown these bytes sent: the copy now
		// here is a retransmission.
		st.tx.upLost, st.more().sentBy = max(st.tx.upLost, 1), l.aheadAt
	}
	st.reqStartOff = start
	// The response parser is resumed first: it may be parked in the
	// request addPending would give up.
	c.respP()
	c.addPending(st)
	c.respP().PushRequestMethod(m.Method)
}

func (h *requestEvents) HeadersDone(m *http1.Message) {
	c := (*conn)(h)
	st := c.currentRequest()
	if st == nil {
		return
	}
	v := st.tx.reqVals()
	v[reqMethod], v[reqURL] = m.Method, c.t.redact(m.URL)
	if m.Host != "" || c.tls == nil { // a decrypted request without Host keeps the SNI name
		v[reqHost] = m.Host
	}
	v[reqReferer], v[reqUserAgent] = c.t.redact(m.Referer), m.UserAgent
	v[reqAccept], v[reqFetchDest] = m.Accept, m.SecFetchDest
	st.tx.setReq(v)
	if m.HeaderTooLarge {
		st.tx.Flags |= FlagHeaderTooLarge
	}
}

func (h *requestEvents) MessageEnd(m *http1.Message) {
	c := (*conn)(h)
	st := c.currentRequest()
	if st == nil {
		return
	}
	st.set(tfReqDone, true)
	st.tx.RequestLast = c.curTS
	st.reqEndOff = c.wireOff(true, m.End, true)
	st.tx.RequestBytes = m.End - m.Start // the HTTP message, decrypted or not
	c.reqAck.end, c.reqAck.at = st.reqEndOff, c.curTS
	if m.Incomplete {
		st.tx.Flags |= FlagIncomplete
	}
}

func (h *requestEvents) Desync(off int64, reason string) {
	c := (*conn)(h)
	c.t.stats.ParseDesyncs++
	if st := c.currentRequest(); st != nil {
		st.tx.Flags |= FlagParseError
		// The request's end is unknown; what was seen so far is all there is.
		st.set(tfReqDone, true)
		st.tx.RequestLast = c.curTS
		st.reqEndOff = c.wireOff(true, off, true)
	}
}

// responseEvents pairs the server stream's messages with requests; like
// requestEvents, it is its conn.
type responseEvents conn

func (h *responseEvents) MessageStart(m *http1.Message) {
	c := (*conn)(h)
	if c.decrypting() {
		// Parsed as its record completed: the client has the first byte
		// then, not before (see tlsResponseRecord).
		c.respFirstByte = c.curTS
		return
	}
	c.respFirstByte = c.s2cLog.timeAt(c.wireStart(false, m.Start))
}

func (h *responseEvents) HeadersDone(m *http1.Message) {
	c := (*conn)(h)
	if m.Interim {
		if m.Status == 100 && len(c.pending()) > 0 {
			c.pending()[0].tx.Flags |= FlagContinued // the request it answers (takeRequest)
		}
		return
	}
	if m.Status == 101 || m.Method == "CONNECT" && m.Status/100 == 2 {
		// The response parser went opaque by itself; the client's side of a
		// tunnel or upgraded protocol is no longer HTTP either.
		c.reqP().SwitchToOpaque()
	}
	st := c.takeRequest()
	st.set(tfRespStarted, true)
	st.respStartOff = c.wireOff(false, m.Start, false)
	st.tx.ResponseFirst = c.respFirstByte
	st.tx.Status = int32(m.Status)
	st.tx.setResp(m.ContentType, m.ContentEncoding)
	st.setLocation(m.Location)
	if m.HeaderTooLarge {
		st.tx.Flags |= FlagHeaderTooLarge
	}
	c.resp = st
	m.WantBody = c.t.cfg.MaxBodyBytes > 0 && m.Status/100 == 2 && pageBody(m.ContentType)
}

// Body keeps the body of a response asked for in HeadersDone, within the
// per-body and overall bounds.
func (h *responseEvents) Body(m *http1.Message, data []byte) {
	c := (*conn)(h)
	st, t := c.resp, c.t
	if st == nil || st.tx.BodyCut {
		return
	}
	room := min(t.cfg.MaxBodyBytes-len(st.body()), t.cfg.MaxBodyBudget-t.bodyBytes)
	if len(data) > room {
		data = data[:max(room, 0)]
		st.tx.BodyCut = true
		t.stats.BodiesCut++
	}
	st.setBody(appendBody(st.body(), data, m.ContentLength, t.cfg.MaxBodyBytes))
	t.bodyBytes += len(data)
}

// appendBody appends data to body, growing it by doubling (at least 4 KiB)
// but never past the body's Content-Length or the per-body bound. append's
// own growth is 1.25x for large slices: a 200 KB page arriving in 1,448-byte
// segments was copied about five times over, 15% of all reconstruction.
// The capacity left unused stays within what append would leave (at most
// the length again, or 4 KiB), so the body budget, which counts lengths,
// means what it did.
func appendBody(body, data []byte, contentLength int64, maxBody int) []byte {
	need := len(body) + len(data)
	if need > cap(body) {
		limit := maxBody
		if contentLength > 0 && contentLength < int64(limit) {
			limit = int(contentLength)
		}
		// make, not slices.Grow: append's growth rounds a doubling up again.
		grown := make([]byte, len(body), max(min(max(2*cap(body), 4096), limit), need))
		copy(grown, body)
		body = grown
	}
	return append(body, data...)
}

// BodyGap marks the body cut: bytes of it were never captured.
func (h *responseEvents) BodyGap(m *http1.Message, n int64) {
	if st := (*conn)(h).resp; st != nil {
		st.tx.BodyCut = true
	}
}

// pageBody reports whether a response's body names the objects of a page:
// HTML (the page) or CSS (its images and fonts).
func pageBody(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(mt)
	return strings.EqualFold(mt, "text/html") || strings.EqualFold(mt, "application/xhtml+xml") ||
		strings.EqualFold(mt, "text/css")
}

func (h *responseEvents) MessageEnd(m *http1.Message) {
	c := (*conn)(h)
	if m.Interim || c.resp == nil {
		return
	}
	st := c.resp
	st.tx.ResponseLast = c.curTS
	st.respEndOff = c.wireOff(false, m.End, true)
	st.tx.ResponseBytes = m.End - m.Start
	st.tx.BodyBytes = m.BodyLen
	if m.Incomplete {
		st.tx.Flags |= FlagIncomplete
	}
	c.completeResponse(st)
}

func (h *responseEvents) Desync(off int64, reason string) {
	c := (*conn)(h)
	c.t.stats.ParseDesyncs++
	if st := c.resp; st != nil {
		st.tx.Flags |= FlagParseError
		st.tx.ResponseLast = c.curTS
		st.respEndOff = c.wireOff(false, off, true)
		c.completeResponse(st)
	}
}

// Heuristic mode (snap length cut the payload): a request is the client's
// bytes between two server replies, a response the server's bytes until the
// client's next request. Sequence numbers still time every byte exactly; only
// pipelining is lost.

func (c *conn) heuristicClientData(ts, off int64, captured []byte, wireLen int) {
	if c.resp != nil {
		c.endHeuristicResponse()
	}
	st := c.currentRequest()
	if st == nil {
		st = c.newTx()
		st.set(tfHeuristic, true)
		st.tx.RequestFirst = ts
		st.reqStartOff = off
		if method, url, ok := requestLine(captured); ok {
			v := st.tx.reqVals()
			v[reqMethod], v[reqURL] = method, c.t.redact(url)
			st.tx.setReq(v)
		}
		c.addPending(st)
	}
	st.tx.RequestLast = ts
	st.reqEndOff = off + int64(wireLen)
	st.tx.RequestBytes = st.reqEndOff - st.reqStartOff
}

func (c *conn) heuristicServerData(ts, off int64, captured []byte, wireLen int) {
	if st := c.turnResponse(ts, off, off+int64(wireLen), ts); st != nil && c.tls == nil {
		st.tx.Status = int32(statusLine(captured))
		st.tx.Flags |= FlagTruncatedPayload
	}
}

// turnResponse adds the server's bytes up to stream offset end, the last
// of them seen at last, to the response of its turn; when none is being
// sent the turn changed: the request is complete and a response starts
// (first seen at first, at offset off) and is returned.
func (c *conn) turnResponse(first, off, end, last int64) (started *txState) {
	if c.resp == nil {
		if st := c.currentRequest(); st != nil {
			st.set(tfReqDone, true)
		}
		started = c.takeRequest()
		started.set(tfHeuristic|tfRespStarted, true)
		started.tx.ResponseFirst, started.respStartOff = first, off
		c.resp = started
	}
	c.resp.tx.ResponseLast = last
	c.resp.respEndOff = end
	c.resp.tx.ResponseBytes = end - c.resp.respStartOff
	return started
}

func (c *conn) endHeuristicResponse() {
	if c.resp == nil {
		return
	}
	c.completeResponse(c.resp)
}

// requestLine extracts the method and target from a captured request prefix.
func requestLine(b []byte) (method, url string, ok bool) {
	if !http1.LooksLikeRequest(b) {
		return "", "", false
	}
	sp := bytes.IndexByte(b, ' ')
	rest := b[sp+1:]
	end := bytes.IndexAny(rest, " \r\n")
	if end < 0 {
		end = len(rest)
	}
	if end > http1.MaxURLLen {
		end = http1.MaxURLLen
	}
	return string(b[:sp]), string(rest[:end]), true
}

// statusLine extracts the status code from a captured response prefix.
func statusLine(b []byte) int {
	if len(b) < 12 || !bytes.HasPrefix(b, []byte("HTTP/1.")) || b[8] != ' ' {
		return 0
	}
	n, err := strconv.Atoi(string(b[9:12]))
	if err != nil {
		return 0
	}
	return n
}

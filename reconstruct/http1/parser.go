package http1

import (
	"bytes"
	"strings"
	"sync"
)

type state uint8

const (
	stIdle         state = iota // in sync, between messages
	stHunt                      // lost sync: looking for a message start at a line beginning
	stHead                      // collecting a header section
	stBody                      // Content-Length body: p.remain bytes left
	stUntilClose                // close-delimited response body
	stChunkSize                 // chunk-size hex digits
	stChunkExt                  // chunk extensions up to LF
	stChunkSizeLF               // CR seen after chunk size
	stChunkData                 // chunk payload: p.remain bytes left
	stChunkDataEnd              // CRLF after chunk payload
	stChunkDataLF               // CR seen after chunk payload
	stTrailer                   // trailer section after the last chunk
	stOpaque                    // after 101 / CONNECT: not HTTP any more
	stClosed                    // Close was called
)

// Desync reasons.
const (
	ReasonGap            = "bytes missing (gap in capture)"
	ReasonBadRequestLine = "invalid request line"
	ReasonBadStatusLine  = "invalid status line"
	ReasonHeaderTooLarge = "header section exceeds limit"
	ReasonCLConflict     = "conflicting Content-Length values"
	ReasonCLInvalid      = "invalid Content-Length"
	ReasonRequestTE      = "request Transfer-Encoding without final chunked"
	ReasonChunkSize      = "invalid chunk size"
	ReasonChunkOverflow  = "chunk size overflows"
	ReasonChunkLine      = "chunk-size line too long"
	ReasonChunkCRLF      = "missing CRLF after chunk data"
	ReasonTrailerTooBig  = "trailer section exceeds limit"
)

var knownMethods = [...]string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE"}

// Method codes for the FIFO: index into knownMethods plus one; 0 = other.
const (
	mOther   = 0
	mHead    = 2
	mConnect = 8
)

var protos = [10]string{"HTTP/1.0", "HTTP/1.1", "HTTP/1.2", "HTTP/1.3", "HTTP/1.4",
	"HTTP/1.5", "HTTP/1.6", "HTTP/1.7", "HTTP/1.8", "HTTP/1.9"}

// Header buffers are pooled: most connections never need one (headers
// usually arrive in one segment) and idle connections should not pin them.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// Parser parses one direction of one connection. It is not safe for
// concurrent use.
type Parser struct {
	kind Kind
	max  int
	st   state
	next state // state after the current message ends (stIdle or stOpaque)
	off  int64
	msg  Message

	// Header section. While one spans Feed calls its bytes [hdrStart, off)
	// are in hdr; otherwise it is parsed in place from the Feed's data.
	hdr       []byte
	hdrp      *[]byte
	hdrStart  int64
	scan      int         // next index to scan for LF, relative to hdrStart
	lineStart int         // start of the current header line, relative to hdrStart
	prefixOK  bool        // start of the start line looks right
	started   bool        // MessageStart was called for the current message
	tentative bool        // candidate found while hunting (known methods only)
	vals      [nVals]span // extracted values, relative to hdrStart
	fr        framing

	atLineStart bool // hunting: the next byte begins a line

	remain    int64 // body or chunk bytes left
	chunkLine int   // bytes in the current chunk-size line
	digits    int   // hex digits in the current chunk size
	trLen     int   // bytes in the current trailer line
	trCR      bool  // the current trailer line starts with CR
	trTotal   int   // bytes in the trailer section

	methods [MaxPendingMethods]uint8
	mHead   int
	mN      int

	// body receives the current message's body when its handler asked for
	// it (Message.WantBody); nil otherwise.
	body BodyReceiver
}

// NewParser returns a parser for one direction. maxHeaderBytes bounds a
// message's header section (start line through the blank line) and its
// chunked trailers; <= 0 selects DefaultMaxHeaderBytes. A parser holds a
// header buffer (at most maxHeaderBytes, pooled) only while a header
// section spans Feed calls.
func NewParser(kind Kind, maxHeaderBytes int) *Parser {
	return &Parser{kind: kind, max: headerLimit(maxHeaderBytes)}
}

func headerLimit(maxHeaderBytes int) int {
	if maxHeaderBytes <= 0 {
		return DefaultMaxHeaderBytes
	}
	return max(maxHeaderBytes, MinMaxHeaderBytes)
}

// Offset is the stream offset of the next byte the parser expects.
func (p *Parser) Offset() int64 { return p.off }

// PushRequestMethod tells a response parser the method of the next request
// on the connection, in request order; call it at the request's
// MessageStart or HeadersDone, before its response is fed. Responses to
// HEAD have no body, 2xx responses to CONNECT open a tunnel. The FIFO holds
// MaxPendingMethods; further pushes are dropped (their responses then get
// NoRequest). Interim responses do not consume an entry.
func (p *Parser) PushRequestMethod(method string) {
	if p.mN == len(p.methods) {
		return
	}
	var c uint8 = mOther
	for i, m := range knownMethods {
		if m == method {
			c = uint8(i + 1)
			break
		}
	}
	p.methods[(p.mHead+p.mN)%len(p.methods)] = c
	p.mN++
}

// SwitchToOpaque makes the rest of the stream opaque once the current
// message (if any) ends: used on the request side when the response parser
// reports 101 Switching Protocols or a 2xx answer to CONNECT. A response
// parser does this by itself.
func (p *Parser) SwitchToOpaque() {
	p.next = stOpaque
	switch p.st {
	case stIdle, stHunt:
		p.st = stOpaque
	case stHead:
		if !p.started {
			p.releaseHdr()
			p.st = stOpaque
		}
	}
}

// Feed parses the next bytes of the stream, which continue at Offset().
// Events are delivered to h before Feed returns.
func (p *Parser) Feed(data []byte, h Handler) {
	for len(data) > 0 {
		n := p.step(data, h)
		data = data[n:]
	}
}

// Gap reports that n bytes at Offset() were never captured. Inside a
// Content-Length body, a chunk's payload or a close-delimited body the
// message just advances (Message.Hole counts the bytes) and a gap that ends
// exactly at the message's end keeps sync; anywhere else the current
// message ends Incomplete at the gap's start, Desync is reported and the
// parser resyncs after the gap. A gap between messages also reports Desync:
// whole messages may have been lost in it.
func (p *Parser) Gap(n int64, h Handler) {
	for n > 0 {
		switch p.st {
		case stIdle:
			h.Desync(p.off, ReasonGap)
			p.hunt(true)
		case stHunt:
			p.atLineStart = true
			p.off += n
			return
		case stHead:
			if p.started {
				p.values(p.hdr) // what the complete lines gave
				p.msg.Incomplete = true
				p.end(h)
			}
			if !p.tentative || p.started {
				h.Desync(p.off, ReasonGap)
			}
			p.releaseHdr()
			p.hunt(true)
		case stBody:
			k := min(n, p.remain)
			p.bodyGap(k)
			p.remain -= k
			p.msg.Hole += k
			p.off += k
			n -= k
			if p.remain == 0 {
				p.end(h)
			}
		case stChunkData:
			k := min(n, p.remain)
			p.bodyGap(k)
			p.remain -= k
			p.msg.Hole += k
			p.msg.BodyLen += k
			p.off += k
			n -= k
			if p.remain == 0 {
				p.st = stChunkDataEnd
			}
		case stChunkSize, stChunkExt, stChunkSizeLF, stChunkDataEnd, stChunkDataLF, stTrailer:
			p.lose(h, ReasonGap)
			p.atLineStart = true
		case stUntilClose:
			p.bodyGap(n)
			p.msg.Hole += n
			p.off += n
			return
		default: // stOpaque, stClosed
			p.off += n
			return
		}
	}
}

// Close reports the end of the direction (FIN or RST). It ends a
// close-delimited body normally; any other unfinished message ends with
// Incomplete set. Later Feed and Gap calls only advance the offset.
func (p *Parser) Close(h Handler) {
	switch p.st {
	case stUntilClose:
		p.end(h)
	case stHead:
		if p.started {
			p.values(p.hdr)
			p.msg.Incomplete = true
			p.end(h)
		}
	case stBody, stChunkSize, stChunkExt, stChunkSizeLF, stChunkData, stChunkDataEnd, stChunkDataLF, stTrailer:
		p.msg.Incomplete = true
		p.end(h)
	}
	p.releaseHdr()
	p.st = stClosed
}

// step consumes a prefix of data (possibly empty if it changed state) and
// keeps p.off at the offset of the first unconsumed byte.
func (p *Parser) step(data []byte, h Handler) int {
	switch p.st {
	case stIdle:
		// RFC 9112 2.2: empty lines before a message are ignored.
		i := 0
		for i < len(data) && (data[i] == '\r' || data[i] == '\n') {
			i++
		}
		p.off += int64(i)
		if i < len(data) {
			p.beginHead(false)
		}
		return i
	case stHunt:
		return p.huntStep(data)
	case stHead:
		return p.headStep(data, h)
	case stBody:
		n := min(int64(len(data)), p.remain)
		p.bodyData(data[:n])
		p.remain -= n
		p.off += n
		if p.remain == 0 {
			p.end(h)
		}
		return int(n)
	case stChunkSize, stChunkExt, stChunkSizeLF, stChunkData, stChunkDataEnd, stChunkDataLF, stTrailer:
		return p.chunkStep(data, h)
	case stUntilClose:
		p.bodyData(data)
		p.off += int64(len(data))
		return len(data)
	default: // stOpaque, stClosed
		p.off += int64(len(data))
		return len(data)
	}
}

// hunt enters the resync state; atLineStart says whether the next byte may
// begin a message (true after a gap or a blank line).
func (p *Parser) hunt(atLineStart bool) {
	p.started = false
	if p.next == stOpaque {
		p.st = stOpaque
		return
	}
	p.st = stHunt
	p.atLineStart = atLineStart
}

func (p *Parser) huntStep(data []byte) int {
	i := 0
	for {
		if !p.atLineStart {
			j := bytes.IndexByte(data[i:], '\n')
			if j < 0 {
				p.off += int64(len(data))
				return len(data)
			}
			i += j + 1
			p.atLineStart = true
		}
		if i == len(data) {
			p.off += int64(i)
			return i
		}
		if p.candidateByte(data[i]) {
			p.off += int64(i)
			p.beginHead(true)
			return i
		}
		p.atLineStart = false
	}
}

func (p *Parser) candidateByte(c byte) bool {
	if p.kind == Response {
		return c == 'H'
	}
	switch c {
	case 'G', 'H', 'P', 'D', 'O', 'C', 'T':
		return true
	}
	return false
}

func (p *Parser) beginHead(tentative bool) {
	p.st = stHead
	p.hdrStart = p.off
	p.scan, p.lineStart = 0, 0
	p.prefixOK, p.started, p.tentative = false, false, tentative
	p.vals, p.fr = [nVals]span{}, framing{}
}

func (p *Parser) releaseHdr() {
	if p.hdrp != nil {
		*p.hdrp = p.hdr[:0]
		bufPool.Put(p.hdrp)
		p.hdrp, p.hdr = nil, nil
	}
}

type headResult uint8

const (
	hsMore headResult = iota
	hsDone
	hsFail
)

// headStep advances a header section. The section's bytes are hdr followed
// by data; when hdr is empty they are parsed in place.
func (p *Parser) headStep(data []byte, h Handler) int {
	if len(p.hdr) == 0 {
		buf := data
		if len(buf) > p.max {
			buf = buf[:p.max]
		}
		r, end := p.scanHead(buf, h)
		switch r {
		case hsDone:
			p.headersDone(buf[:end], h)
			return end
		case hsFail:
			p.failHead(h)
			p.off = p.hdrStart + 1
			return 1
		}
		if len(buf) == p.max {
			if p.overLimit(buf, h) {
				return len(buf)
			}
			p.off = p.hdrStart + 1
			return 1
		}
		if p.hdrp == nil {
			p.hdrp = bufPool.Get().(*[]byte)
			p.hdr = (*p.hdrp)[:0]
		}
		p.hdr = append(p.hdr, buf...)
		p.off += int64(len(buf))
		return len(buf)
	}
	old := len(p.hdr)
	k := min(len(data), p.max-old)
	p.hdr = append(p.hdr, data[:k]...)
	r, end := p.scanHead(p.hdr, h)
	switch r {
	case hsDone:
		p.headersDone(p.hdr[:end], h)
		return end - old
	case hsFail:
		p.failHead(h)
		p.replayHdr(h)
		return k
	}
	if len(p.hdr) == p.max {
		if !p.overLimit(p.hdr, h) {
			p.replayHdr(h)
		}
		return k
	}
	p.off += int64(k)
	return k
}

// failHead handles a start line that turned out invalid: report it if we
// were in sync, then hunt from the byte after the candidate's first byte.
func (p *Parser) failHead(h Handler) {
	if !p.tentative {
		if p.kind == Request {
			h.Desync(p.hdrStart, ReasonBadRequestLine)
		} else {
			h.Desync(p.hdrStart, ReasonBadStatusLine)
		}
	}
	p.hunt(false)
}

// replayHdr re-parses the buffered bytes after a failed candidate's first
// byte: a real message start may hide inside them. The bytes are no more
// than the header limit and each is replayed at most once per failed
// candidate, so hunting stays linear.
func (p *Parser) replayHdr(h Handler) {
	buf, bp := p.hdr, p.hdrp
	p.hdr, p.hdrp = nil, nil
	p.off = p.hdrStart + 1
	p.Feed(buf[1:], h)
	*bp = buf[:0]
	bufPool.Put(bp)
}

// overLimit handles a header section that reached the limit without its
// blank line; buf holds the first p.max bytes of it. It returns false for
// an unconfirmed candidate, which the caller must retry from its second
// byte; else it reports the message as HeaderTooLarge and consumes buf.
func (p *Parser) overLimit(buf []byte, h Handler) bool {
	if !p.started && p.tentative {
		p.hunt(false)
		return false
	}
	if !p.started {
		// The start line alone is longer than the limit: report what we have.
		p.startMessage(buf, h)
		if p.kind == Request {
			p.urlSpan(buf)
		}
	}
	p.values(buf)
	p.msg.HeaderTooLarge = true
	p.msg.Incomplete = true
	p.off = p.hdrStart + int64(len(buf))
	p.end(h)
	h.Desync(p.off, ReasonHeaderTooLarge)
	p.releaseHdr()
	p.hunt(false)
	return true
}

// scanHead looks for the end of the header section in buf (the section's
// bytes so far), validating the start line when it completes.
func (p *Parser) scanHead(buf []byte, h Handler) (headResult, int) {
	if !p.prefixOK {
		switch p.checkPrefix(buf) {
		case hsFail:
			return hsFail, 0
		case hsMore:
			return hsMore, 0
		}
		p.prefixOK = true
	}
	for {
		j := bytes.IndexByte(buf[p.scan:], '\n')
		if j < 0 {
			p.scan = len(buf)
			return hsMore, 0
		}
		nl := p.scan + j
		if !p.started {
			if !p.validStartLine(buf[:nl]) {
				return hsFail, 0
			}
			p.startMessage(buf[:nl], h)
			if p.kind == Request {
				p.urlSpan(buf[:nl])
			}
		} else if nl == p.lineStart || (nl == p.lineStart+1 && buf[p.lineStart] == '\r') {
			return hsDone, nl + 1
		} else {
			p.headerLine(buf, p.lineStart, nl)
		}
		p.lineStart = nl + 1
		p.scan = nl + 1
	}
}

// checkPrefix decides early whether buf can start a message, so garbage is
// rejected without buffering it: "HTTP/1.d ddd" for responses, a method
// token and SP for requests (only known methods while hunting).
func (p *Parser) checkPrefix(buf []byte) headResult {
	if p.kind == Response {
		const pat = "HTTP/1.0 000"
		for i := 0; i < len(pat); i++ {
			if i == len(buf) {
				return hsMore
			}
			c := buf[i]
			switch {
			case i < 7:
				if c != pat[i] {
					return hsFail
				}
			case i == 8:
				if c != ' ' {
					return hsFail
				}
			default:
				if c < '0' || c > '9' {
					return hsFail
				}
			}
		}
		return hsDone
	}
	if p.tentative {
		more := false
		for _, m := range knownMethods {
			n := min(len(buf), len(m)+1)
			if string(buf[:min(n, len(m))]) != m[:min(n, len(m))] {
				continue
			}
			if n <= len(m) {
				more = true
				continue
			}
			if buf[len(m)] == ' ' {
				return hsDone
			}
		}
		if more {
			return hsMore
		}
		return hsFail
	}
	for i := 0; i < 33; i++ {
		if i == len(buf) {
			return hsMore
		}
		if buf[i] == ' ' && i > 0 {
			return hsDone
		}
		if !isTchar(buf[i]) {
			return hsFail
		}
	}
	return hsFail
}

func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

func trimCR(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return b[:len(b)-1]
	}
	return b
}

// validStartLine checks a complete start line (without its LF).
func (p *Parser) validStartLine(line []byte) bool {
	line = trimCR(line)
	if p.kind == Response {
		// Prefix already checked "HTTP/1.d ddd"; a reason phrase is optional.
		return (len(line) == 12 || line[12] == ' ') && line[9] != '0'
	}
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || len(line) < sp+1+1+9 {
		return false
	}
	v := line[len(line)-9:]
	if string(v[:8]) != " HTTP/1." || v[8] < '0' || v[8] > '9' {
		return false
	}
	return len(bytes.Trim(line[sp+1:len(line)-9], " ")) > 0
}

// startMessage resets the message from its (possibly cut) start line and
// calls MessageStart.
func (p *Parser) startMessage(line []byte, h Handler) {
	line = trimCR(line)
	p.msg = Message{Kind: p.kind, Start: p.hdrStart, ContentLength: -1}
	m := &p.msg
	p.started = true
	p.tentative = false
	if p.kind == Response {
		if line[7] >= '0' && line[7] <= '9' {
			m.Proto = protos[line[7]-'0']
		}
		m.Status = int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
		m.Interim = m.Status >= 100 && m.Status < 200 && m.Status != 101
		if !m.Interim {
			if p.mN == 0 {
				m.NoRequest = true
			} else {
				c := p.methods[p.mHead]
				p.mHead = (p.mHead + 1) % len(p.methods)
				p.mN--
				if c != mOther {
					m.Method = knownMethods[c-1]
				}
			}
		}
	} else {
		sp := bytes.IndexByte(line, ' ')
		if sp < 0 {
			sp = len(line)
		}
		m.Method = internMethod(line[:sp])
		if n := len(line); n >= 9 && string(line[n-9:n-1]) == " HTTP/1." && line[n-1] >= '0' && line[n-1] <= '9' {
			m.Proto = protos[line[n-1]-'0']
		}
	}
	h.MessageStart(m)
}

func internMethod(b []byte) string {
	for _, m := range knownMethods {
		if string(b) == m {
			return m
		}
	}
	return string(b)
}

// framing collects the headers that decide body length and persistence.
type framing struct {
	te, chunked, clSeen, clBad, connClose, connKeep bool
	cl                                              int64
}

type span struct{ a, b int }

// Indexes into the value spans.
const (
	vURL = iota
	vHost
	vReferer
	vUA
	vAccept
	vCT
	vCE
	vLocation
	vFetchDest
	vFetchMode
	nVals
)

var valLimits = [nVals]int{MaxURLLen, MaxValueLen, MaxValueLen, MaxValueLen, MaxValueLen, MaxValueLen,
	MaxValueLen, MaxURLLen, maxFetchValueLen, maxFetchValueLen}

// maxFetchValueLen bounds Sec-Fetch-Dest and -Mode, whose values are short
// tokens ("document", "navigate").
const maxFetchValueLen = 32

// urlSpan records the request target of a start line (possibly cut by the
// header limit), relative to the message start.
func (p *Parser) urlSpan(first []byte) {
	first = trimCR(first)
	sp := bytes.IndexByte(first, ' ')
	if sp < 0 {
		return
	}
	a, b := sp+1, len(first)
	if n := len(first); n >= sp+10 && string(first[n-9:n-1]) == " HTTP/1." {
		b = n - 9
	}
	for a < b && first[a] == ' ' {
		a++
	}
	for b > a && first[b-1] == ' ' {
		b--
	}
	p.vals[vURL] = span{a, b}
}

// headerLine applies the header line buf[ls:nl] (LF excluded) as soon as
// scanHead finds it, so header bytes are scanned once.
func (p *Parser) headerLine(buf []byte, ls, nl int) {
	m, fr, vals := &p.msg, &p.fr, &p.vals
	line := trimCR(buf[ls:nl])
	c := bytes.IndexByte(line, ':')
	if c <= 0 || line[0] == ' ' || line[0] == '\t' {
		return // not a header (or obsolete line folding): ignore
	}
	name := trimOWS(line[:c])
	va, vb := ls+c+1, ls+len(line)
	for va < vb && (buf[va] == ' ' || buf[va] == '\t') {
		va++
	}
	for vb > va && (buf[vb-1] == ' ' || buf[vb-1] == '\t') {
		vb--
	}
	v := buf[va:vb]
	switch len(name) {
	case 4:
		if eqFold(name, "host") {
			setOnce(&vals[vHost], va, vb)
		}
	case 6:
		if eqFold(name, "accept") {
			setOnce(&vals[vAccept], va, vb)
		} else if eqFold(name, "expect") && eqFold(v, "100-continue") {
			m.ExpectContinue = true
		}
	case 7:
		if eqFold(name, "referer") {
			setOnce(&vals[vReferer], va, vb)
		}
	case 8:
		if eqFold(name, "location") {
			setOnce(&vals[vLocation], va, vb)
		}
	case 10:
		if eqFold(name, "user-agent") {
			setOnce(&vals[vUA], va, vb)
		} else if eqFold(name, "connection") {
			forTokens(v, func(t []byte) {
				if eqFold(t, "close") {
					fr.connClose = true
				} else if eqFold(t, "keep-alive") {
					fr.connKeep = true
				}
			})
		}
	case 12:
		if eqFold(name, "content-type") {
			setOnce(&vals[vCT], va, vb)
		}
	case 14:
		switch {
		case eqFold(name, "content-length"):
			fr.addCL(v)
		case eqFold(name, "sec-fetch-dest"):
			setOnce(&vals[vFetchDest], va, vb)
		case eqFold(name, "sec-fetch-mode"):
			setOnce(&vals[vFetchMode], va, vb)
		}
	case 16:
		if eqFold(name, "content-encoding") {
			setOnce(&vals[vCE], va, vb)
		}
	case 17:
		if eqFold(name, "transfer-encoding") {
			fr.te = true
			var last []byte
			forTokens(v, func(t []byte) { last = t })
			fr.chunked = eqFold(last, "chunked")
		}
	}
}

// values builds the extracted strings from the header section's bytes
// (buf starts at the message start). All of them share one allocation.
func (p *Parser) values(buf []byte) {
	m, vals := &p.msg, &p.vals
	total := 0
	for i := range vals {
		if n := vals[i].b - vals[i].a; n > valLimits[i] {
			vals[i].b = vals[i].a + valLimits[i]
			m.Truncated = true
		}
		total += vals[i].b - vals[i].a
	}
	if total == 0 {
		return
	}
	var sb strings.Builder
	sb.Grow(total)
	for _, s := range vals {
		sb.Write(buf[s.a:s.b])
	}
	all := sb.String()
	pos := 0
	dst := [nVals]*string{&m.URL, &m.Host, &m.Referer, &m.UserAgent, &m.Accept, &m.ContentType,
		&m.ContentEncoding, &m.Location, &m.SecFetchDest, &m.SecFetchMode}
	for i, s := range vals {
		n := s.b - s.a
		*dst[i] = all[pos : pos+n]
		pos += n
	}
}

func setOnce(s *span, a, b int) {
	if s.a == 0 && s.b == 0 {
		*s = span{a, b}
	}
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// forTokens calls f for each trimmed, non-empty comma-separated element.
func forTokens(v []byte, f func([]byte)) {
	for len(v) > 0 {
		var t []byte
		if c := bytes.IndexByte(v, ','); c >= 0 {
			t, v = v[:c], v[c+1:]
		} else {
			t, v = v, nil
		}
		t = bytes.Trim(t, " \t")
		if len(t) > 0 {
			f(t)
		}
	}
}

// addCL records a Content-Length header. A list of equal values ("5, 5")
// is accepted (RFC 9110 8.6); differing or non-numeric values are not.
func (fr *framing) addCL(v []byte) {
	seen := false
	forTokens(v, func(t []byte) {
		seen = true
		if len(t) > 18 {
			fr.clBad = true
			return
		}
		var n int64
		for _, c := range t {
			if c < '0' || c > '9' {
				fr.clBad = true
				return
			}
			n = n*10 + int64(c-'0')
		}
		if fr.clSeen && n != fr.cl {
			fr.clBad = true
			return
		}
		fr.clSeen, fr.cl = true, n
	})
	if !seen {
		fr.clBad = true
	}
}

// eqFold compares b with lower-case ASCII s, ignoring case.
func eqFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// headersDone finishes a header section (buf is all of it) and chooses the
// body framing per RFC 9112 section 6.3.
func (p *Parser) headersDone(buf []byte, h Handler) {
	m := &p.msg
	p.values(buf)
	fr := &p.fr
	m.HeaderEnd = p.hdrStart + int64(len(buf))
	p.off = m.HeaderEnd
	p.releaseHdr()
	if fr.clSeen && !fr.clBad {
		m.ContentLength = fr.cl
	}
	if m.Proto == "HTTP/1.0" {
		m.KeepAlive = fr.connKeep && !fr.connClose
	} else {
		m.KeepAlive = !fr.connClose
	}
	if p.kind == Response {
		switch {
		case m.Interim:
			m.KeepAlive = true
			h.HeadersDone(m)
			p.end(h)
			return
		case m.Status == 101 || (m.Method == "CONNECT" && m.Status/100 == 2):
			// The connection now carries another protocol or a tunnel.
			m.KeepAlive = false
			p.next = stOpaque
			h.HeadersDone(m)
			p.end(h)
			return
		case m.Method == "HEAD" || m.Status == 204 || m.Status == 304:
			h.HeadersDone(m)
			p.end(h)
			return
		}
	}
	switch {
	case fr.te && fr.chunked:
		m.Chunked = true
		if fr.clSeen {
			m.KeepAlive = false // RFC 9112 6.3: both present, close after
		}
		p.headersDoneWithBody(h)
		p.startChunk()
		p.st = stChunkSize
		return
	case fr.te && p.kind == Response:
		m.CloseDelimited = true
		m.KeepAlive = false
		p.headersDoneWithBody(h)
		p.st = stUntilClose
		return
	case fr.te:
		h.HeadersDone(m)
		p.lose(h, ReasonRequestTE)
		p.atLineStart = true
		return
	case fr.clBad:
		h.HeadersDone(m)
		if fr.clSeen {
			p.lose(h, ReasonCLConflict)
		} else {
			p.lose(h, ReasonCLInvalid)
		}
		p.atLineStart = true
		return
	case fr.clSeen:
		p.headersDoneWithBody(h)
		p.remain = fr.cl
		if p.remain == 0 {
			p.end(h)
		} else {
			p.st = stBody
		}
		return
	case p.kind == Response:
		m.CloseDelimited = true
		m.KeepAlive = false
		p.headersDoneWithBody(h)
		p.st = stUntilClose
		return
	}
	h.HeadersDone(m) // a request without a body
	p.end(h)
}

func (p *Parser) startChunk() {
	p.remain, p.digits, p.chunkLine = 0, 0, 0
}

// end finishes the current message at p.off.
func (p *Parser) end(h Handler) {
	m := &p.msg
	m.End = p.off
	if m.HeaderEnd > 0 {
		m.BodyWire = m.End - m.HeaderEnd
		if !m.Chunked {
			m.BodyLen = m.BodyWire
		}
	}
	p.started = false
	p.st = p.next
	p.body = nil
	h.MessageEnd(m)
}

// lose ends the current message as Incomplete at p.off, reports a desync
// there and starts hunting.
func (p *Parser) lose(h Handler, reason string) {
	p.msg.Incomplete = true
	p.end(h)
	h.Desync(p.off, reason)
	p.releaseHdr()
	p.hunt(false)
}

func unhex(c byte) (int64, bool) {
	switch {
	case c >= '0' && c <= '9':
		return int64(c - '0'), true
	case c >= 'a' && c <= 'f':
		return int64(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return int64(c-'A') + 10, true
	}
	return 0, false
}

// chunkStep parses chunked framing byte by byte and skips chunk payloads
// by arithmetic. It returns when the message ends or sync is lost.
func (p *Parser) chunkStep(data []byte, h Handler) int {
	base := p.off
	i := 0
	fail := func(reason string) int {
		p.off = base + int64(i)
		p.lose(h, reason)
		return i
	}
	for i < len(data) {
		switch p.st {
		case stChunkData:
			n := min(int64(len(data)-i), p.remain)
			p.bodyData(data[i : i+int(n)])
			i += int(n)
			p.remain -= n
			p.msg.BodyLen += n
			if p.remain == 0 {
				p.st = stChunkDataEnd
			}
		case stChunkSize:
			c := data[i]
			if v, ok := unhex(c); ok {
				if p.remain >= 1<<59 {
					return fail(ReasonChunkOverflow)
				}
				p.remain = p.remain<<4 | v
				p.digits++
				p.chunkLine++
				if p.chunkLine > maxChunkLine {
					return fail(ReasonChunkLine)
				}
				i++
				continue
			}
			if p.digits == 0 {
				return fail(ReasonChunkSize)
			}
			switch c {
			case ';', ' ', '\t':
				p.st = stChunkExt
			case '\r':
				p.st = stChunkSizeLF
			case '\n':
				p.chunkLineDone()
			default:
				return fail(ReasonChunkSize)
			}
			p.chunkLine++
			i++
		case stChunkExt:
			j := bytes.IndexByte(data[i:], '\n')
			if j < 0 {
				j = len(data) - i
			}
			p.chunkLine += j
			if p.chunkLine > maxChunkLine {
				return fail(ReasonChunkLine)
			}
			i += j
			if i < len(data) {
				i++ // the LF
				p.chunkLineDone()
			}
		case stChunkSizeLF:
			if data[i] != '\n' {
				return fail(ReasonChunkSize)
			}
			i++
			p.chunkLineDone()
		case stChunkDataEnd, stChunkDataLF:
			switch {
			case data[i] == '\r' && p.st == stChunkDataEnd:
				p.st = stChunkDataLF
			case data[i] == '\n':
				p.startChunk()
				p.st = stChunkSize
			default:
				return fail(ReasonChunkCRLF)
			}
			i++
		case stTrailer:
			j := bytes.IndexByte(data[i:], '\n')
			seg := j
			if j < 0 {
				seg = len(data) - i
			}
			if p.trLen == 0 && seg > 0 && data[i] == '\r' {
				p.trCR = true
			}
			step := seg
			if j >= 0 {
				step++ // the LF
			}
			if p.trTotal+step > p.max {
				// Fail at the first byte past the limit, wherever the Feed
				// boundaries fall, so the events do not depend on segmenting.
				i += p.max - p.trTotal
				return fail(ReasonTrailerTooBig)
			}
			p.trLen += seg
			p.trTotal += step
			i += seg
			if j < 0 {
				continue
			}
			i++
			empty := p.trLen == 0 || (p.trLen == 1 && p.trCR)
			p.trLen, p.trCR = 0, false
			if empty {
				p.off = base + int64(i)
				p.end(h)
				return i
			}
		default:
			p.off = base + int64(i)
			return i
		}
	}
	p.off = base + int64(i)
	return i
}

func (p *Parser) chunkLineDone() {
	if p.remain == 0 {
		p.st = stTrailer
		p.trLen, p.trCR, p.trTotal = 0, false, 0
		return
	}
	p.st = stChunkData
}

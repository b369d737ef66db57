package http1

import (
	"bytes"
	"math"
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
	off    int64
	remain int64 // body or chunk bytes left
	msg    msgState

	// hs is the header section's scratch, held only while the parser is
	// in one (see headState): a parser inside a body, the state a
	// connection waits in while a response streams, does not carry it.
	hs *headState

	budget *HeaderBudget // nil: only max bounds the header buffer

	// int32: the header limit is at most math.MaxInt32 (headerLimit), and
	// the chunk-size line and trailer counts stay within it or
	// maxChunkLine.
	max       int32
	chunkLine int32 // bytes in the current chunk-size line
	trLen     int32 // bytes in the current trailer line
	trTotal   int32 // bytes in the trailer section

	// methods is the request-method FIFO, two 4-bit method codes a byte
	// (see PushRequestMethod): half the bytes of one code a byte.
	methods [MaxPendingMethods / 2]uint8
	mHead   uint8
	mN      uint8

	// The byte-sized fields together, so they take no padding (a parser
	// is held per connection inside a message).
	kind      Kind
	st        state
	next      state // state after the current message ends (stIdle or stOpaque)
	prefixOK  bool  // start of the start line looks right
	started   bool  // MessageStart was called for the current message
	tentative bool  // candidate found while hunting (known methods only)

	atLineStart bool // hunting: the next byte begins a line
	trCR        bool // the current trailer line starts with CR
	// wantBody: the current message's handler asked for its body
	// (Message.WantBody) and receives it (see receiver).
	wantBody bool
}

// headState is what parsing a header section needs besides the message.
// While a section spans Feed calls its bytes [hdrStart, off) are in hdr;
// otherwise it is parsed in place from the Feed's data. A parser takes
// one from headPool as a section begins and hands it back as the section
// ends (releaseHdr).
type headState struct {
	hdr       []byte
	hdrp      *[]byte
	hdrStart  int64
	scan      int         // next index to scan for LF, relative to hdrStart
	lineStart int         // start of the current header line, relative to hdrStart
	vals      [nVals]span // extracted values, relative to hdrStart
	fr        framing
}

var headPool = sync.Pool{New: func() any { return new(headState) }}

// HeaderBudget bounds the header bytes that the parsers sharing it hold
// together while header sections span segments: thousands of connections
// each stopping a few bytes short of their header limit would otherwise
// hold thousands of limits. A header section that meets a spent budget is
// cut as if it had met its parser's limit (Message.HeaderTooLarge). It is
// not safe for concurrent use: one per tracker.
type HeaderBudget struct {
	Max  int
	held int
	// Refused counts header sections cut because the budget was spent.
	Refused uint64
}

// Held is the header bytes the parsers hold now.
func (b *HeaderBudget) Held() int {
	if b == nil {
		return 0
	}
	return b.held
}

func (b *HeaderBudget) free() int {
	if b == nil {
		return math.MaxInt
	}
	return max(b.Max-b.held, 0)
}

// take reserves n bytes if they fit.
func (b *HeaderBudget) take(n int) bool {
	if b == nil {
		return true
	}
	if n > b.Max-b.held {
		b.Refused++
		return false
	}
	b.held += n
	return true
}

func (b *HeaderBudget) give(n int) {
	if b != nil {
		b.held -= n
	}
}

func (b *HeaderBudget) refuse(spent bool) {
	if b != nil && spent {
		b.Refused++
	}
}

// SetBudget makes the parser's header buffer count against b, shared with
// other parsers.
func (p *Parser) SetBudget(b *HeaderBudget) { p.budget = b }

// NewParser returns a parser for one direction. maxHeaderBytes bounds a
// message's header section (start line through the blank line) and its
// chunked trailers; <= 0 selects DefaultMaxHeaderBytes. A parser holds a
// header buffer (at most maxHeaderBytes, pooled) only while a header
// section spans Feed calls.
func NewParser(kind Kind, maxHeaderBytes int) *Parser {
	return &Parser{kind: kind, max: headerLimit(maxHeaderBytes)}
}

// headerLimit is the header limit maxHeaderBytes asks for, at most
// math.MaxInt32 (2 GiB of header, far past any sane limit) so that value
// spans fit an int32.
func headerLimit(maxHeaderBytes int) int32 {
	if maxHeaderBytes <= 0 {
		return DefaultMaxHeaderBytes
	}
	return int32(min(max(maxHeaderBytes, MinMaxHeaderBytes), math.MaxInt32))
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
	if p.mN == MaxPendingMethods {
		return
	}
	var c uint8 = mOther
	for i, m := range knownMethods {
		if m == method {
			c = uint8(i + 1)
			break
		}
	}
	i := (int(p.mHead) + int(p.mN)) % MaxPendingMethods
	p.methods[i/2] |= c << (4 * (i % 2)) // its nibble was cleared when popped
	p.mN++
}

// popMethod takes the oldest method code from the FIFO, which must not
// be empty.
func (p *Parser) popMethod() uint8 {
	i := int(p.mHead)
	c := p.methods[i/2] >> (4 * (i % 2)) & 0xf
	p.methods[i/2] &^= 0xf << (4 * (i % 2))
	p.mHead = uint8((i + 1) % MaxPendingMethods)
	p.mN--
	return c
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
				p.values(p.hs.hdr) // what the complete lines gave
				p.msg.Incomplete = true
				p.end(h)
			}
			if !p.tentative || p.started {
				h.Desync(p.off, ReasonGap)
			}
			p.releaseHdr()
			p.hunt(true)
		case stBody:
			n -= p.holeInBody(n, h)
			if p.remain == 0 {
				p.end(h)
			}
		case stChunkData:
			k := p.holeInBody(n, h)
			p.msg.BodyLen += k
			n -= k
			if p.remain == 0 {
				p.st = stChunkDataEnd
			}
		case stChunkSize, stChunkExt, stChunkSizeLF, stChunkDataEnd, stChunkDataLF, stTrailer:
			p.lose(h, ReasonGap)
			p.atLineStart = true
		case stUntilClose:
			p.bodyGap(n, h)
			p.msg.Hole += n
			p.off += n
			return
		default: // stOpaque, stClosed
			p.off += n
			return
		}
	}
}

// holeInBody advances over the part of an n-byte gap that falls in the
// body bytes still expected (p.remain) and returns its length.
func (p *Parser) holeInBody(n int64, h Handler) int64 {
	k := min(n, p.remain)
	p.bodyGap(k, h)
	p.remain -= k
	p.msg.Hole += k
	p.off += k
	return k
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
			p.values(p.hs.hdr)
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
		p.bodyData(data[:n], h)
		p.remain -= n
		p.off += n
		if p.remain == 0 {
			p.end(h)
		}
		return int(n)
	case stChunkSize, stChunkExt, stChunkSizeLF, stChunkData, stChunkDataEnd, stChunkDataLF, stTrailer:
		return p.chunkStep(data, h)
	case stUntilClose:
		p.bodyData(data, h)
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
	if p.hs == nil {
		p.hs = headPool.Get().(*headState)
	}
	hs := p.hs
	hs.hdrStart = p.off
	hs.scan, hs.lineStart = 0, 0
	p.prefixOK, p.started, p.tentative = false, false, tentative
	hs.vals, hs.fr = [nVals]span{}, framing{}
}

// releaseHdr hands back the header section's buffer and scratch: the
// parser is leaving the section.
func (p *Parser) releaseHdr() {
	hs := p.hs
	if hs == nil {
		return
	}
	if hs.hdrp != nil {
		p.budget.give(len(hs.hdr))
		*hs.hdrp = hs.hdr[:0]
		bufPool.Put(hs.hdrp)
	}
	*hs = headState{}
	headPool.Put(hs)
	p.hs = nil
}

// end finishes the current message at p.off.
func (p *Parser) end(h Handler) {
	m := &p.msg
	m.End = p.off
	if m.HeaderEnd > 0 && !m.Chunked {
		m.BodyLen = m.bodyWire()
	}
	p.started = false
	p.st = p.next
	p.wantBody = false
	p.messageEnd(h)
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

package http1

import (
	"bytes"
	"strings"
)

// Header values and the message framing they choose.

// framing collects the headers that decide body length and persistence.
type framing struct {
	te, chunked, clSeen, clBad, connClose, connKeep bool
	cl                                              int64
}

// span is a value's bytes [a, b) in a header section, which the header
// limit (at most math.MaxInt32, see headerLimit) bounds: int32 halves the
// spans a held parser carries.
type span struct{ a, b int32 }

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
	p.hs.vals[vURL] = span{int32(a), int32(b)}
}

// headerLine applies the header line buf[ls:nl] (LF excluded) as soon as
// scanHead finds it, so header bytes are scanned once.
func (p *Parser) headerLine(buf []byte, ls, nl int) {
	m, fr, vals := &p.msg, &p.hs.fr, &p.hs.vals
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
	for _, k := range keptHeaders {
		if len(k.name) == len(name) && eqFold(name, k.name) {
			setOnce(&vals[k.v], va, vb)
			return
		}
	}
	v := buf[va:vb]
	switch len(name) {
	case 6:
		if eqFold(name, "expect") && eqFold(v, "100-continue") {
			m.ExpectContinue = true
		}
	case 10:
		if eqFold(name, "connection") {
			forTokens(v, func(t []byte) {
				if eqFold(t, "close") {
					fr.connClose = true
				} else if eqFold(t, "keep-alive") {
					fr.connKeep = true
				}
			})
		}
	case 14:
		if eqFold(name, "content-length") {
			fr.addCL(v)
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

// keptHeaders are the headers whose first value is kept as it is.
var keptHeaders = [...]struct {
	name string
	v    int
}{
	{"host", vHost}, {"accept", vAccept}, {"referer", vReferer}, {"location", vLocation},
	{"user-agent", vUA}, {"content-type", vCT}, {"sec-fetch-dest", vFetchDest},
	{"sec-fetch-mode", vFetchMode}, {"content-encoding", vCE},
}

// values builds the extracted strings from the header section's bytes
// (buf starts at the message start). All of them share one allocation.
func (p *Parser) values(buf []byte) {
	m, vals := &p.msg, &p.hs.vals
	total := 0
	for i := range vals {
		if n := int(vals[i].b - vals[i].a); n > valLimits[i] {
			vals[i].b = vals[i].a + int32(valLimits[i])
			m.Truncated = true
		}
		total += int(vals[i].b - vals[i].a)
	}
	if total == 0 {
		return
	}
	var sb strings.Builder
	sb.Grow(total)
	for _, s := range vals {
		sb.Write(buf[s.a:s.b])
	}
	m.vals = sb.String()
	pos := 0
	for i, s := range vals {
		pos += int(s.b - s.a)
		if i < len(m.ends) {
			m.ends[i] = uint16(pos)
		}
	}
}

func setOnce(s *span, a, b int) {
	if s.a == 0 && s.b == 0 {
		*s = span{int32(a), int32(b)}
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
	fr := p.hs.fr // a copy: the scratch goes back now
	m.HeaderEnd = p.hs.hdrStart + int64(len(buf))
	p.off = m.HeaderEnd
	p.releaseHdr()
	if fr.clSeen && !fr.clBad {
		m.ContentLength = fr.cl
	}
	if m.proto == 1 { // HTTP/1.0
		m.KeepAlive = fr.connKeep && !fr.connClose
	} else {
		m.KeepAlive = !fr.connClose
	}
	if p.kind == Response {
		switch {
		case m.Interim:
			m.KeepAlive = true
			p.headersDoneEvent(h)
			p.end(h)
			return
		case m.Status == 101 || (m.method == "CONNECT" && m.Status/100 == 2):
			// The connection now carries another protocol or a tunnel.
			m.KeepAlive = false
			p.next = stOpaque
			p.headersDoneEvent(h)
			p.end(h)
			return
		case m.method == "HEAD" || m.Status == 204 || m.Status == 304:
			p.headersDoneEvent(h)
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
		p.headersDoneEvent(h)
		p.lose(h, ReasonRequestTE)
		p.atLineStart = true
		return
	case fr.clBad:
		p.headersDoneEvent(h)
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
	p.headersDoneEvent(h) // a request without a body
	p.end(h)
}

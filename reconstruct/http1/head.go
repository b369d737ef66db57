package http1

import "bytes"

// The start line and the header section.

type headResult uint8

const (
	hsMore headResult = iota
	hsDone
	hsFail
)

// headStep advances a header section. The section's bytes are hdr followed
// by data; when hdr is empty they are parsed in place.
func (p *Parser) headStep(data []byte, h Handler) int {
	hs, limit := p.hs, int(p.max)
	if len(hs.hdr) == 0 {
		buf := data
		if len(buf) > limit {
			buf = buf[:limit]
		}
		r, end := p.scanHead(buf, h)
		switch r {
		case hsDone:
			p.headersDone(buf[:end], h)
			return end
		case hsFail:
			p.failHead(h)
			p.off = hs.hdrStart + 1
			return 1
		}
		if len(buf) == limit || !p.budget.take(len(buf)) {
			if p.overLimit(buf, h) {
				return len(buf)
			}
			p.off = hs.hdrStart + 1
			return 1
		}
		if hs.hdrp == nil {
			hs.hdrp = bufPool.Get().(*[]byte)
			hs.hdr = (*hs.hdrp)[:0]
		}
		hs.hdr = append(hs.hdr, buf...)
		p.off += int64(len(buf))
		return len(buf)
	}
	old := len(hs.hdr)
	k := min(len(data), limit-old)
	spent := false // the budget, not this parser's limit, cut k
	if free := p.budget.free(); k > free {
		k, spent = free, true
	}
	p.budget.take(k)
	hs.hdr = append(hs.hdr, data[:k]...)
	r, end := p.scanHead(hs.hdr, h)
	switch r {
	case hsDone:
		p.headersDone(hs.hdr[:end], h)
		return end - old
	case hsFail:
		p.failHead(h)
		p.replayHdr(h)
		return k
	}
	if len(hs.hdr) == limit || spent {
		p.budget.refuse(spent)
		if !p.overLimit(hs.hdr, h) {
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
			h.Desync(p.hs.hdrStart, ReasonBadRequestLine)
		} else {
			h.Desync(p.hs.hdrStart, ReasonBadStatusLine)
		}
	}
	p.hunt(false)
}

// replayHdr re-parses the buffered bytes after a failed candidate's first
// byte: a real message start may hide inside them. The bytes are no more
// than the header limit and each is replayed at most once per failed
// candidate, so hunting stays linear.
func (p *Parser) replayHdr(h Handler) {
	hs := p.hs
	buf, bp := hs.hdr, hs.hdrp
	hs.hdr, hs.hdrp = nil, nil
	p.budget.give(len(buf))
	p.off = hs.hdrStart + 1
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
	p.off = p.hs.hdrStart + int64(len(buf))
	p.end(h)
	h.Desync(p.off, ReasonHeaderTooLarge)
	p.releaseHdr()
	p.hunt(false)
	return true
}

// scanHead looks for the end of the header section in buf (the section's
// bytes so far), validating the start line when it completes.
func (p *Parser) scanHead(buf []byte, h Handler) (headResult, int) {
	hs := p.hs
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
		j := bytes.IndexByte(buf[hs.scan:], '\n')
		if j < 0 {
			hs.scan = len(buf)
			return hsMore, 0
		}
		nl := hs.scan + j
		if !p.started {
			if !p.validStartLine(buf[:nl]) {
				return hsFail, 0
			}
			p.startMessage(buf[:nl], h)
			if p.kind == Request {
				p.urlSpan(buf[:nl])
			}
		} else if nl == hs.lineStart || (nl == hs.lineStart+1 && buf[hs.lineStart] == '\r') {
			return hsDone, nl + 1
		} else {
			p.headerLine(buf, hs.lineStart, nl)
		}
		hs.lineStart = nl + 1
		hs.scan = nl + 1
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
	p.msg = msgState{Kind: p.kind, Start: p.hs.hdrStart, ContentLength: -1}
	m := &p.msg
	p.started = true
	p.tentative = false
	if p.kind == Response {
		if line[7] >= '0' && line[7] <= '9' {
			m.proto = line[7] - '0' + 1
		}
		m.Status = uint16(line[9]-'0')*100 + uint16(line[10]-'0')*10 + uint16(line[11]-'0')
		m.Interim = m.Status >= 100 && m.Status < 200 && m.Status != 101
		if !m.Interim {
			if p.mN == 0 {
				m.NoRequest = true
			} else {
				if c := p.popMethod(); c != mOther {
					m.method = knownMethods[c-1]
				}
			}
		}
	} else {
		sp := bytes.IndexByte(line, ' ')
		if sp < 0 {
			sp = len(line)
		}
		m.method = internMethod(line[:sp])
		if n := len(line); n >= 9 && string(line[n-9:n-1]) == " HTTP/1." && line[n-1] >= '0' && line[n-1] <= '9' {
			m.proto = line[n-1] - '0' + 1
		}
	}
	p.messageStart(h)
}

func internMethod(b []byte) string {
	for _, m := range knownMethods {
		if string(b) == m {
			return m
		}
	}
	return string(b)
}

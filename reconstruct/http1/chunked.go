package http1

import "bytes"

// Chunked transfer coding: sizes, extensions, payload and trailers.

func (p *Parser) startChunk() {
	p.remain, p.digits, p.chunkLine = 0, 0, 0
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

package http1

import "bytes"

// Chunked transfer coding: sizes, extensions, payload and trailers.

func (p *Parser) startChunk() {
	p.remain, p.chunkLine = 0, 0
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
	for i < len(data) {
		var n int
		var lost string
		ended := false
		switch p.st {
		case stChunkData:
			n = p.chunkData(data[i:], h)
		case stChunkSize:
			n, lost = p.chunkSize(data[i:])
		case stChunkExt:
			n, lost = p.chunkExt(data[i:])
		case stChunkSizeLF:
			n, lost = p.chunkSizeLF(data[i])
		case stChunkDataEnd, stChunkDataLF:
			n, lost = p.chunkDataEnd(data[i])
		case stTrailer:
			n, lost, ended = p.trailer(data[i:])
		default:
			p.off = base + int64(i)
			return i
		}
		i += n
		switch {
		case lost != "":
			p.off = base + int64(i)
			p.lose(h, lost)
			return i
		case ended:
			p.off = base + int64(i)
			p.end(h)
			return i
		}
	}
	p.off = base + int64(i)
	return i
}

// The chunk states' steps below each take the bytes from the parser's
// position and return how many they consumed; a loss of sync names its
// reason, the bytes before it consumed.

func (p *Parser) chunkData(data []byte, h Handler) int {
	n := min(int64(len(data)), p.remain)
	p.bodyData(data[:n], h)
	p.remain -= n
	p.msg.BodyLen += n
	if p.remain == 0 {
		p.st = stChunkDataEnd
	}
	return int(n)
}

// chunkSize reads the chunk-size digits in one tight loop (the size line
// is parsed on every chunk), then the byte that ends them.
func (p *Parser) chunkSize(data []byte) (int, string) {
	i := 0
	for ; i < len(data); i++ {
		v, ok := unhex(data[i])
		if !ok {
			break
		}
		if p.remain >= 1<<59 {
			return i, ReasonChunkOverflow
		}
		p.remain = p.remain<<4 | v
		p.chunkLine++
		if p.chunkLine > maxChunkLine {
			return i, ReasonChunkLine
		}
	}
	if i == len(data) {
		return i, ""
	}
	if p.chunkLine == 0 { // no digit: in this state the line holds only digits so far
		return i, ReasonChunkSize
	}
	switch data[i] {
	case ';', ' ', '\t':
		p.st = stChunkExt
	case '\r':
		p.st = stChunkSizeLF
	case '\n':
		p.chunkLineDone()
	default:
		return i, ReasonChunkSize
	}
	p.chunkLine++
	return i + 1, ""
}

func (p *Parser) chunkExt(data []byte) (int, string) {
	j := bytes.IndexByte(data, '\n')
	if j < 0 {
		j = len(data)
	}
	p.chunkLine += int32(min(j, maxChunkLine+1)) // the check below sees the same
	if p.chunkLine > maxChunkLine {
		return 0, ReasonChunkLine
	}
	if j < len(data) {
		p.chunkLineDone()
		return j + 1, "" // with the LF
	}
	return j, ""
}

func (p *Parser) chunkSizeLF(c byte) (int, string) {
	if c != '\n' {
		return 0, ReasonChunkSize
	}
	p.chunkLineDone()
	return 1, ""
}

func (p *Parser) chunkDataEnd(c byte) (int, string) {
	switch {
	case c == '\r' && p.st == stChunkDataEnd:
		p.st = stChunkDataLF
	case c == '\n':
		p.startChunk()
		p.st = stChunkSize
	default:
		return 0, ReasonChunkCRLF
	}
	return 1, ""
}

// trailer consumes trailer lines up to the empty one that ends the message.
func (p *Parser) trailer(data []byte) (n int, lost string, ended bool) {
	j := bytes.IndexByte(data, '\n')
	seg := j
	if j < 0 {
		seg = len(data)
	}
	if p.trLen == 0 && seg > 0 && data[0] == '\r' {
		p.trCR = true
	}
	step := seg
	if j >= 0 {
		step++ // the LF
	}
	if int(p.trTotal)+step > int(p.max) {
		// Fail at the first byte past the limit, wherever the Feed
		// boundaries fall, so the events do not depend on segmenting.
		return int(p.max - p.trTotal), ReasonTrailerTooBig, false
	}
	p.trLen += int32(seg)
	p.trTotal += int32(step)
	if j < 0 {
		return seg, "", false
	}
	empty := p.trLen == 0 || (p.trLen == 1 && p.trCR)
	p.trLen, p.trCR = 0, false
	return seg + 1, "", empty
}

func (p *Parser) chunkLineDone() {
	if p.remain == 0 {
		p.st = stTrailer
		p.trLen, p.trCR, p.trTotal = 0, false, 0
		return
	}
	p.st = stChunkData
}

package http1

import "sync"

// Most open connections sit idle between keep-alive requests. An idle parser
// holds nothing but its stream offset, so the tracker hands it back here and
// takes a fresh one when bytes arrive again: a monitor with a million open
// connections then keeps a million offsets, not a million parsers.
var parserPool = sync.Pool{New: func() any { return new(Parser) }}

// Acquire returns a parser like NewParser's whose next expected byte is at
// stream offset off.
func Acquire(kind Kind, maxHeaderBytes int, off int64) *Parser {
	p := parserPool.Get().(*Parser)
	*p = Parser{kind: kind, max: headerLimit(maxHeaderBytes), off: off}
	return p
}

// Idle reports whether the parser is between messages, in sync, with no
// request methods pending: Release then loses nothing but the offset.
func (p *Parser) Idle() bool {
	return p.st == stIdle && p.next == stIdle && p.mN == 0 && (p.hs == nil || p.hs.hdrp == nil)
}

// Release returns the parser to the pool; the caller must not use it again.
func (p *Parser) Release() {
	p.releaseHdr()
	parserPool.Put(p)
}

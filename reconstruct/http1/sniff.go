package http1

import "bytes"

// LooksLikeRequest reports whether b starts with a standard method token and
// a space: enough to tell a client's first captured bytes from a server's
// when the handshake was not captured. It does not allocate.
func LooksLikeRequest(b []byte) bool {
	sp := bytes.IndexByte(b, ' ')
	if sp <= 0 || sp > len("OPTIONS") {
		return false
	}
	for _, m := range knownMethods {
		if len(m) == sp && string(b[:sp]) == m {
			return true
		}
	}
	return false
}

// Resync makes the parser hunt for the next message start, treating the next
// byte as the start of a line: for a stream picked up mid-connection, where
// offset 0 may be anywhere inside a message.
func (p *Parser) Resync() {
	if p.st == stIdle {
		p.hunt(true)
	}
}

// SegmentStart tells a hunting parser that the next byte begins a TCP
// segment. Senders start messages at segment boundaries far more often than
// anywhere else, so this is where a lost parser looks first; in sync it is a
// no-op.
func (p *Parser) SegmentStart() {
	if p.st == stHunt {
		p.atLineStart = true
	}
}

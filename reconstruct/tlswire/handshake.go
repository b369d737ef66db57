package tlswire

// hsReader reassembles handshake messages from the bodies of a direction's
// cleartext handshake records. Only hello bodies are buffered, and only
// while they span calls; other bodies are counted past.
type hsReader struct {
	lost    bool // bytes at a message boundary were missed: no more messages
	hdr     [handshakeHeaderLen]byte
	hdrN    int
	msg     Handshake // the message being read, once its header is complete
	remain  int       // its body bytes left
	collect bool      // its body is wanted for parsing
	buf     []byte    // the part of a wanted body that arrived in earlier calls
}

func isHello(t HandshakeType) bool { return t == MsgClientHello || t == MsgServerHello }

// hsFeed reads handshake record body bytes.
func (s *Stream) hsFeed(b []byte) {
	h := &s.hs
	for len(b) > 0 && !h.lost {
		if h.hdrN < handshakeHeaderLen {
			k := copy(h.hdr[h.hdrN:], b)
			h.hdrN += k
			b = b[k:]
			if h.hdrN < handshakeHeaderLen {
				return
			}
			n := int(h.hdr[1])<<16 | int(h.hdr[2])<<8 | int(h.hdr[3])
			h.msg = Handshake{Type: HandshakeType(h.hdr[0]), Len: n}
			h.remain = n
			h.collect = isHello(h.msg.Type)
			if h.collect && n > MaxHelloLen {
				h.collect, h.msg.Truncated = false, true
			}
			if n == 0 {
				s.hsEnd(nil)
			}
			continue
		}
		k := min(h.remain, len(b))
		var body []byte
		switch {
		case !h.collect:
		case len(h.buf) == 0 && k == h.remain:
			body = b[:k] // whole body at hand: parse in place
		default:
			h.grow(k)
			h.buf = append(h.buf, b[:k]...)
			body = h.buf
		}
		h.remain -= k
		b = b[k:]
		if h.remain == 0 {
			s.hsEnd(body)
		}
	}
}

// grow makes room for k more body bytes without exceeding the message
// length, so that a hostile length costs no more than the bytes that came.
func (h *hsReader) grow(k int) {
	need := len(h.buf) + k
	if need <= cap(h.buf) {
		return
	}
	c := min(max(2*cap(h.buf), need, 512), len(h.buf)+h.remain)
	nb := make([]byte, len(h.buf), c)
	copy(nb, h.buf)
	h.buf = nb
}

// hsSkip accounts for n handshake bytes that were never captured.
func (s *Stream) hsSkip(n int64) {
	h := &s.hs
	if h.lost || n <= 0 {
		return
	}
	if h.hdrN < handshakeHeaderLen {
		h.hdrN = 0
		h.lost = true // a message header was missed: the message framing is gone
		return
	}
	h.msg.Truncated = true
	h.collect, h.buf = false, nil
	if n < int64(h.remain) {
		h.remain -= int(n)
		return
	}
	n -= int64(h.remain)
	h.remain = 0
	s.hsEnd(nil)
	if n > 0 {
		h.lost = true
	}
}

// hsAbort drops a message in progress, reported as truncated if its header
// was read.
func (s *Stream) hsAbort() {
	h := &s.hs
	if h.hdrN == handshakeHeaderLen {
		h.msg.Truncated = true
		h.collect = false
		s.hsEnd(nil)
	}
	h.hdrN = 0
	h.buf = nil
}

// hsEnd reports the current message; body is its whole body when it was
// wanted and captured.
func (s *Stream) hsEnd(body []byte) {
	h := &s.hs
	ev := Event{Kind: KindHandshake, Handshake: h.msg}
	if h.collect && !h.msg.Truncated {
		switch h.msg.Type {
		case MsgClientHello:
			ch, err := parseClientHello(body)
			ev.Handshake.ClientHello, ev.Err = ch, err
			if err == nil && ch.offersOnlyTLS13() && s.version == 0 {
				s.version = versionTLS13
			}
		case MsgServerHello:
			sh, err := parseServerHello(body)
			ev.Handshake.ServerHello, ev.Err = sh, err
			if err == nil {
				s.version = sh.Version()
			}
		}
	}
	s.emit(ev)
	h.hdrN, h.remain, h.collect = 0, 0, false
	h.buf = nil // hellos come once or twice: keep no buffer between them
}

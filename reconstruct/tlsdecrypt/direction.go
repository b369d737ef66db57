package tlsdecrypt

import (
	"encoding/binary"
	"fmt"

	"github.com/rtmon/rtmon/reconstruct/tlswire"
)

// phase is which keys protect a direction's records.
type phase uint8

const (
	phaseNone      phase = iota // TLS 1.2 before ChangeCipherSpec: cleartext
	phaseTLS12                  // TLS 1.2 after ChangeCipherSpec
	phaseEarly                  // TLS 1.3 client: 0-RTT offered, early secret
	phaseHandshake              // TLS 1.3 handshake traffic secret
	phaseApp                    // TLS 1.3 application traffic secret N
)

// direction is one side's record protection.
type direction struct {
	phase           phase
	cur             *keyState // nil: no key for the phase (secret missing from the log)
	pending         *keyState // TLS 1.2: what ChangeCipherSpec turns on
	hsKeys, appKeys *keyState // TLS 1.3 handshake and application secret _0
	hs              hsScanner
	earlyLeft       int // 0-RTT records that may still fail as ErrEarlyData
}

func (d *direction) changeCipherSpec() {
	if d.phase == phaseNone && d.pending != nil {
		d.phase, d.cur = phaseTLS12, d.pending
	}
}

// enter switches to new keys; handshake messages never span a key change.
func (d *direction) enter(ph phase, k *keyState) {
	d.phase, d.cur = ph, k
	d.hs = hsScanner{}
}

// open decrypts a record body with a key at a sequence number. The AAD is
// RFC 5246 6.2.3.3 (seq, type, version, plaintext length) in TLS 1.2 and
// the record header in TLS 1.3.
func (s *Session) open(k *keyState, seq uint64, typ tlswire.ContentType, version uint16, body []byte) ([]byte, bool) {
	tls12 := s.suite.version == VersionTLS12
	var explicit []byte
	ct := body
	if tls12 && s.suite.aead == aeadAESGCM {
		if len(body) < 8 {
			return nil, false
		}
		explicit, ct = body[:8], body[8:]
	}
	if len(ct) < k.aead.Overhead() {
		return nil, false
	}
	var nonceBuf [12]byte
	nonce := k.nonce(nonceBuf[:0], seq, explicit)
	var aadBuf [13]byte
	aad := aadBuf[:0]
	if tls12 {
		aad = binary.BigEndian.AppendUint64(aad, seq)
		aad = append(aad, byte(typ))
		aad = binary.BigEndian.AppendUint16(aad, version)
		aad = binary.BigEndian.AppendUint16(aad, uint16(len(ct)-k.aead.Overhead()))
	} else {
		aad = append(aad, byte(typ))
		aad = binary.BigEndian.AppendUint16(aad, version)
		aad = binary.BigEndian.AppendUint16(aad, uint16(len(body)))
	}
	pt, err := k.aead.Open(nil, nonce, ct, aad)
	return pt, err == nil
}

// tryWindow opens a record at the expected sequence number, then at the
// next few (records lost in between), and moves past the one that worked.
func (s *Session) tryWindow(k *keyState, typ tlswire.ContentType, version uint16, body []byte) ([]byte, bool) {
	if k == nil {
		return nil, false
	}
	for i := range uint64(maxSeqSkip + 1) {
		if pt, ok := s.open(k, k.seq+i, typ, version, body); ok {
			if i > 0 {
				s.stats.Recovered++
			}
			k.seq += i + 1
			return pt, true
		}
	}
	return nil, false
}

func (s *Session) decrypt12(dir Direction, d *direction, typ tlswire.ContentType, version uint16, body []byte) (Plaintext, error) {
	pt, ok := s.tryWindow(d.cur, typ, version, body)
	if !ok {
		s.stats.AuthFailures++
		return Plaintext{}, fmt.Errorf("tlsdecrypt: %s %s record of %d bytes: %w", dir, typ, len(body), ErrAuth)
	}
	s.stats.Decrypted++
	return Plaintext{Type: typ, Data: pt, Protected: true}, nil
}

func (s *Session) decrypt13(dir Direction, d *direction, version uint16, body []byte) (Plaintext, error) {
	inner, ok := s.trial13(d, version, body)
	if !ok {
		// The lost content may have ended a handshake message: restart the
		// framing at the next record, which usually begins one.
		d.hs = hsScanner{}
		if d.phase == phaseEarly && d.earlyLeft > 0 {
			d.earlyLeft--
			s.stats.EarlyFailed++
			return Plaintext{}, fmt.Errorf("tlsdecrypt: %s record of %d bytes: %w", dir, len(body), ErrEarlyData)
		}
		s.stats.AuthFailures++
		return Plaintext{}, fmt.Errorf("tlsdecrypt: %s record of %d bytes: %w", dir, len(body), ErrAuth)
	}
	i := len(inner) - 1
	for i >= 0 && inner[i] == 0 {
		i--
	}
	if i < 0 {
		s.stats.Malformed++
		return Plaintext{}, fmt.Errorf("tlsdecrypt: %s record with no content type: %w", dir, ErrMalformed)
	}
	typ, data := tlswire.ContentType(inner[i]), inner[:i]
	s.stats.Decrypted++
	if d.phase == phaseEarly {
		s.stats.EarlyDecrypted++
	}
	if typ == tlswire.TypeHandshake {
		if err := s.afterHandshake(d, data); err != nil {
			return Plaintext{}, fmt.Errorf("tlsdecrypt: %s key update: %w", dir, err)
		}
	}
	return Plaintext{Type: typ, Data: data, Protected: true}, nil
}

// trial13 opens a TLS 1.3 record with the current keys, else with the keys
// of the phases that may follow (the message that ended the current one
// was lost, or the server rejected 0-RTT), switching to those that work.
func (s *Session) trial13(d *direction, version uint16, body []byte) ([]byte, bool) {
	const typ = tlswire.TypeApplicationData
	if pt, ok := s.tryWindow(d.cur, typ, version, body); ok {
		return pt, true
	}
	if d.phase == phaseEarly {
		if pt, ok := s.tryWindow(d.hsKeys, typ, version, body); ok {
			d.enter(phaseHandshake, d.hsKeys)
			return pt, true
		}
	}
	if d.phase == phaseEarly || d.phase == phaseHandshake {
		if pt, ok := s.tryWindow(d.appKeys, typ, version, body); ok {
			d.enter(phaseApp, d.appKeys)
			return pt, true
		}
	}
	return nil, false
}

// afterHandshake follows the key changes the handshake messages of a
// record announce; they apply from the sender's next record.
func (s *Session) afterHandshake(d *direction, data []byte) error {
	ev := d.hs.feed(data)
	switch {
	case ev&seenEndOfEarlyData != 0 && d.phase == phaseEarly:
		d.enter(phaseHandshake, d.hsKeys)
	case ev&seenFinished != 0 && d.phase == phaseHandshake:
		d.enter(phaseApp, d.appKeys)
	case ev&seenKeyUpdate != 0 && d.phase == phaseApp && d.cur != nil:
		next, err := s.suite.nextSecret(d.cur.secret)
		if err != nil {
			return err
		}
		k, err := s.keysFromSecret(next)
		if err != nil {
			return err
		}
		d.enter(phaseApp, k)
		s.stats.KeyUpdates++
	}
	return nil
}

// hsEvents are the handshake messages that change keys.
type hsEvents uint8

const (
	seenFinished hsEvents = 1 << iota
	seenKeyUpdate
	seenEndOfEarlyData
)

// hsScanner follows handshake message framing across records, keeping the
// 4-byte header only: bodies are counted, never kept.
type hsScanner struct {
	hdr  [4]byte
	n    int // header bytes read
	left int // body bytes still to come
}

func (h *hsScanner) feed(p []byte) hsEvents {
	var ev hsEvents
	for len(p) > 0 {
		if h.left > 0 {
			k := min(h.left, len(p))
			h.left -= k
			p = p[k:]
			if h.left == 0 {
				ev |= h.done()
			}
			continue
		}
		c := copy(h.hdr[h.n:], p)
		h.n += c
		p = p[c:]
		if h.n == len(h.hdr) {
			h.n = 0
			h.left = int(h.hdr[1])<<16 | int(h.hdr[2])<<8 | int(h.hdr[3])
			if h.left == 0 {
				ev |= h.done()
			}
		}
	}
	return ev
}

func (h *hsScanner) done() hsEvents {
	switch tlswire.HandshakeType(h.hdr[0]) {
	case tlswire.MsgFinished:
		return seenFinished
	case tlswire.MsgKeyUpdate:
		return seenKeyUpdate
	case tlswire.MsgEndOfEarlyData:
		return seenEndOfEarlyData
	}
	return 0
}

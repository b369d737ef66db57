package reconstruct

import (
	"bytes"
	"errors"

	"github.com/rtmon/rtmon/reconstruct/http2wire"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/reconstruct/tlswire"
)

// Decrypted HTTPS. With a key log (Config.KeyLog) holding a connection's
// secrets, its records are decrypted (tlsdecrypt) as they end and the
// plaintext of its application data goes to the HTTP/1.x parsers, which
// then yield transactions as for cleartext: method, URL, status, sizes.
//
// Times and ACKs stay in TCP stream offsets: the parsers count plaintext
// offsets (each direction from 0), and every offset they report is mapped
// back to the record that carried the byte. A message's first byte maps to
// its record's header, whose first byte's capture time is the request's
// start; its last byte maps to the end of its record, which is complete
// at the record's capture time (the parser is fed when the record ends)
// and which the peer's ACK must cover. Ttls is timed from the records as
// without keys.
//
// Anything that breaks decryption (no key, an unsupported suite, a record
// not wholly captured or that does not authenticate, lost framing) leaves
// the connection, from that record on, to keyless timing: the exchange in
// progress carries on as a turn.

// tlsPlain is a connection's decryption state.
type tlsPlain struct {
	sess *tlsdecrypt.Session
	// spans: the latest records whose plaintext went to each direction's
	// parser (0 client, 1 server), for mapping parser offsets back.
	spans [2]spanRing
	// httpSeen: the client's first plaintext was read (HTTP/1.x or not).
	httpSeen bool
	// h2: the HTTP/2 parser of a connection that began with its preface
	// (see tlsh2.go); h2End the stream offset past the latest record fed
	// to it in each direction.
	h2    *http2wire.Conn
	h2End [2]int64
	// h2Resent: the client's latest records whose first copy was lost
	// before the capture point, by the time their first byte was fed.
	h2Resent [4]h2ResentRecord
	h2Next   int
}

// plainSpan is one record's plaintext: parser offsets [plain, plain+n)
// came from the record at stream offsets [off, end), whose first byte was
// captured at startAt.
type plainSpan struct{ plain, n, off, end, startAt, at int64 }

// maxSpans bounds the records remembered per direction. The parser reports
// offsets of the bytes being fed, or a message start a few records back
// at most (a header section spanning records); older offsets map to the
// oldest record kept.
const maxSpans = 16

type spanRing struct {
	s    [maxSpans]plainSpan
	n    int   // spans held
	head int   // index of the oldest
	next int64 // parser offset of the next plaintext byte
}

func (r *spanRing) push(rec tlswire.Record, n int) {
	sp := plainSpan{plain: r.next, n: int64(n), off: rec.Offset, end: recordEnd(rec), startAt: rec.StartAt, at: rec.At}
	r.next += int64(n)
	if r.n < maxSpans {
		r.s[(r.head+r.n)%maxSpans] = sp
		r.n++
		return
	}
	r.s[r.head] = sp
	r.head = (r.head + 1) % maxSpans
}

// endOf is the stream offset past the latest record remembered that was
// whole at capture time at, and whether there was one.
func (r *spanRing) endOf(at int64) (int64, bool) {
	for i := r.n - 1; i >= 0; i-- {
		if sp := &r.s[(r.head+i)%maxSpans]; sp.at == at {
			return sp.end, true
		}
	}
	return 0, false
}

// wire maps parser offset p to the stream: a message start (end false) to
// its record's header when it begins the record, a message end to the
// record's end when it ends it, and offsets inside a record in proportion
// past the header.
func (r *spanRing) wire(p int64, end bool) int64 {
	off, _ := r.wireAt(p, end, 0)
	return off
}

// wireAt is wire that also returns the capture time of a message start
// mapped to its record's header (fallback otherwise): the delivery logs
// remember too few segments to time a record's first byte.
func (r *spanRing) wireAt(p int64, end bool, fallback int64) (int64, int64) {
	if r.n == 0 {
		return 0, fallback
	}
	for i := r.n - 1; i >= 0; i-- {
		sp := &r.s[(r.head+i)%maxSpans]
		in := sp.plain <= p && p < sp.plain+sp.n
		if end {
			in = sp.plain < p && p <= sp.plain+sp.n
		}
		switch {
		case !in:
			continue
		case end && p == sp.plain+sp.n:
			return sp.end, fallback
		case !end && p == sp.plain:
			return sp.off, sp.startAt
		}
		return min(sp.off+5+(p-sp.plain), sp.end), fallback
	}
	if p >= r.next {
		return r.s[(r.head+r.n-1)%maxSpans].end, fallback
	}
	return r.s[r.head].off, r.s[r.head].startAt
}

// wireOff maps an offset the HTTP parser of a direction reported to the
// stream offset it stands for: itself unless the connection is decrypted.
func (c *conn) wireOff(client bool, p int64, end bool) int64 {
	if c.plainOf() == nil {
		return p
	}
	if client {
		return c.plainOf().spans[0].wire(p, end)
	}
	return c.plainOf().spans[1].wire(p, end)
}

// wireStart maps the start of a message a direction's parser reported:
// its stream offset, and the time to take when the delivery log no longer
// holds that offset.
func (c *conn) wireStart(client bool, p int64) (off, fallback int64) {
	if c.plainOf() == nil {
		return p, c.curTS
	}
	if client {
		return c.plainOf().spans[0].wireAt(p, false, c.curTS)
	}
	return c.plainOf().spans[1].wireAt(p, false, c.curTS)
}

// decrypting reports whether the connection's HTTP is read decrypted.
func (c *conn) decrypting() bool { return c.plainOf() != nil }

// plainOf is the connection's decryption state, nil unless its records
// are being decrypted.
func (c *conn) plainOf() *tlsPlain {
	if c.tls == nil {
		return nil
	}
	return c.tls.plain
}

// tlsStartDecrypt looks the connection up in the key log once the
// ServerHello has said how it is protected.
func (c *conn) tlsStartDecrypt(sh *tlswire.ServerHello) {
	s, kl := c.tls, c.t.cfg.KeyLog
	if kl == nil || c.plainOf() != nil {
		return
	}
	ch := s.wire.ClientHello
	var err error
	var sess *tlsdecrypt.Session
	if ch == nil {
		err = tlsdecrypt.ErrNoSecret // no client random to look up
	} else {
		sess, err = tlsdecrypt.NewSession(kl, tlsdecrypt.Params{ClientRandom: ch.Random, ServerRandom: sh.Random,
			Version: sh.Version(), CipherSuite: sh.CipherSuite, EarlyData: ch.EarlyData})
	}
	if errors.Is(err, tlsdecrypt.ErrNoSecret) && c.t.cfg.KeyLogWait > 0 && ch != nil {
		c.tlsWaitForKey(tlsdecrypt.Params{ClientRandom: ch.Random, ServerRandom: sh.Random,
			Version: sh.Version(), CipherSuite: sh.CipherSuite, EarlyData: ch.EarlyData})
		return
	}
	if err != nil {
		if errors.Is(err, tlsdecrypt.ErrNoSecret) {
			c.t.stats.TLSNoKey++
		} else {
			c.t.stats.TLSDecryptErrors++
		}
		c.tlsKeepBodies(false)
		return
	}
	c.tls.plain = &tlsPlain{sess: sess}
	c.t.stats.TLSDecrypted++
}

// tlsKeepBodies turns record bodies on or off in both directions: they
// are buffered only for decryption.
func (c *conn) tlsKeepBodies(on bool) {
	c.tls.wire.Client.KeepBodies(on)
	c.tls.wire.Server.KeepBodies(on)
}

// tlsStopDecrypt gives decryption up: the connection is timed keyless
// from here on. failed: something broke it (counted).
func (c *conn) tlsStopDecrypt(failed bool) {
	s := c.tls
	if c.plainOf() == nil {
		return
	}
	if failed {
		c.t.stats.TLSDecryptErrors++
	}
	c.tlsH2Close()
	c.tls.plain = nil
	c.tlsKeepBodies(false)
	// The parsers' state is the plaintext's; keyless turns carry on with
	// the transactions they left.
	c.releaseParsers()
	if s.finished > 0 {
		s.ticketsDone = true
	}
}

// tlsPlainHole flags the exchange a hole hit as decryption stops over
// it: the response being received or, between a parsed request and its
// response, that request (keyless timing takes it as the turn's).
func (c *conn) tlsPlainHole() {
	if c.plainOf() == nil {
		return
	}
	if st := c.resp; st != nil {
		st.tx.Flags |= FlagHole
	} else if n := len(c.pending()); n > 0 {
		c.pending()[n-1].tx.Flags |= FlagHole
	}
}

// tlsPlainRecord handles record r of a decrypted connection, body its
// ciphertext. It returns false when the record is left to keyless timing:
// it is cleartext (the handshake), or decryption just broke.
func (c *conn) tlsPlainRecord(client bool, r tlswire.Record, body []byte) bool {
	s := c.tls
	dir := tlsdecrypt.ServerToClient
	if client {
		dir = tlsdecrypt.ClientToServer
	}
	if !r.Encrypted {
		if r.Type == tlswire.TypeChangeCipherSpec {
			c.plainOf().sess.ChangeCipherSpec(dir)
		}
		return false
	}
	if r.Truncated || body == nil {
		c.tlsPlainHole()
		c.tlsStopDecrypt(true)
		return false
	}
	pt, err := c.plainOf().sess.Decrypt(dir, r.Type, r.Version, body)
	switch {
	case errors.Is(err, tlsdecrypt.ErrEarlyData) && s.isEarly(r):
		// Early data the key log has no secret for, or that the server
		// rejected (the client then sends it again after its Finished).
		return true
	case err != nil:
		c.tlsStopDecrypt(true)
		return false
	}
	switch {
	case pt.Type == tlswire.TypeApplicationData && len(pt.Data) > 0:
		// HTTP, also before the client's Finished: its 0-RTT request and
		// the server's answer to it.
		c.tlsPlainHTTP(client, r, pt.Data)
	case r.Type != tlswire.TypeApplicationData || client && s.finished == 0:
		// A protected handshake record (a Finished: Ttls) or alert, timed
		// as without keys.
		if client {
			c.tlsClientRecord(r)
		} else {
			c.tlsServerRecord(r)
		}
	}
	// Else a TLS 1.3 ticket, key update or alert: no HTTP.
	return true
}

// h2Preface begins every HTTP/2 connection (RFC 9113 3.4).
var h2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// tlsPlainHTTP feeds the plaintext of record r to a direction's parser.
func (c *conn) tlsPlainHTTP(client bool, r tlswire.Record, data []byte) {
	p := c.plainOf()
	if client && !p.httpSeen {
		p.httpSeen = true
		if !c.tlsPlainProtocol(data) {
			return
		}
	}
	c.curTS = r.At
	if c.tls.multiplexed {
		if p.h2 != nil {
			c.tlsH2Feed(client, r, data)
		}
		return
	}
	if client {
		p.spans[0].push(r, len(data))
		c.feed(c.reqP(), (*requestEvents)(c), data, len(data))
		return
	}
	p.spans[1].push(r, len(data))
	c.feed(c.respP(), (*responseEvents)(c), data, len(data))
}

// tlsPlainProtocol settles from the client's first plaintext what TLS 1.3
// hid from the hellos: HTTP/2 (read by tlsh2.go) or HTTP/1.x. It returns
// false when that plaintext is not to be parsed.
func (c *conn) tlsPlainProtocol(data []byte) bool {
	s := c.tls
	s.protoUnsure = false
	n := min(len(data), len(h2Preface))
	if bytes.Equal(data[:n], h2Preface[:n]) {
		if !s.multiplexed {
			s.multiplexed = true
			c.rec.Flags |= FlagHTTP2
			c.t.stats.HTTP2Connections++
		}
		if c.tls.alpn == "" {
			c.tls.alpn = "h2"
		}
		c.tlsH2Start()
		return true
	}
	if s.multiplexed {
		// The client offered h2 and HTTP/1.x was chosen.
		s.multiplexed = false
		c.rec.Flags &^= FlagHTTP2
		c.t.stats.HTTP2Connections--
	}
	return true
}

// tlsPlainEnd counts, at the connection's end, a TLS connection timed
// keyless although a key log was given.
func (c *conn) tlsPlainEnd() {
	if c.plainOf() != nil {
		c.tlsH2Close()
	}
	if c.t.cfg.KeyLog != nil && c.tls != nil && c.plainOf() == nil {
		c.t.stats.TLSKeyless++
	}
}

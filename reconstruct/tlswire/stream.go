package tlswire

import (
	"errors"
	"fmt"
)

const (
	// MaxRecordLen is the largest record body a Stream accepts:
	// TLSCiphertext.length may not exceed 2^14+2048 (RFC 5246 6.2.3; TLS
	// 1.3 allows less). A longer header means the bytes are not TLS or the
	// framing is off.
	MaxRecordLen = 1<<14 + 2048
	// MaxHelloLen bounds the ClientHello or ServerHello body a Stream
	// buffers to parse. Real hellos are far smaller (about 1.8 KB with
	// post-quantum key shares); larger ones are reported as truncated.
	MaxHelloLen = 64 << 10

	recordHeaderLen    = 5
	handshakeHeaderLen = 4
)

// Errors a Stream reports; match them with errors.Is.
var (
	// ErrGap: bytes that were never captured covered a record header.
	ErrGap = errors.New("bytes missing at a record header")
	// ErrInvalidHeader: a record header has an unknown content type, a
	// version other than 3.x, or a length over MaxRecordLen.
	ErrInvalidHeader = errors.New("invalid record header")
	// ErrMidStream: Resync was called; the stream was picked up mid-connection.
	ErrMidStream = errors.New("picked up mid-stream")
	// ErrMalformedHello: a ClientHello or ServerHello does not parse.
	ErrMalformedHello = errors.New("malformed hello")
)

type framing uint8

const (
	frHeader framing = iota // reading a record header (hdrN bytes so far)
	frBody                  // reading the body of rec (remain bytes left)
	frHunt                  // framing lost: scanning for a plausible header
)

// Stream parses one direction of one connection. The zero value is ready
// to use, in sync at the stream's first byte. It is not safe for concurrent
// use.
type Stream struct {
	fr  framing
	off int64 // stream offset of the next byte
	at  int64 // time of the current (or last) Feed
	err error // why framing is lost; nil while in sync

	hdr    [recordHeaderLen]byte
	hdrAt  [recordHeaderLen]int64
	hdrN   int
	rec    Record // the record being read
	remain int    // its body bytes left

	// While hunting: the last bytes seen, which may begin a header.
	carry   [recordHeaderLen - 1]byte
	carryAt [recordHeaderLen - 1]int64
	carryN  int
	// tentative: rec was found by hunting; once its body ends it is held
	// until the next header confirms the framing.
	tentative bool
	held      Record

	// mark is the offset of the first byte not yet counted in stats as
	// framed (RecordBytes) or not (Skipped).
	mark  int64
	stats Stats

	ccs     bool   // a ChangeCipherSpec was seen
	version uint16 // negotiated version; 0 while unknown

	hs hsReader

	// keepBodies: the body of the record being read is kept in body, at
	// most MaxRecordLen bytes, and handed over with its KindRecord event.
	keepBodies bool
	body       []byte

	alertLevel byte // first byte of an alert split across records
	alertHalf  bool

	events []Event
}

// Stats counts what a Stream did. Every byte fed is, once decided, either
// framed (RecordBytes) or skipped (Skipped).
type Stats struct {
	Records     int64 // records reported
	RecordBytes int64 // bytes of the records reported, headers included
	Skipped     int64 // bytes not framed: hunted over, or framed by a hunt the next header refuted
	Losses      int   // times framing was lost (KindLost)
	Resyncs     int   // times it was regained (KindResync)
}

// Feed parses the next bytes of the direction, captured at time at. data
// holds the captured bytes and wireLen the segment's payload length on the
// wire; when the capture cut the payload (len(data) < wireLen) the rest
// counts as missing bytes, as with Gap (a wireLen below len(data) counts
// as len(data)). The events returned are valid until the next call.
func (s *Stream) Feed(data []byte, wireLen int, at int64) []Event {
	s.events = s.events[:0]
	s.at = at
	for len(data) > 0 {
		var n int
		switch s.fr {
		case frHeader:
			n = s.readHeader(data)
		case frBody:
			n = s.readBody(data)
		default:
			n = s.hunt(data)
		}
		s.off += int64(n)
		data = data[n:]
		wireLen -= n
	}
	if wireLen > 0 {
		s.skip(int64(wireLen))
	}
	return s.events
}

// Gap tells the stream that the next n bytes were never captured. Records
// that end inside the gap are reported Truncated, at the time of the last
// Feed. The events returned are valid until the next call.
func (s *Stream) Gap(n int64) []Event {
	s.events = s.events[:0]
	if n > 0 {
		s.skip(n)
	}
	return s.events
}

// Resync makes the stream hunt for a record header, for a direction picked
// up mid-connection: the bytes before the first header found are skipped,
// and handshake messages are no longer parsed.
func (s *Stream) Resync() {
	if s.err != nil {
		return // already hunting or confirming
	}
	s.err = fmt.Errorf("tlswire: at offset %d: %w", s.off, ErrMidStream)
	s.fr, s.hdrN, s.carryN = frHunt, 0, 0
	s.dropContent()
}

// SetVersion tells the stream the negotiated protocol version, as the
// other direction's ServerHello selected it (Conn does this). It decides
// what a ChangeCipherSpec means: in TLS 1.3 it is a dummy and protects
// nothing.
func (s *Stream) SetVersion(v uint16) { s.version = v }

// Version is the negotiated version as far as the stream knows it (its
// own ServerHello, a ClientHello offering only TLS 1.3, or SetVersion); 0
// while unknown.
func (s *Stream) Version() uint16 { return s.version }

// Encrypted reports whether handshake and alert records in this direction
// are now protected: a ChangeCipherSpec was seen and the version is not
// known to be TLS 1.3. Application data is always protected.
func (s *Stream) Encrypted() bool { return s.ccs && s.version != versionTLS13 }

// Err is why record framing is lost (wrapping ErrGap, ErrInvalidHeader or
// ErrMidStream); nil while in sync.
func (s *Stream) Err() error { return s.err }

// Offset is the stream offset of the next byte expected.
func (s *Stream) Offset() int64 { return s.off }

// Stats returns the stream's counters.
func (s *Stream) Stats() Stats { return s.stats }

// Buffered is the capacity of the stream's hello buffer, at most
// MaxHelloLen, and of the record body it keeps (KeepBodies), at most
// MaxRecordLen: the memory it holds beyond its fixed size.
func (s *Stream) Buffered() int { return cap(s.hs.buf) + cap(s.body) }

// KeepBodies makes the stream hand each record's body to the caller
// (Event.Body), for decryption. Off by default: a keyless monitor only
// counts body bytes and must not buffer them.
func (s *Stream) KeepBodies(on bool) {
	s.keepBodies = on
	if !on {
		s.body = nil
	}
}

// checkHeader is the test a header must pass while the stream is in sync.
// It is lenient (any TLS content type and 3.x version) because in sync the
// lengths alone frame correctly; failing it means the bytes are not TLS.
func checkHeader(h []byte) error {
	n := int(h[3])<<8 | int(h[4])
	switch {
	case h[0] < byte(TypeChangeCipherSpec) || h[0] > byte(TypeHeartbeat):
		return fmt.Errorf("%w: content type %d", ErrInvalidHeader, h[0])
	case h[1] != 3 || h[2] > 4:
		return fmt.Errorf("%w: version %#04x", ErrInvalidHeader, int(h[1])<<8|int(h[2]))
	case n > MaxRecordLen:
		return fmt.Errorf("%w: length %d over %d", ErrInvalidHeader, n, MaxRecordLen)
	}
	return nil
}

// plausibleHeader is the stricter test for a header found by hunting,
// where a chance match inside ciphertext must be rare (about 1 in 10^7
// positions, and confirmed by the next header): the types and versions an
// established connection sends, non-empty, a ChangeCipherSpec of one byte.
func plausibleHeader(h []byte) bool {
	n := int(h[3])<<8 | int(h[4])
	if h[1] != 3 || h[2] < 1 || h[2] > 3 || n == 0 || n > MaxRecordLen {
		return false
	}
	switch ContentType(h[0]) {
	case TypeChangeCipherSpec:
		return n == 1
	case TypeAlert, TypeHandshake, TypeApplicationData:
		return true
	}
	return false
}

func (s *Stream) readHeader(data []byte) int {
	if s.hdrN == 0 {
		s.rec = Record{Offset: s.off, StartAt: s.at}
	}
	k := copy(s.hdr[s.hdrN:], data)
	for i := s.hdrN; i < s.hdrN+k; i++ {
		s.hdrAt[i] = s.at
	}
	s.hdrN += k
	if s.hdrN < recordHeaderLen {
		return k
	}
	s.hdrN = 0
	h := s.hdr[:]
	if s.tentative {
		if !plausibleHeader(h) {
			s.refute(s.rec.Offset)
			s.huntFromHeader()
			return k
		}
		s.confirm()
	} else if err := checkHeader(h); err != nil {
		s.lose(fmt.Errorf("tlswire: record header at offset %d: %w", s.rec.Offset, err))
		s.huntFromHeader()
		return k
	}
	s.beginRecord(h)
	return k
}

// huntFromHeader hunts on from the second byte of a refused header.
func (s *Stream) huntFromHeader() {
	s.fr = frHunt
	s.carryN = copy(s.carry[:], s.hdr[1:])
	copy(s.carryAt[:], s.hdrAt[1:])
}

// beginRecord starts reading the record whose header h was just read.
func (s *Stream) beginRecord(h []byte) {
	s.rec.Type = ContentType(h[0])
	s.rec.Version = uint16(h[1])<<8 | uint16(h[2])
	s.rec.Len = int(h[3])<<8 | int(h[4])
	s.rec.Encrypted = s.rec.Type == TypeApplicationData ||
		(s.rec.Type != TypeChangeCipherSpec && s.Encrypted())
	s.remain = s.rec.Len
	if s.keepBodies {
		// A fresh buffer per record: the previous one went out with its
		// event. Len is at most MaxRecordLen (checked with the header).
		s.body = make([]byte, 0, s.rec.Len)
	}
	if s.remain == 0 {
		s.endRecord()
		return
	}
	s.fr = frBody
}

func (s *Stream) readBody(data []byte) int {
	k := min(s.remain, len(data))
	if !s.tentative {
		s.content(data[:k])
		if s.keepBodies && len(s.body)+k <= cap(s.body) {
			s.body = append(s.body, data[:k]...)
		}
	}
	s.remain -= k
	if s.remain == 0 {
		s.endRecord()
	}
	return k
}

// parsesContent reports whether the current record's body is read: a
// cleartext handshake or alert record of a stream in sync.
func (s *Stream) parsesContent() bool {
	return !s.tentative && !s.rec.Encrypted &&
		(s.rec.Type == TypeHandshake || s.rec.Type == TypeAlert)
}

// content reads body bytes of the current record.
func (s *Stream) content(b []byte) {
	if !s.parsesContent() {
		return
	}
	if s.rec.Type == TypeHandshake {
		s.hsFeed(b)
		return
	}
	for _, c := range b {
		if !s.alertHalf {
			s.alertLevel, s.alertHalf = c, true
			continue
		}
		s.alertHalf = false
		s.emit(Event{Kind: KindAlert, Alert: Alert{Level: s.alertLevel, Description: c}})
	}
}

// contentSkip tells the content parsers that n body bytes of the current
// record were never captured.
func (s *Stream) contentSkip(n int64) {
	if !s.parsesContent() {
		return
	}
	if s.rec.Type == TypeHandshake {
		s.hsSkip(n)
		return
	}
	s.alertHalf = false
}

// endRecord ends the current record: reported, or held while tentative.
func (s *Stream) endRecord() {
	s.fr = frHeader
	s.rec.At = s.at
	if s.tentative {
		s.held = s.rec
		return
	}
	s.recordDone(s.rec)
}

// recordDone applies what a finished record means to the direction and
// reports it.
func (s *Stream) recordDone(r Record) {
	switch {
	case r.Type == TypeChangeCipherSpec:
		s.ccs = true
		if s.Encrypted() {
			s.hsAbort() // what follows in this direction is protected
		}
	case r.Type == TypeAlert && r.Encrypted:
		s.events = append(s.events, Event{Kind: KindAlert, At: r.At, Alert: Alert{Encrypted: true}})
	}
	ev := Event{Kind: KindRecord, At: r.At, Record: r}
	if s.keepBodies && !r.Truncated && s.body != nil && len(s.body) == r.Len {
		ev.Body, s.body = s.body, nil
	}
	s.events = append(s.events, ev)
	s.stats.Records++
	s.stats.RecordBytes += int64(recordHeaderLen + r.Len)
	s.mark = r.Offset + int64(recordHeaderLen+r.Len)
}

// skip accounts for n bytes that were never captured.
func (s *Stream) skip(n int64) {
	if s.fr == frBody {
		k := min(n, int64(s.remain))
		s.off += k
		s.remain -= int(k)
		s.rec.Truncated = true
		s.contentSkip(k)
		if s.remain > 0 {
			return
		}
		s.endRecord()
		if n -= k; n == 0 {
			return // the gap ended exactly at a record boundary
		}
	}
	if s.fr == frHeader {
		start := s.off - int64(s.hdrN)
		if s.tentative {
			s.refute(start)
		}
		s.lose(fmt.Errorf("tlswire: record header at offset %d: %w", start, ErrGap))
	}
	// Hunting: nothing carried over the hole can begin a header.
	s.carryN = 0
	s.off += n
	s.stats.Skipped += s.off - s.mark
	s.mark = s.off
}

// lose drops record framing and starts hunting; KindLost is reported when
// the stream was in sync.
func (s *Stream) lose(err error) {
	s.fr, s.hdrN, s.carryN = frHunt, 0, 0
	s.dropContent()
	if s.err == nil {
		s.err = err
		s.stats.Losses++
		s.emit(Event{Kind: KindLost, Err: err})
	}
}

// dropContent stops content parsing for good: after missing bytes at a
// record boundary, the handshake layer's framing is unknown.
func (s *Stream) dropContent() {
	s.hsAbort()
	s.hs.lost = true
	s.alertHalf = false
}

// foundHeader starts a tentative record at the plausible header h found
// by hunting at offset off.
func (s *Stream) foundHeader(h []byte, off, startAt int64) {
	s.stats.Skipped += off - s.mark
	s.mark = off
	s.carryN = 0
	s.tentative = true
	s.rec = Record{Offset: off, StartAt: startAt}
	s.beginRecord(h)
}

// confirm accepts the tentative framing: the header after the held record
// checks out.
func (s *Stream) confirm() {
	s.tentative = false
	s.err = nil
	s.stats.Resyncs++
	s.emit(Event{Kind: KindResync})
	s.recordDone(s.held)
}

// refute rejects the tentative framing at offset end, where its next
// header failed: the held record's bytes were not a record after all.
func (s *Stream) refute(end int64) {
	s.tentative = false
	s.stats.Skipped += end - s.mark
	s.mark = end
}

// hunt scans for a plausible header, which may begin in the bytes carried
// from earlier calls.
func (s *Stream) hunt(data []byte) int {
	if s.carryN > 0 {
		var win [2 * (recordHeaderLen - 1)]byte
		n := copy(win[:], s.carry[:s.carryN])
		n += copy(win[n:], data)
		for i := 0; i < s.carryN && i+recordHeaderLen <= n; i++ {
			if plausibleHeader(win[i : i+recordHeaderLen]) {
				used := i + recordHeaderLen - s.carryN
				s.foundHeader(win[i:i+recordHeaderLen], s.off-int64(s.carryN-i), s.carryAt[i])
				return used
			}
		}
	}
	for i := 0; i+recordHeaderLen <= len(data); i++ {
		if data[i+1] == 3 && plausibleHeader(data[i:i+recordHeaderLen]) {
			s.foundHeader(data[i:i+recordHeaderLen], s.off+int64(i), s.at)
			return i + recordHeaderLen
		}
	}
	// Carry the last bytes: a header may begin there.
	keep := 0
	if len(data) < len(s.carry) {
		keep = min(s.carryN, len(s.carry)-len(data))
	}
	copy(s.carry[:], s.carry[s.carryN-keep:s.carryN])
	copy(s.carryAt[:], s.carryAt[s.carryN-keep:s.carryN])
	tail := data[max(0, len(data)-len(s.carry)):]
	copy(s.carry[keep:], tail)
	for i := range tail {
		s.carryAt[keep+i] = s.at
	}
	s.carryN = keep + len(tail)
	if m := s.off + int64(len(data)) - int64(s.carryN); m > s.mark {
		s.stats.Skipped += m - s.mark
		s.mark = m
	}
	return len(data)
}

func (s *Stream) emit(e Event) {
	e.At = s.at
	s.events = append(s.events, e)
}

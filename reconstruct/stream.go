package reconstruct

import "sort"

// maxWindow is how far from the expected offset a segment may land before it is
// treated as garbage rather than data: far beyond any real TCP window.
const maxWindow = 1 << 30

// segment is a buffered out-of-order piece of one direction's byte stream.
type segment struct {
	off     int64
	ts      int64
	data    []byte // captured bytes (may be shorter than wire length)
	wireLen int
}

// delivery is called for each in-order piece of a stream. ts is when the
// receiver could use the piece (when the hole before it filled), arrived
// when it reached the capture point (earlier, for a piece that overtook
// one before it). captured may be shorter than wireLen when the snap
// length cut the packet.
type delivery func(ts, arrived, off int64, captured []byte, wireLen int)

// halfStream reassembles one direction of a connection into an in-order byte
// stream, so the HTTP parser sees each byte once and in order whatever
// retransmission, reordering or overlap the capture holds.
type halfStream struct {
	baseKnown bool
	finSeen   bool
	closed    bool   // FIN delivered to the parser
	base      uint32 // sequence number of stream offset 0
	next      int64  // offset of the next byte to deliver
	highest   int64  // one past the highest offset seen
	finOff    int64
	// ooo holds out-of-order segments; nil (8 bytes, not 32) on the vast
	// majority of connections that never reorder.
	ooo *reorderBuffer

	bytes        int64
	retransBytes int64
}

type reorderBuffer struct {
	segs  []segment // by offset
	bytes int
}

func (h *halfStream) buffered() []segment {
	if h.ooo == nil {
		return nil
	}
	return h.ooo.segs
}

// setBase anchors sequence numbers: offset 0 is the byte at seq.
func (h *halfStream) setBase(seq uint32) {
	h.baseKnown = true
	h.base = seq
}

// offset unwraps a 32-bit sequence number into a 64-bit stream offset near the
// current position, so wrap-around is invisible above this point.
func (h *halfStream) offset(seq uint32) int64 {
	return h.next + int64(int32(seq-h.base-uint32(h.next)))
}

// segment handles one data segment (and/or FIN) at sequence seq. It returns
// the number of bytes that were retransmissions of already delivered data,
// or -1 when the segment lies outside any plausible window.
func (h *halfStream) segment(ts int64, seq uint32, captured []byte, wireLen int, fin bool, maxBuffered int, deliver delivery, gap func(off, n int64)) (retrans int, reordered bool) {
	off := h.offset(seq)
	end := off + int64(wireLen)
	if end < h.next-maxWindow || off > h.next+maxWindow {
		return -1, false
	}
	if fin && !h.finSeen {
		h.finSeen = true
		h.finOff = end
	}
	if end > h.highest {
		h.highest = end
	}
	switch {
	case wireLen == 0:
	case end <= h.next:
		retrans = wireLen
	case off <= h.next:
		skip := int(h.next - off)
		retrans = skip
		h.bytes += int64(wireLen - skip)
		deliver(ts, ts, h.next, cut(captured, skip), wireLen-skip)
		h.next = end
		h.drain(ts, deliver)
	default:
		if !h.buffer(off, ts, captured, wireLen) {
			return wireLen, false
		}
		reordered = true
		h.bytes += int64(wireLen)
		if h.ooo.bytes > maxBuffered {
			// Memory is bounded: give up waiting for the missing range.
			h.skipTo(h.ooo.segs[0].off, gap)
			h.drain(0, deliver)
		}
	}
	return retrans, reordered
}

func cut(b []byte, n int) []byte {
	if n >= len(b) {
		return nil
	}
	return b[n:]
}

// buffer inserts s in offset order; identical retransmissions of a buffered
// segment are dropped so a storm of them cannot fill memory.
func (h *halfStream) buffer(off, ts int64, captured []byte, wireLen int) bool {
	if h.ooo == nil {
		h.ooo = &reorderBuffer{}
	}
	b := h.ooo
	i := sort.Search(len(b.segs), func(i int) bool { return b.segs[i].off >= off })
	if i < len(b.segs) && b.segs[i].off == off && b.segs[i].wireLen >= wireLen {
		return false
	}
	b.segs = append(b.segs, segment{})
	copy(b.segs[i+1:], b.segs[i:])
	b.segs[i] = segment{off: off, ts: ts, data: append([]byte(nil), captured...), wireLen: wireLen}
	b.bytes += wireLen
	return true
}

// drain delivers buffered segments that have become in order. filled is
// the capture time of the segment that filled the hole before them (0 when
// a hole was declared instead): the receiver could use the bytes behind a
// hole only once it filled, so they are timed no earlier than that.
func (h *halfStream) drain(filled int64, deliver delivery) {
	b := h.ooo
	if b == nil {
		return
	}
	for len(b.segs) > 0 && b.segs[0].off <= h.next {
		s := b.segs[0]
		b.segs[0] = segment{}
		b.segs = b.segs[1:]
		b.bytes -= s.wireLen
		end := s.off + int64(s.wireLen)
		if end > h.next {
			skip := int(h.next - s.off)
			h.bytes -= int64(skip) // counted when buffered, but overlapped
			deliver(max(s.ts, filled), s.ts, h.next, cut(s.data, skip), s.wireLen-skip)
			h.next = end
		} else {
			h.bytes -= int64(s.wireLen)
		}
	}
	if len(b.segs) == 0 {
		h.ooo = nil // let the buffer go
	}
}

// skipTo declares [next, off) a hole: bytes that were never captured.
func (h *halfStream) skipTo(off int64, gap func(off, n int64)) {
	if off <= h.next {
		return
	}
	n := off - h.next
	gap(h.next, n)
	h.next = off
}

// acked tells the stream that the peer acknowledged everything before off: any
// byte before it that was not captured never will be, so holes are declared
// now instead of waiting for the end of the connection.
func (h *halfStream) acked(off int64, deliver delivery, gap func(off, n int64)) {
	for h.next < off {
		segs := h.buffered()
		if len(segs) > 0 && segs[0].off <= h.next {
			h.drain(0, deliver)
			continue
		}
		target := off
		if len(segs) > 0 && segs[0].off < target {
			target = segs[0].off
		}
		// A FIN's sequence slot is acknowledged too; it is not a byte.
		if h.finSeen && target > h.finOff {
			target = h.finOff
			if target <= h.next {
				return
			}
		}
		h.skipTo(target, gap)
		h.drain(0, deliver)
	}
}

// flush delivers everything still buffered, declaring holes between pieces.
func (h *halfStream) flush(deliver delivery, gap func(off, n int64)) {
	for segs := h.buffered(); len(segs) > 0; segs = h.buffered() {
		h.skipTo(segs[0].off, gap)
		h.drain(0, deliver)
	}
	if h.finSeen && h.finOff > h.next {
		h.skipTo(h.finOff, gap)
	}
}

// finReady reports whether the FIN is next in the stream and not yet handled.
func (h *halfStream) finReady() bool {
	return h.finSeen && !h.closed && h.next >= h.finOff
}

// deliveryLog remembers the capture times of the last few in-order pieces of
// a stream, so an HTTP message whose start line spanned segments is timed by
// the segment that carried its first byte, not the one that completed the
// line. It also keeps how many packets the sender lost just before each
// piece (see ipidTrack), the evidence of a late first transmission.
type deliveryLog struct {
	ring [2]struct {
		off, end, ts int64
		lost         int
		ackOrCopy    bool
	}
	head int
}

func (l *deliveryLog) add(off, end, ts int64, lost int, ackOrCopy bool) {
	e := &l.ring[l.head]
	e.off, e.end, e.ts, e.lost, e.ackOrCopy = off, end, ts, lost, ackOrCopy
	l.head = (l.head + 1) % len(l.ring)
}

// timeAt returns the capture time of the piece holding offset off, or
// fallback when it is older than the log remembers.
func (l *deliveryLog) timeAt(off, fallback int64) int64 {
	ts, _, _ := l.at(off, fallback)
	return ts
}

// at is timeAt that also returns the packets lost just before that piece,
// and whether they may have been ACKs rather than copies of it.
func (l *deliveryLog) at(off, fallback int64) (ts int64, lost int, ackOrCopy bool) {
	for i := 1; i <= len(l.ring); i++ {
		e := &l.ring[(l.head-i+len(l.ring))%len(l.ring)]
		if e.off <= off && off < e.end {
			return e.ts, e.lost, e.ackOrCopy
		}
	}
	return fallback, 0, false
}

// last is the capture time of the newest piece, 0 before any.
func (l *deliveryLog) last() int64 {
	return l.ring[(l.head-1+len(l.ring))%len(l.ring)].ts
}

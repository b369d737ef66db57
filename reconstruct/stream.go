package reconstruct

import (
	"math"
	"sort"

	"github.com/google/btree"
)

// windowSlack is how far past the receiver's last advertised window edge a
// segment may start: the capture point sees the receiver's ACKs before
// the sender does, so only ACKs the capture missed (lost on their way, or
// dropped by the capture) let real data run ahead of it. It is larger
// than the largest receive buffers Linux offers by default (6 MiB).
const windowSlack = 8 << 20

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
	// edge is the right edge of the receiver's advertised window (its
	// ACK plus its scaled window, the highest seen), 0 while unknown (no
	// handshake with both window scales seen). A sender never sends past
	// the window it was offered, so data starting beyond edge plus
	// windowSlack is not this stream's.
	edge int64
}

// reorderBuffer holds out-of-order segments by offset, one per offset:
// in a sorted slice while they are few (a lost segment and the flight
// behind it, the common case), in a B-tree once they are many, so that
// segments arriving in any order (a crafted capture sends 200,000 one-byte
// segments in descending order) cost O(log n) each. bytes is the memory
// they hold, not their wire length: each segment also costs
// segmentOverhead, so a flood of tiny segments meets MaxBufferedBytes as
// soon as their memory does.
type reorderBuffer struct {
	small []segment // by offset, while tree is nil
	tree  *btree.BTreeG[segment]
	bytes int
}

// smallReorder is how many segments the sorted slice holds before they
// move to a B-tree: inserting into it costs a copy of the segments after.
const smallReorder = 64

func (b *reorderBuffer) len() int {
	if b.tree != nil {
		return b.tree.Len()
	}
	return len(b.small)
}

func (b *reorderBuffer) min() (segment, bool) {
	if b.tree != nil {
		return b.tree.Min()
	}
	if len(b.small) == 0 {
		return segment{}, false
	}
	return b.small[0], true
}

func (b *reorderBuffer) deleteMin() {
	if b.tree != nil {
		b.tree.DeleteMin()
		return
	}
	b.small[0] = segment{}
	b.small = b.small[1:]
}

// put inserts s, with a copy of captured as its data, unless a segment at
// least as long is buffered at its offset (no copy is made then); a
// shorter one there is replaced and returned.
func (b *reorderBuffer) put(s segment, captured []byte) (inserted bool, replaced segment) {
	if b.tree == nil && len(b.small) >= smallReorder {
		b.tree = btree.NewG(reorderDegree, segmentBefore)
		for _, x := range b.small {
			b.tree.ReplaceOrInsert(x)
		}
		b.small = nil
	}
	if b.tree != nil {
		if old, ok := b.tree.Get(s); ok && old.wireLen >= s.wireLen {
			return false, segment{}
		}
		s.data = append([]byte(nil), captured...)
		replaced, _ = b.tree.ReplaceOrInsert(s)
		return true, replaced
	}
	i := len(b.small) // in-order arrivals behind a hole append
	if i > 0 && b.small[i-1].off >= s.off {
		i = sort.Search(len(b.small), func(i int) bool { return b.small[i].off >= s.off })
	}
	if i < len(b.small) && b.small[i].off == s.off {
		if b.small[i].wireLen >= s.wireLen {
			return false, segment{}
		}
		s.data = append([]byte(nil), captured...)
		replaced, b.small[i] = b.small[i], s
		return true, replaced
	}
	s.data = append([]byte(nil), captured...)
	b.small = append(b.small, segment{})
	copy(b.small[i+1:], b.small[i:])
	b.small[i] = s
	return true, segment{}
}

// reorderHeld is the memory both directions' out-of-order buffers hold.
func (c *conn) reorderHeld() int {
	n := 0
	if c.c2s.ooo != nil {
		n += c.c2s.ooo.bytes
	}
	if c.s2c.ooo != nil {
		n += c.s2c.ooo.bytes
	}
	return n
}

// segmentOverhead is the memory a buffered segment costs besides its bytes:
// the segment itself, its B-tree slot and the allocation of its copy.
const segmentOverhead = 96

// reorderDegree keeps the B-tree's nodes small: most buffers hold a few
// segments behind one hole.
const reorderDegree = 8

func segmentBefore(a, b segment) bool { return a.off < b.off }

// firstBuffered is the buffered segment with the lowest offset.
func (h *halfStream) firstBuffered() (segment, bool) {
	if h.ooo == nil {
		return segment{}, false
	}
	return h.ooo.min()
}

// advertised notes a window the receiver offered: everything up to its ACK
// offset ackOff plus win bytes.
func (h *halfStream) advertised(ackOff, win int64) {
	if e := ackOff + win; e > h.edge {
		h.edge = e
	}
}

// carried is how many bytes of the stream the capture held, each counted
// once (Connection.BytesClient and BytesServer): every byte before next
// but the holes skipped (gapped, which the connection counts), and the
// ones buffered beyond a hole.
func (h *halfStream) carried(gapped int64) int64 {
	n := h.next - gapped
	if b := h.ooo; b != nil {
		n += int64(b.bytes - b.len()*segmentOverhead)
	}
	return n
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

// near reports whether offset off (a sequence number or acknowledgement of
// this stream) could belong to it: within windowSlack of what was seen.
// Another incarnation's numbers, or random ones, land anywhere in the
// 32-bit space.
func (h *halfStream) near(off int64) bool {
	return off >= h.next-windowSlack && off <= h.highest+windowSlack
}

// segment handles one data segment (and/or FIN) at sequence seq. It returns
// the number of bytes that were retransmissions of already delivered data,
// or -1 when the segment lies outside any plausible window.
func (h *halfStream) segment(ts int64, seq uint32, captured []byte, wireLen int, fin bool, maxBuffered int, deliver delivery, gap func(off, n int64)) (retrans int, reordered bool) {
	off := h.offset(seq)
	end := off + int64(wireLen)
	if end < h.next-maxWindow || off > h.next+maxWindow || h.edge > 0 && off > h.edge+windowSlack {
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
		deliver(ts, ts, h.next, cut(captured, skip), wireLen-skip)
		h.next = end
		h.drain(ts, deliver)
	default:
		if !h.buffer(off, ts, captured, wireLen) {
			return wireLen, false
		}
		reordered = true
		if h.ooo.bytes > maxBuffered {
			// Memory is bounded: give up waiting for the missing range.
			first, _ := h.firstBuffered()
			h.skipTo(first.off, gap)
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

// buffer keeps a segment until the bytes before it arrive. A copy of a
// buffered segment, or a shorter one at the same offset, is dropped so a
// storm of them cannot fill memory; a longer one replaces it.
func (h *halfStream) buffer(off, ts int64, captured []byte, wireLen int) bool {
	if h.ooo == nil {
		h.ooo = &reorderBuffer{}
	}
	b := h.ooo
	inserted, old := b.put(segment{off: off, ts: ts, wireLen: wireLen}, captured)
	if !inserted {
		return false
	}
	if old.wireLen > 0 {
		b.bytes -= old.wireLen + segmentOverhead
	}
	b.bytes += wireLen + segmentOverhead
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
	for {
		s, ok := b.min()
		if !ok || s.off > h.next {
			break
		}
		b.deleteMin()
		b.bytes -= s.wireLen + segmentOverhead
		end := s.off + int64(s.wireLen)
		if end > h.next {
			skip := int(h.next - s.off)
			deliver(max(s.ts, filled), s.ts, h.next, cut(s.data, skip), s.wireLen-skip)
			h.next = end
		}
	}
	if b.len() == 0 {
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
		first, ok := h.firstBuffered()
		if ok && first.off <= h.next {
			h.drain(0, deliver)
			continue
		}
		target := off
		if ok && first.off < target {
			target = first.off
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
	for first, ok := h.firstBuffered(); ok; first, ok = h.firstBuffered() {
		h.skipTo(first.off, gap)
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
// piece (see ipidTrack), the evidence of a late first transmission, and,
// for multiplexed HTTP/2 whose streams are timed by their own records,
// when each piece first reached the capture point (before its delivery
// when it overtook a hole) and whether it filled a hole as a resend.
//
// Two pieces, the newer second: a shift replaces a ring's head. The fields
// lie in parallel arrays, each piece's end as its length (a packet's
// payload, below 4 GiB), so the log takes 40 B. The pieces' loss evidence
// (deliveryLoss) lives in the connection's lossNotes, which only a
// connection that saw some has: most pieces arrive in order, as sent.
type deliveryLog struct {
	off, ts [2]int64
	n       [2]uint32 // length: the piece is [off, off+n)
}

// deliveryLoss is the loss evidence of a deliveryLog's two pieces, in
// the same order.
type deliveryLoss struct {
	// early: how long before its in-order delivery (ts) the piece first
	// reached the capture point (it overtook a hole), or for a refill
	// when its lost first copy would have come (deliverClient).
	early [2]int64
	// lost: the packets the sender lost just before the piece (IP IDs;
	// an int8, as conn.pktLost); ackOrCopy: they may have been ACKs
	// rather than copies of it.
	lost      [2]int8
	ackOrCopy [2]bool
	// refill: the piece filled a hole that later pieces had overtaken,
	// and was sent after them (IP IDs): a resend of a copy lost before
	// the capture point.
	refill [2]bool
}

// deliveryPiece is one piece of a deliveryLog.
type deliveryPiece struct {
	off, end, ts, arrived int64
	lost                  int8
	ackOrCopy, refill     bool
}

// hasLoss reports whether p carries loss evidence a deliveryLoss keeps.
func (p *deliveryPiece) hasLoss() bool {
	return p.arrived != p.ts || p.lost != 0 || p.ackOrCopy || p.refill
}

func (l *deliveryLog) add(p deliveryPiece) {
	l.off[0], l.n[0], l.ts[0] = l.off[1], l.n[1], l.ts[1]
	l.off[1], l.n[1], l.ts[1] = p.off, uint32(p.end-p.off), p.ts
}

// last is the capture time of the newest piece, 0 before any.
func (l *deliveryLog) last() int64 { return l.ts[1] }

// add shifts p's evidence in as its log's add does the piece.
func (d *deliveryLoss) add(p deliveryPiece) {
	d.early[0], d.lost[0], d.ackOrCopy[0], d.refill[0] = d.early[1], d.lost[1], d.ackOrCopy[1], d.refill[1]
	d.early[1], d.lost[1], d.ackOrCopy[1], d.refill[1] = p.ts-p.arrived, p.lost, p.ackOrCopy, p.refill
}

// piece returns the remembered piece holding offset off, the newer first,
// with its loss evidence from d (nil: none).
func (l *deliveryLog) piece(off int64, d *deliveryLoss) (deliveryPiece, bool) {
	for i := 1; i >= 0; i-- {
		if end := l.off[i] + int64(l.n[i]); l.off[i] <= off && off < end {
			p := deliveryPiece{off: l.off[i], end: end, ts: l.ts[i], arrived: l.ts[i]}
			if d != nil {
				p.arrived -= d.early[i]
				p.lost, p.ackOrCopy, p.refill = d.lost[i], d.ackOrCopy[i], d.refill[i]
			}
			return p, true
		}
	}
	return deliveryPiece{}, false
}

// addClientPiece logs a piece of the client's stream, and its loss
// evidence where there is some, or was for the piece before it.
func (c *conn) addClientPiece(p deliveryPiece) {
	c.c2sLog.add(p)
	if c.loss != nil || p.hasLoss() {
		c.notes().delivered.add(p)
	}
}

// clientPiece is the client's remembered piece holding offset off.
func (c *conn) clientPiece(off int64) (deliveryPiece, bool) {
	var d *deliveryLoss
	if c.loss != nil {
		d = &c.loss.delivered
	}
	return c.c2sLog.piece(off, d)
}

// clientTimeAt returns the capture time of the client's piece holding
// offset off (fallback when it is older than the log remembers), the
// packets lost just before it, and whether they may have been ACKs
// rather than copies of it.
func (c *conn) clientTimeAt(off, fallback int64) (ts int64, lost int8, ackOrCopy bool) {
	p, ok := c.clientPiece(off)
	if !ok {
		return fallback, 0, false
	}
	return p.ts, p.lost, p.ackOrCopy
}

// serverLog is the deliveryLog of the server's stream, whose pieces carry
// their offsets and capture time only: the loss evidence is the
// client's, and the server's pieces are timed as they are delivered. The
// same pieces, as they left the capture point, are the probes that time
// the client's round trip (see rttProbes), so one log keeps both: three
// pieces, newest first, the two newest with their lengths, which timeAt
// reads, and a bit each saying whether it is still a probe.
//
// A piece's length is kept as a uint16: a segment's payload fits, and of
// a longer piece (a capture of GRO's merged segments) the last 64 KiB
// are found, the rest of it read as older than the log remembers.
type serverLog struct {
	end, ts [3]int64
	n       [2]uint16               // length: piece i is [end-n, end)
	probes  uint8                   // bit i: piece i is a probe no ACK covered yet
	held    struct{ end, ts int64 } // see rttProbes; ts 0: none
}

// add logs the server's piece [off, end), delivered at ts, and sends it
// as a probe.
func (l *serverLog) add(off, end, ts int64) {
	l.end[2], l.end[1], l.end[0] = l.end[1], l.end[0], end
	l.ts[2], l.ts[1], l.ts[0] = l.ts[1], l.ts[0], ts
	l.n[1], l.n[0] = l.n[0], uint16(min(end-off, math.MaxUint16))
	l.probes = (l.probes<<1 | 1) & 7
	if l.held.ts == 0 {
		l.held.end, l.held.ts = end, ts
	}
}

// timeAt returns the capture time of the piece holding offset off, or
// fallback when it is older than the log remembers (the two newest).
func (l *serverLog) timeAt(off, fallback int64) int64 {
	for i := range l.n {
		if l.end[i]-int64(l.n[i]) <= off && off < l.end[i] {
			return l.ts[i]
		}
	}
	return fallback
}

// last is the capture time of the newest piece, 0 before any.
func (l *serverLog) last() int64 {
	return l.ts[0]
}

// acked returns the send time of the newest probe ending at or before
// off and forgets every probe the ACK covers (see rttProbes).
func (l *serverLog) acked(off int64) (int64, bool) {
	held := l.held
	if held.ts != 0 && held.end <= off {
		l.held.ts = 0
	}
	for i := range l.end {
		if l.probes&(1<<i) != 0 && l.end[i] <= off {
			l.probes &= 1<<i - 1 // older probes are covered too
			return l.ts[i], true
		}
	}
	if held.ts != 0 && held.end <= off {
		return held.ts, true
	}
	return 0, false
}

// resetProbes forgets the probes.
func (l *serverLog) resetProbes() {
	l.probes, l.held.ts = 0, 0
}

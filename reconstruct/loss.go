package reconstruct

import (
	"time"

	"github.com/rtmon/rtmon/capture"
)

// Loss on the client's side of the capture point leaves no retransmission
// in the capture, only indirect evidence. This file gathers it:
//
//   - A server retransmission of bytes the client already had (its ACK was
//     lost before the capture point, or was still in flight) changes
//     nothing for the client. The client's next ACK says so: a D-SACK
//     block (RFC 2883) reports the duplicate. The timestamp echo (RFC 7323,
//     the Eifel test of RFC 3522) tells only an ACK the original triggered
//     and the retransmission overtook: a receiver does take the TSval of a
//     duplicate that ends at its last ACK (a tail probe, Linux's
//     tcp_replace_ts_recent), so after a lost ACK it echoes the
//     retransmission and only the D-SACK tells. Without either option, an
//     ACK that arrives sooner than half a round trip after the
//     retransmission cannot be its answer.
//   - A client segment lost before the capture point arrives only as its
//     retransmission, one retransmission timeout late. Linux numbers each
//     connection's IPv4 packets consecutively, so a step larger than one in
//     the client's IP IDs right before a request shows the lost copies; the
//     client's timeout follows from its round-trip time (linuxRTO).

// ipidTrack follows one sender's IPv4 Identification values. Only a sender
// whose IDs have stepped by exactly one (a per-connection counter, as Linux
// keeps) is trusted; a host-wide counter (other connections' packets in
// between) or random IDs soon show steps that are not one and are ignored.
type ipidTrack struct {
	last  uint16
	seen  bool
	steps uint16 // steps of exactly one
	gaps  uint16 // steps of 2..maxIPIDGap
	wild  bool   // a step no per-connection counter makes: untrusted for good
	back  bool   // the last packet was older than one before it (reordered)
}

// sent reports whether the last packet was sent after every one before it,
// by a trusted numbering: a late packet that is no reordered original is
// a retransmission.
func (t *ipidTrack) sent() bool {
	return !t.wild && !t.back && t.steps >= 1 && 4*int(t.gaps) <= int(t.steps)
}

// maxIPIDGap is the largest step read as lost packets: a few copies of one
// segment and the ACKs around them. Larger steps are another numbering.
const maxIPIDGap = 8

// step records the next packet's ID and returns how many packets the
// sender sent just before it that never reached the capture point (0 when
// the numbering is not trusted). first allows trusting the very first step
// (see below).
func (t *ipidTrack) step(id uint16, first bool) int {
	if !t.seen {
		t.seen, t.last = true, id
		return 0
	}
	d := id - t.last
	t.back = d >= 0x8000
	switch {
	case d == 0:
		// The same ID again: a duplicated frame, or a sender that does
		// not number its packets (IPv4 "atomic" datagrams, RFC 6864).
		if id == 0 {
			t.wild = true
		}
		return 0
	case d >= 0x8000:
		return 0 // an older packet, reordered before the capture point
	case d == 1:
		t.last = id
		if t.steps < 0xffff {
			t.steps++
		}
		return 0
	case d > maxIPIDGap:
		t.last = id
		t.wild = true
		return 0
	}
	t.last = id
	// Trusted: a numbering seen stepping by one, and rarely by more; or,
	// when the caller allows it (a request that completes the handshake:
	// a lost handshake ACK leaves no step of one to see first), the very
	// first step if small. A host-wide counter that happens to pass is
	// caught by requestSent's check against the client's timing.
	trusted := !t.wild && (t.steps >= 1 && 4*int(t.gaps) <= int(t.steps) || first && t.steps == 0 && t.gaps == 0 && d <= 4)
	if t.gaps < 0xffff {
		t.gaps++
	}
	if !trusted {
		return 0
	}
	return int(d) - 1
}

// Linux's retransmission timer constants (include/net/tcp.h).
const (
	linuxRTOMin = int64(200 * time.Millisecond) // TCP_RTO_MIN
	linuxRTOMax = int64(120 * time.Second)      // TCP_RTO_MAX
	// linuxTimeoutMin is what a tail loss probe adds to 2*srtt with more
	// than one segment out (TCP_TIMEOUT_MIN); one segment waits for a
	// delayed ACK (RTO_MIN) instead.
	linuxTimeoutMin = int64(2 * time.Millisecond)
)

// linuxRTO is the retransmission timeout of a Linux sender for a lone
// outstanding segment, after samples round-trip samples of about rtt each
// (the handshake's first; tcp_rtt_estimator and tcp_set_rto): the first
// sample sets the variance term to max(2*rtt, RTO_MIN); each later round
// decays it by a quarter towards max(mdev, RTO_MIN), mdev shrinking by a
// quarter per sample of a steady path. A tail loss probe for one segment
// (tcp_schedule_loss_probe: 2*srtt + RTO_MIN) fires instead when sooner.
func linuxRTO(rtt int64, samples int) int64 {
	rto := rtoOf(rtt, samples)
	return probeAfter(rtt, rto)
}

// rtoOf is the retransmission timeout alone (see linuxRTO).
func rtoOf(rtt int64, samples int) int64 {
	if rtt <= 0 {
		return int64(time.Second) // TCP_TIMEOUT_INIT: no sample at all
	}
	rttvar := max(2*rtt, linuxRTOMin)
	mdev := 2 * rtt
	for i := 1; i < samples && rttvar > linuxRTOMin; i++ {
		mdev -= mdev / 4
		rttvar -= (rttvar - max(mdev, linuxRTOMin)) / 4
	}
	return min(rtt+rttvar, linuxRTOMax)
}

// probeAfter is when a tail loss probe for one outstanding segment fires:
// 2*srtt + RTO_MIN, no later than the retransmission timer.
func probeAfter(rtt, rto int64) int64 {
	if rtt <= 0 {
		return rto
	}
	return min(rto, 2*rtt+linuxRTOMin)
}

// lostWait is how long a sender waited for a copy to get through when the
// first lost copies of a lone segment (or lost rounds of a flight of
// several, multi) were lost: Linux resends first as a tail loss probe,
// then on the retransmission timer, which doubles at each expiry.
func lostWait(rtt int64, samples, lost int, multi bool) int64 {
	rto := rtoOf(rtt, samples)
	wait := probeAfter(rtt, rto)
	if multi {
		wait = min(rto, 2*rtt+linuxTimeoutMin)
	}
	for i := 1; i < lost; i++ {
		wait += rto
		rto = min(2*rto, linuxRTOMax)
	}
	return wait
}

// resentLog remembers the server's retransmissions since the client's
// last packet: how many, and their timestamps, so that only those the
// client had received when it sent its next packet (its timestamp echo is
// at least theirs) count as having drawn an answer.
type resentLog struct {
	n     int
	ts    [4]uint32
	hasTS bool
}

func (r *resentLog) add(p *capture.Packet) {
	if r.n < len(r.ts) {
		r.ts[r.n] = p.TSVal
	}
	r.n++
	r.hasTS = p.HasTimestamps
}

// seen counts the retransmissions the client had received by ACK a.
func (r *resentLog) seen(a ackInfo) int {
	if !r.hasTS || !a.hasTS {
		return r.n
	}
	n := 0
	for i := range min(r.n, len(r.ts)) {
		if int32(a.tsEcr-r.ts[i]) >= 0 {
			n++
		}
	}
	return n
}

// explainLost takes from the client packet's lost count (pktLost) the
// packets that were ACKs: those its cumulative ACK says it sent for server
// data no captured ACK covered (one per two segments, as receivers delay
// their ACKs), and one answer per server retransmission since the client's
// last packet (a pure ACK is itself the answer to the latest). What a pure
// ACK leaves unexplained is carried to the next data packet: a request's
// first copy lost before an ACK for a tail probe passed.
func (c *conn) explainLost(p *capture.Packet, a ackInfo) {
	explained := c.srvResent.seen(a)
	pure := p.PayloadLen == 0
	if pure && explained > 0 {
		explained--
	}
	if a.off > c.lastAck && c.s2c.baseKnown {
		mss := int64(1448)
		if c.rec.MSSClient > 12 {
			mss = int64(c.rec.MSSClient - 12)
		}
		segs := (a.off - c.lastAck + mss - 1) / mss
		explained += int(min((segs+1)/2, maxIPIDGap))
	}
	left := max(c.pktLost-explained, 0)
	if pure {
		c.lostCarry = min(c.lostCarry+left, maxIPIDGap)
		c.pktLost = 0
		return
	}
	c.pktLost = left + c.lostCarry
	c.lostCarry = 0
}

// ackInfo is what one client ACK says about the server's stream.
type ackInfo struct {
	ts    int64
	off   int64 // cumulative acknowledgement, as a stream offset
	hasTS bool
	tsEcr uint32
	// dsack is the duplicate range the ACK reports, [from, to); empty
	// when it reports none.
	dsackFrom, dsackTo int64
}

// clientAckInfo reads the ACK fields of a client packet.
func (c *conn) clientAckInfo(p *capture.Packet) ackInfo {
	a := ackInfo{ts: p.Timestamp, off: c.s2c.offset(p.Ack), hasTS: p.HasTimestamps, tsEcr: p.TSEcr}
	if p.NumSACK > 0 {
		// RFC 2883: the first block reports a duplicate when it lies below
		// the cumulative ACK or inside the second block.
		b := p.SACK[0]
		from, to := c.s2c.offset(b.Left), c.s2c.offset(b.Right)
		dup := to <= a.off
		if !dup && p.NumSACK > 1 {
			from2, to2 := c.s2c.offset(p.SACK[1].Left), c.s2c.offset(p.SACK[1].Right)
			dup = from >= from2 && to <= to2
		}
		if dup && from < to {
			a.dsackFrom, a.dsackTo = from, to
		}
	}
	return a
}

// pendingRetrans is one server retransmission of bytes beyond what the
// client had acknowledged when it passed: needed if the client lacked them,
// else spurious. Its verdict waits for the client's next word on those
// bytes. A response may have several (a needed fast retransmission, then a
// tail probe after the client's ACK was lost); each is judged on its own.
type pendingRetrans struct {
	at       int64 // capture time of the copy
	from, to int64 // the bytes it carried, as stream offsets
	hasTS    bool
	tsVal    uint32
}

// maxPendingRetrans bounds the copies awaiting a verdict per response; the
// oldest is then judged needed (no evidence either way).
const maxPendingRetrans = 4

func (c *conn) addRetrans(st *txState, r pendingRetrans) {
	if len(st.rtx) >= maxPendingRetrans {
		c.settleRetrans(st, st.rtx[0], false)
		st.rtx = append(st.rtx[:0], st.rtx[1:]...)
	}
	st.rtx = append(st.rtx, r)
}

// judgeRetrans gives a verdict on st's pending copies that ACK a settles. A
// D-SACK answers one copy: the newest it overlaps that was sent at least
// half a round trip before it (the receiver answers a duplicate at once);
// that copy was spurious. Older copies of those bytes, and copies a
// cumulative ACK now covers, are judged by the ACK's timestamp echo and
// timing (answered): a copy that got no D-SACK of its own was needed,
// unless the ACK shows the client had the bytes before it arrived.
func (c *conn) judgeRetrans(st *txState, a ackInfo) {
	rtt := c.clientRTT()
	dup := -1
	if a.dsackTo > a.dsackFrom {
		for pass := 0; pass < 2 && dup < 0; pass++ {
			for i := len(st.rtx) - 1; i >= 0; i-- {
				r := &st.rtx[i]
				if r.from < a.dsackTo && r.to > a.dsackFrom && (pass == 1 || a.ts-r.at >= rtt/2) {
					dup = i
					break
				}
			}
		}
	}
	// Each transmission before the D-SACKed copy that reached the client
	// drew an answer: one for the original tail, one per copy. If the
	// client's IP IDs show as many lost packets right before this ACK,
	// every one of them arrived: the copies were all spurious (their
	// answers, D-SACKs too, were lost).
	allAnswered := dup >= 0 && c.pktGap >= dup+1
	kept := st.rtx[:0]
	for i, r := range st.rtx {
		older := dup >= 0 && i < dup && r.from < st.rtx[dup].to && r.to > st.rtx[dup].from
		switch {
		case i == dup, i < dup && allAnswered:
			c.settleRetrans(st, r, true)
		case older, a.off >= r.to:
			c.settleRetrans(st, r, r.answered(a, rtt))
		default:
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	st.rtx = kept
}

// answered judges a copy on an ACK without a D-SACK for it: spurious when
// the timestamp echo is older than the copy's (the original's ACK, which
// the copy overtook: Eifel) or when the ACK came back sooner than half the
// round trip to the client allows; else needed.
func (r pendingRetrans) answered(a ackInfo, rtt int64) (spurious bool) {
	if a.hasTS && r.hasTS {
		return int32(a.tsEcr-r.tsVal) < 0
	}
	return rtt > 0 && a.ts-r.at < rtt/2
}

// settleRetrans applies a verdict on copy r of st's response: a spurious
// copy is flagged and leaves the response's end alone; a needed one makes
// the response complete at the client only when it arrived.
func (c *conn) settleRetrans(st *txState, r pendingRetrans, spurious bool) {
	if spurious {
		st.tx.Flags |= FlagSpuriousRetrans
	} else {
		st.tx.ResponseLast = max(st.tx.ResponseLast, r.at)
	}
}

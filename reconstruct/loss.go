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
//     block (RFC 2883) reports the duplicate, and its timestamp echo
//     (RFC 7323) still names the original transmission, because a
//     receiver does not take TS.Recent from an old duplicate (the Eifel
//     test, RFC 3522). Without either option, an ACK that arrives sooner
//     than half a round trip after the retransmission cannot be its answer.
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
}

// maxIPIDGap is the largest step read as lost packets: a few copies of one
// segment and the ACKs around them. Larger steps are another numbering.
const maxIPIDGap = 8

// step records the next packet's ID and returns how many packets the
// sender sent just before it that never reached the capture point (0 when
// the numbering is not trusted).
func (t *ipidTrack) step(id uint16) int {
	if !t.seen {
		t.seen, t.last = true, id
		return 0
	}
	d := id - t.last
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
	trusted := !t.wild && t.steps >= 1 && 4*int(t.gaps) <= int(t.steps)
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
)

// linuxRTO is the retransmission timeout of a Linux sender for a lone
// outstanding segment, after samples round-trip samples of about rtt each
// (the handshake's first; tcp_rtt_estimator and tcp_set_rto): the first
// sample sets the variance term to max(2*rtt, RTO_MIN); each later round
// decays it by a quarter towards max(mdev, RTO_MIN), mdev shrinking by a
// quarter per sample of a steady path. A tail loss probe for one segment
// (tcp_schedule_loss_probe: 2*srtt + RTO_MIN) fires instead when sooner.
func linuxRTO(rtt int64, samples int) int64 {
	if rtt <= 0 {
		return int64(time.Second) // TCP_TIMEOUT_INIT: no sample at all
	}
	rttvar := max(2*rtt, linuxRTOMin)
	mdev := 2 * rtt
	for i := 1; i < samples && rttvar > linuxRTOMin; i++ {
		mdev -= mdev / 4
		rttvar -= (rttvar - max(mdev, linuxRTOMin)) / 4
	}
	rto := min(rtt+rttvar, linuxRTOMax)
	return min(rto, 2*rtt+linuxRTOMin)
}

// lostWait is how long a sender waited for its first copy to get through
// when lost copies of a segment were lost: the first timeout, then each
// retransmission timeout doubled (exponential backoff).
func lostWait(rtt int64, samples, lost int) int64 {
	rto := linuxRTO(rtt, samples)
	wait := rto
	back := max(rtt+max(2*rtt, linuxRTOMin), rto) // a probe's loss falls back to the RTO
	for i := 1; i < lost; i++ {
		back = min(2*back, linuxRTOMax)
		wait += back
	}
	return wait
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

// pendingRetrans is a server retransmission of bytes beyond what the client
// had acknowledged when it passed: needed if the client lacked them, else
// spurious. Its verdict waits for the client's next word on those bytes.
type pendingRetrans struct {
	at       int64 // capture time of the latest such retransmission
	from, to int64 // the bytes it carried, as stream offsets
	hasTS    bool
	tsVal    uint32
}

// verdict judges p on ACK a, which acknowledges its bytes or reports a
// duplicate: spurious when a D-SACK names them, when the timestamp echo is
// older than the retransmission's (Eifel), or when the ACK came back
// sooner than half the round trip to the client allows.
func (p *pendingRetrans) verdict(a ackInfo, rtt int64) (spurious bool) {
	switch {
	case a.dsackTo > a.dsackFrom && a.dsackFrom < p.to && a.dsackTo > p.from:
		return true
	case a.hasTS && p.hasTS:
		return int32(a.tsEcr-p.tsVal) < 0
	case rtt > 0 && a.ts-p.at < rtt/2:
		return true
	}
	return false
}

// decides reports whether ACK a settles p: it acknowledges all of p's bytes
// or reports some of them as duplicates.
func (p *pendingRetrans) decides(a ackInfo) bool {
	return a.off >= p.to || (a.dsackTo > a.dsackFrom && a.dsackFrom < p.to && a.dsackTo > p.from)
}

// settleRetrans gives st's pending retransmission its verdict: a spurious
// one is flagged and leaves the response's end alone; a needed one makes
// the response complete at the client only when it arrived.
func (c *conn) settleRetrans(st *txState, spurious bool) {
	if spurious {
		st.tx.Flags |= FlagSpuriousRetrans
	} else {
		st.tx.ResponseLast = max(st.tx.ResponseLast, st.rtx.at)
	}
	st.rtx = pendingRetrans{}
}

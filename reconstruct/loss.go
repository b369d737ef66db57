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
//     client's timeout follows from its own round-trip samples (clientTimer).

// ipidTrack follows one sender's IPv4 Identification values. Only a sender
// whose IDs have stepped by exactly one (a per-connection counter, as Linux
// keeps) is trusted; a host-wide counter (other connections' packets in
// between) or random IDs soon show steps that are not one and are ignored.
type ipidTrack struct {
	last  uint16
	steps uint16 // steps of exactly one
	gaps  uint16 // steps of 2..maxIPIDGap
	// jumpFrom is the ID before the step that made the numbering wild,
	// while packets from inside that step may still arrive: then the step
	// was reordering (a burst overtaken on the way), not another numbering.
	jumpFrom uint16
	jumped   bool
	seen     bool
	wild     bool // a step no per-connection counter makes: untrusted for good
	back     bool // the last packet was older than one before it (reordered)
}

// sent reports whether the last packet was sent after every one before it,
// by a trusted numbering: a late packet that is no reordered original is
// a retransmission.
func (t *ipidTrack) sent() bool {
	return !t.wild && !t.back && t.mostlyOnes()
}

// mostlyOnes: the numbering stepped by one, and rarely by more (one earlier
// gap is a loss at any rate: at 2% each way, a short connection's second
// loss came right after its first).
func (t *ipidTrack) mostlyOnes() bool {
	return t.steps >= 1 && (t.gaps <= 1 || 4*int(t.gaps) <= int(t.steps))
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
		// An older packet, reordered before the capture point. One from
		// inside the step that made the numbering wild shows that step
		// was a burst overtaken, not another numbering.
		if t.jumped && id-t.jumpFrom < t.last-t.jumpFrom {
			t.wild, t.jumped = false, false
		}
		return 0
	case d == 1:
		t.last = id
		if t.steps < 0xffff {
			t.steps++
		}
		return 0
	case d > maxIPIDGap:
		if !t.wild {
			t.jumped, t.jumpFrom = true, t.last
		}
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
	completes := first && t.steps == 0 && t.gaps == 0 && d <= 4
	trusted := !t.wild && (t.mostlyOnes() || completes)
	if t.gaps < 0xffff && !completes {
		// The gap before a request that completes the handshake is its
		// lost ACK, known for what it is: it does not count against the
		// numbering's trust.
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

// clientTimer is the client's retransmission timer as a Linux sender keeps
// it (tcp_rtt_estimator, tcp_set_rto), fed the round-trip samples the
// client itself took: the handshake's, and one per request, when the
// server's first packet acknowledging it arrived. Values are scaled as the
// kernel scales them (srtt x8, mdev and rttvar x4). The kernel's mdev_max
// is not kept: each sample starts a round (see sample), so it is
// tcp_rto_min's at a sample's start, but for the second sample's, which
// is rttvar as the first set it (sample's second).
type clientTimer struct {
	srtt, mdev, rttvar int64
	// initRTO, when set, is the timeout a fresh connection took from the
	// client's memory of the destination (rttCache), until the next sample.
	initRTO int64
}

// sample adds one round-trip sample m; second says the timer holds
// exactly one sample (conn.sampleTimer keeps count).
func (c *clientTimer) sample(m int64, second bool) {
	if m <= 0 {
		return
	}
	c.initRTO = 0
	if c.srtt == 0 {
		c.srtt = m << 3
		c.mdev = m << 1 // make sure rto = 3*rtt
		c.rttvar = max(c.mdev, linuxRTOMin)
		return
	}
	mdevMax := linuxRTOMin
	if second {
		mdevMax = c.rttvar // the first sample's round's
	}
	m -= c.srtt >> 3
	c.srtt += m
	if m < 0 {
		m = -m
		m -= c.mdev >> 2
		if m > 0 {
			m >>= 3
		}
	} else {
		m -= c.mdev >> 2
	}
	c.mdev += m
	if c.mdev > mdevMax {
		mdevMax = c.mdev
		c.rttvar = max(c.rttvar, mdevMax)
	}
	// Each request is a new round: the variance bound decays once.
	if mdevMax < c.rttvar {
		c.rttvar -= (c.rttvar - mdevMax) >> 2
	}
}

// rtt is the smoothed round trip, 0 before any sample.
func (c *clientTimer) rtt() int64 { return c.srtt >> 3 }

// rto is the retransmission timeout (TCP_TIMEOUT_INIT before any sample).
func (c *clientTimer) rto() int64 {
	if c.initRTO > 0 {
		return c.initRTO
	}
	if c.srtt == 0 {
		return int64(time.Second)
	}
	return min(c.srtt>>3+c.rttvar, linuxRTOMax)
}

// lostWait is how long the client waited for a copy to get through when the
// first lost copies of a lone segment (or lost rounds of a flight of
// several, multi) were lost: Linux resends first as a tail loss probe,
// after 2*srtt plus RTO_MIN for one segment (a delayed ACK may be pending)
// or TCP_TIMEOUT_MIN for a flight, no later than the RTO; then on the
// retransmission timer, which doubles at each expiry.
//
// spread is how far the true wait may be from it either way: the timer
// wheel fires anywhere in a granule, and wait takes the middle.
func (c *clientTimer) lostWait(lost int, multi bool) (wait, spread int64) {
	rto := c.rto()
	first := rto
	if rtt := c.rtt(); rtt > 0 {
		extra := linuxRTOMin
		if multi {
			extra = linuxTimeoutMin
		}
		first = min(rto, 2*rtt+extra)
	}
	spread = timerLate(first)
	wait = first + spread
	for i := 1; i < lost; i++ {
		late := timerLate(rto)
		wait, spread = wait+rto+late, spread+late
		rto = min(2*rto, linuxRTOMax)
	}
	return wait, spread
}

// firstWaitRange bounds the wait for the first resend of a lone segment
// (or flight, multi) whatever the client remembered of the destination: at
// least the RTO its samples give, or the tail loss probe if sooner; at
// most the probe (a longer RTO never fires first), as late as the timer
// wheel fires it.
func (c *clientTimer) firstWaitRange(multi bool) (lo, hi int64) {
	base := *c
	base.initRTO = 0
	rto := base.rto()
	rtt := c.rtt()
	if rtt == 0 {
		return rto, rto + 2*timerLate(rto)
	}
	extra := linuxRTOMin
	if multi {
		extra = linuxTimeoutMin
	}
	tlp := 2*rtt + extra
	return min(rto, tlp), tlp + 2*timerLate(tlp)
}

// Linux's timer wheel fires a timer late, never early: its expiry is
// rounded up to a jiffy and, past 63 jiffies, to the granularity of the
// wheel level it lands in (8 jiffies up to 511, 64 up to 4095, ...). At
// the 250 Hz of Debian's and most distributions' kernels, a 300 ms RTO
// fires 0-36 ms late. timerLate is the mean lateness of a timeout d, and
// as lateness is spread evenly, also how far it may be off the mean.
const linuxJiffy = int64(4 * time.Millisecond) // HZ=250

func timerLate(d int64) int64 {
	gran := linuxJiffy
	for j := d / linuxJiffy; j >= 64; j >>= 3 {
		gran <<= 3
	}
	return linuxJiffy/2 + gran/2
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
//
// A window update is an ACK too: when the client's window opened (see
// windowOpened) and no ACK of new data is owed, one lost packet was the
// update that opened it.
func (c *conn) explainLost(p *capture.Packet, a ackInfo, opened bool) {
	explained := 0
	if c.loss != nil {
		explained = c.loss.srvResent.seen(a)
	}
	pure := p.PayloadLen == 0
	if pure && explained > 0 {
		explained--
	}
	acks := 0
	if c.s2c.baseKnown {
		acks = c.acksOwed(a.off)
	}
	lost := int(c.pktLost)
	if opened && acks == 0 && lost > explained {
		explained++
	}
	if pure {
		left := max(lost-explained-acks, 0)
		// Carried only from a quiet moment: the ACK covers all the server
		// sent. Packets lost amid a transfer are ACKs (duplicate ACKs of a
		// recovery, window updates), not a request.
		if a.off < c.s2c.highest {
			left = 0
		}
		if carry := min(c.lostCarry()+left, maxIPIDGap); carry != 0 || c.loss != nil {
			c.notes().lostCarry = carry
		}
		c.pktLost = 0
		return
	}
	// A request that acknowledges data no captured ACK covered may have
	// lost an ACK before it, or its own first copy (which carried that
	// acknowledgement): only the timing can tell (requestSent). Unless the
	// client acknowledged that data at once, on its own (noteServerData):
	// then the ACKs were sent, and lost.
	left := max(lost-explained, 0)
	if acks > 0 && c.quickAcked(a.off) {
		// An answer to a retransmission is the same ACK.
		left, acks = max(left-max(acks-explained, 0), 0), 0
	}
	c.set(cfPktAckOrCopy, acks > 0 && left > 0 && left <= acks)
	c.pktLost = int8(left + c.lostCarry())
	if c.loss != nil {
		c.loss.lostCarry = 0
	}
}

// oooNote is what lossNotes says of the client's first segment that
// arrived ahead of a hole (all zero: none).
func (c *conn) oooNote() (lost int, off, at int64) {
	if c.loss == nil {
		return 0, 0, 0
	}
	return c.loss.oooLost, c.loss.oooOff, c.loss.oooAt
}

// lostCarry is the client's packets lost before pure ACKs that no ACK
// explained, carried to its next data packet.
func (c *conn) lostCarry() int {
	if c.loss == nil {
		return 0
	}
	return c.loss.lostCarry
}

// windowOpened reports whether client ACK p advertises a window at least
// twice what was left of the last one the capture saw, with every byte the
// server sent in hand. Linux sends a pure window update when a read frees
// that much (tcp_cleanup_rbuf), before the application can write its next
// request: if that update was not captured, it was lost, and it, not a
// first copy of the request, is the packet the IP IDs show missing (seen on
// the testbed: a beacon after a large response timed one RTO early).
func (c *conn) windowOpened(p *capture.Packet, a ackInfo) bool {
	h := &c.s2c
	if !c.is(cfSynSeen) || !c.is(cfSynackSeen) || !h.baseKnown || h.edge == 0 || p.Flags&capture.FlagACK == 0 {
		return false
	}
	if a.off < h.highest {
		return false
	}
	scale := int8(0)
	if c.rec.wscale[0] >= 0 && c.rec.wscale[1] >= 0 {
		scale = c.rec.wscale[0]
	}
	left := max(h.edge-h.highest, 1)
	return int64(p.Window)<<scale >= 2*left
}

// acksOwed is how many ACKs the client sent, by Linux's delayed-ACK rule
// (one per two full segments, and one for an odd last segment), for the
// server's bytes from its last captured ACK up to offset to.
func (c *conn) acksOwed(to int64) int {
	if to <= c.lastAck {
		return 0
	}
	mss := c.clientMSS()
	segs := (to - c.lastAck + mss - 1) / mss
	return int(min((segs+1)/2, maxIPIDGap))
}

// clientMSS is the payload of the server's full segments to the client
// (its MSS less TCP timestamps), 1448 when unknown.
func (c *conn) clientMSS() int64 {
	if c.rec.MSSClient > 12 {
		return int64(c.rec.MSSClient) - 12
	}
	return 1448
}

// noteServerData follows the server's new data as the client's receiver
// sees it: Linux acknowledges at once the first data of a connection and
// data that arrives after a silence longer than its retransmission timeout
// (tcp_event_data_recv: quick ACK mode), instead of delaying the ACK to ride
// on the application's next request.
func (c *conn) noteServerData(ts, off int64) {
	if c.srvDataAt == 0 || ts-c.srvDataAt > c.timer.rto() {
		c.srvQuickFrom = off
	}
	c.srvDataAt = ts
}

// quickAcked reports whether the client acknowledged the server's data
// up to off at once, segment by segment: the data resumed after a silence
// past the last captured ACK, or within the quick ACKs Linux sends after
// one (TCP_MAX_QUICKACKS, 16; seen on the HTTPS testbed: a 6-segment
// response acknowledged segment by segment, whose last ACK was lost and
// taken for the next request's first copy, 368 ms too early).
func (c *conn) quickAcked(off int64) bool {
	from := c.srvQuickFrom
	return from >= 0 && from < off && (from >= c.lastAck || off <= from+maxQuickAcks*c.clientMSS())
}

// maxQuickAcks is Linux's TCP_MAX_QUICKACKS.
const maxQuickAcks = 16

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
	tail     bool // it ends at the response's end (a tail loss probe, or the RTO's copy of the last segment)
}

// maxPendingRetrans bounds the copies awaiting a verdict per response; the
// oldest is then judged needed (no evidence either way).
const maxPendingRetrans = 4

func (c *conn) addRetrans(st *txState, r pendingRetrans) {
	l := st.retrans()
	if len(l) >= maxPendingRetrans {
		c.settleRetrans(st, l[0], false)
		l = append(l[:0], l[1:]...)
	}
	st.setRetrans(append(l, r))
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
	rtx := st.retrans()
	dup := -1
	if a.dsackTo > a.dsackFrom {
		for pass := 0; pass < 2 && dup < 0; pass++ {
			for i := len(rtx) - 1; i >= 0; i-- {
				r := &rtx[i]
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
	allAnswered := dup >= 0 && int(c.pktGap) >= dup+1
	kept := rtx[:0]
	for i, r := range rtx {
		older := dup >= 0 && i < dup && r.from < rtx[dup].to && r.to > rtx[dup].from
		switch {
		case i == dup, i < dup && allAnswered:
			c.settleRetrans(st, r, true)
		case older, a.off >= r.to:
			c.settleRetrans(st, r, r.answered(a, rtt, int(c.pktGap), c.acksOwed(r.to)))
		default:
			kept = append(kept, r)
		}
	}
	st.setRetrans(kept)
}

// answered judges a copy on an ACK without a D-SACK for it: spurious when
// the timestamp echo is older than the copy's (the original's ACK, which
// the copy overtook: Eifel) or when the ACK came back sooner than half the
// round trip to the client allows; else needed.
//
// An echo of the copy's own timestamp says nothing for a copy of the
// tail: a receiver echoes a duplicate that ends where it has acknowledged
// (RFC 7323's check passes it) as it echoes new data. Then, when client
// packets were lost right before this ACK (lost, the client's gap says),
// the lost packets - its ACKs of the bytes up to the original tail (owed)
// and its D-SACK of the copy - explain what was seen with fewer losses
// than a needed copy, which also takes the original lost on the way to
// the client. A gap no larger than the ACKs owed is as well explained by
// the ACKs of the bytes before a tail that never came (seen on the
// testbed: a needed RTO copy taken for spurious, the response 465 ms
// short).
func (r pendingRetrans) answered(a ackInfo, rtt int64, lostBefore, owed int) (spurious bool) {
	if a.hasTS && r.hasTS {
		if a.tsEcr == r.tsVal && r.tail && lostBefore >= max(2, owed+1) {
			return true
		}
		return int32(a.tsEcr-r.tsVal) < 0
	}
	return rtt > 0 && a.ts-r.at < rtt/2
}

// settleUnanswered judges the copies of st's response that no ACK
// settled: with no word from the client, it is assumed to have needed them.
func (c *conn) settleUnanswered(st *txState) {
	for _, r := range st.retrans() {
		c.settleRetrans(st, r, false)
	}
	st.setRetrans(nil)
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

package reconstruct

import (
	"math"
	"time"

	"github.com/rtmon/rtmon/capture"
)

// HandshakeWaits splits a connection's handshake waits into the two kinds
// of loss the client sat through:
//   - syn: consecutive client SYNs with no SYN/ACK between them (the SYN or
//     the path to the server was lost);
//   - synack: a client SYN retransmission after a SYN/ACK, and the server's
//     SYN/ACK retransmissions after the last SYN up to the handshake ACK
//     (the SYN/ACK never reached the client).
//
// Each wait is one gap in nanoseconds, in capture order. A handshake that
// never completed has no end to measure the server's retransmissions
// against, so they count only once Established is set. SYNLossGap and
// SYNACKLossGap are the sums of the two lists.
func HandshakeWaits(c *Connection) (syn, synack []int64) {
	s, a := c.SYNTimes, c.SYNACKTimes
	j := 0
	for i := 1; i < len(s); i++ {
		answered := false
		for j < len(a) && a[j] < s[i] {
			if a[j] >= s[i-1] {
				answered = true
			}
			j++
		}
		if answered {
			synack = append(synack, s[i]-s[i-1])
		} else {
			syn = append(syn, s[i]-s[i-1])
		}
	}
	if c.Established == 0 {
		return syn, synack
	}
	// The server's own SYN/ACK retransmissions after the last SYN.
	var prev int64
	for ; j < len(a) && a[j] <= c.Established; j++ {
		if prev != 0 {
			synack = append(synack, a[j]-prev)
		}
		prev = a[j]
	}
	return syn, synack
}

// handshakeLossGaps is the total of each kind of handshake wait.
func handshakeLossGaps(c *Connection) (syn, synack int64) {
	synWaits, synackWaits := HandshakeWaits(c)
	for _, w := range synWaits {
		syn += w
	}
	for _, w := range synackWaits {
		synack += w
	}
	return syn, synack
}

// openSide takes what a side's first SYN (the client's) or SYN/ACK (the
// server's) says: its ISN, where its byte stream starts, and its MSS.
func openSide(p *capture.Packet, isn *uint32, h *halfStream, mss *uint16) {
	*isn = p.Seq
	h.setBase(p.Seq + 1)
	if p.MSS > 0 {
		*mss = p.MSS
	}
}

// handshakeNotes is what only the handshake reads: the client's SYN
// copies and the SYN/ACKs' timestamps up to the handshake ACK, which
// reads them last. Established connections drop it (a client SYN then
// opens a new connection, and both streams' bases are known); nil reads
// as zero, the values a connection starts with.
type handshakeNotes struct {
	lastSYNSeen int64 // the latest client SYN copy, duplicates included
	// synackTS: the two latest SYN/ACKs' timestamp values and times, so the
	// handshake ACK's echo names the one it answers.
	synackTS [2]struct {
		at    int64
		tsval uint32
		tsecr uint32 // the client SYN's timestamp it echoes
	}
	clientISN, serverISN uint32
}

// notes is c's handshakeNotes, made if it has none yet: for writing.
func (c *conn) hsNotes() *handshakeNotes {
	if c.hs == nil {
		c.hs = &handshakeNotes{}
	}
	return c.hs
}

func (c *conn) clientISN() uint32 {
	if c.hs == nil {
		return 0
	}
	return c.hs.clientISN
}

func (c *conn) serverISN() uint32 {
	if c.hs == nil {
		return 0
	}
	return c.hs.serverISN
}

func (c *conn) handshake(p *capture.Packet, fromClient bool) {
	ts := p.Timestamp
	if fromClient && p.Flags&capture.FlagACK == 0 {
		hs := c.hsNotes() // a client SYN on an established connection opens another
		dup := c.is(cfSynSeen) && p.Seq == hs.clientISN && ts-hs.lastSYNSeen < duplicateSYNGap
		hs.lastSYNSeen = ts
		if dup {
			// The same SYN seen again at once (captured twice, or sent
			// as a flood): no client timer fired, so no loss.
			c.t.stats.DuplicateSYNs++
			return
		}
		if !c.is(cfSynSeen) {
			c.set(cfSynSeen, true)
			openSide(p, &hs.clientISN, &c.c2s, &c.rec.MSSClient)
			c.rec.wscale[0] = p.WindowScale
		} else if c.is(cfSynackSinceSyn) {
			inc16(&c.rec.SYNACKLosses)
		} else {
			inc16(&c.rec.SYNLosses)
		}
		c.addSYNTime(ts)
		c.set(cfSynackSinceSyn, false)
		return
	}
	if !fromClient && p.Flags&capture.FlagACK != 0 {
		if !c.is(cfSynackSeen) {
			c.set(cfSynackSeen, true)
			openSide(p, &c.hsNotes().serverISN, &c.s2c, &c.rec.MSSServer)
			c.rec.wscale[1] = p.WindowScale
		}
		if c.is(cfSynackSinceSyn) {
			// The server retransmitted its SYN/ACK: the first never got an answer.
			inc16(&c.rec.SYNACKLosses)
		} else if n := c.rec.nSYN; n > 0 {
			c.rec.RTTServer = ts - c.rec.hsAll()[n-1]
		}
		c.addSYNACKTime(ts)
		c.set(cfSynackSinceSyn, true)
		if p.HasTimestamps && c.rec.Established == 0 { // read up to the handshake ACK only
			hs := c.hsNotes()
			hs.synackTS[0] = hs.synackTS[1]
			hs.synackTS[1].at, hs.synackTS[1].tsval, hs.synackTS[1].tsecr = ts, p.TSVal, p.TSEcr
		}
	}
}

// duplicateSYNGap: a client SYN this soon after the previous copy, with the
// same ISN, is the same SYN again; no retransmission timer fires sooner
// (Linux: 1 s, at least 200 ms).
const duplicateSYNGap = int64(time.Millisecond)

// inc16 counts one more SYN loss, saturating at 65535: past it the
// count stays, never wraps to 0.
func inc16(n *uint16) {
	if *n < math.MaxUint16 {
		*n++
	}
}

// maxHandshakeTimes bounds the SYN and SYN/ACK times a connection keeps:
// Linux sends at most 7 SYNs by default (tcp_syn_retries 6), other
// stacks fewer. Past it the attempts are still counted as losses, the
// list keeps its first times and the newest, and the tracker counts the
// times it let go.
const maxHandshakeTimes = 16

func (c *conn) addSYNTime(ts int64) {
	r := &c.rec
	if r.nSYN < maxHandshakeTimes {
		r.insertHS(int(r.nSYN), ts)
		r.nSYN++
		return
	}
	c.t.stats.HandshakeTimesDropped++
	r.hsAll()[r.nSYN-1] = ts // the newest stays last: RTT and timing read it
}

func (c *conn) addSYNACKTime(ts int64) {
	r := &c.rec
	all := r.hsAll()
	if len(all)-int(r.nSYN) < maxHandshakeTimes {
		r.insertHS(len(all), ts)
		return
	}
	c.t.stats.HandshakeTimesDropped++
	all[len(all)-1] = ts // the newest stays last
}

// answeredSynAck is which SYN/ACK a handshake ACK answers, as
// connRec.answered (1 + its index in synackTimes): the one whose
// timestamp it echoes, else the latest. After a lost SYN/ACK the server
// may send two close together (its own timer's and the answer to the
// client's retransmitted SYN); the client answers the first to arrive.
func (c *conn) answeredSynAck(p *capture.Packet) uint8 {
	times := c.rec.synackTimes()
	if p.HasTimestamps && c.hs != nil {
		for _, s := range c.hs.synackTS {
			if s.at == 0 || s.tsval != p.TSEcr {
				continue
			}
			for i := len(times) - 1; i >= 0; i-- {
				if times[i] == s.at {
					return uint8(i + 1)
				}
			}
		}
	}
	return uint8(len(times))
}

// handshakeRTT is the handshake's round trip (0: none), read long after
// it from the record's times: the handshake ACK's less the SYN/ACK it
// answered. SYN/ACKs that come later are appended, so the index holds; past
// maxHandshakeTimes of them the newest replaces the last, which may then
// be read instead.
func (c *conn) handshakeRTT() int64 {
	if c.rec.answered == 0 {
		return 0
	}
	times := c.rec.synackTimes()
	return c.rec.Established - times[min(int(c.rec.answered), len(times))-1]
}

// lastSynAck is the latest SYN/ACK's capture time (0: none), the last of
// the times kept: the newest stays last (addSYNACKTime).
func (c *conn) lastSynAck() int64 {
	if t := c.rec.synackTimes(); len(t) > 0 {
		return t[len(t)-1]
	}
	return 0
}

// handshakeSample is the client's own round-trip sample of its handshake,
// given seen, the capture point's (answered SYN to handshake ACK). Linux
// takes it from the SYN/ACK's echo of its SYN's timestamp, on a 1 kHz
// clock, and sends the handshake ACK at once: the ACK's TSval less that
// echo is the sample itself. It differs from seen when the SYN or the ACK
// queued on its way to the capture point (the client's timer then runs
// longer or shorter than the capture suggests). A difference beyond what
// queues make (a clock of another rate) leaves seen; a difference within
// the clock's tick keeps seen's precision.
func (c *conn) handshakeSample(ack *capture.Packet, seen int64) int64 {
	if !ack.HasTimestamps || seen <= 0 || c.hs == nil {
		return seen
	}
	var synTS uint32
	found := false
	for _, s := range c.hs.synackTS {
		if s.at != 0 && s.tsval == ack.TSEcr {
			synTS, found = s.tsecr, true
		}
	}
	if !found || synTS == 0 {
		return seen
	}
	own := int64(int32(ack.TSVal-synTS)) * int64(time.Millisecond)
	if own < 0 || own > 2*seen+int64(time.Second) || 2*own+int64(time.Second) < seen {
		return seen
	}
	c.set(cfOwnSample, true)
	// Linux's SYN/ACK echoes the first SYN it answered, even when resent
	// for a later SYN; other stacks echo the newest. The capture's view
	// from either SYN bounds the sample: shorter than both, the ACK
	// queued on its way.
	fromLast := ack.Timestamp - c.rec.hsAll()[c.rec.nSYN-1]
	tick := 2 * int64(time.Millisecond)
	if q := min(seen, fromLast) - own; q > tick {
		c.notes().ackQueued = q
	}
	if d := own - seen; d >= -tick && d <= tick {
		return seen
	}
	return own
}

// answeredSyn is the capture time of the SYN the server first answered: the
// client's round-trip sample runs from it, for Linux takes the sample from
// the SYN/ACK's timestamp echo, and a retransmitted SYN/ACK still echoes
// that SYN (so after a lost SYN/ACK the sample spans the SYN timeout).
func (c *conn) answeredSyn() int64 {
	r := &c.rec
	syns := r.synTimes()
	answered := syns[len(syns)-1]
	if acks := r.synackTimes(); len(acks) > 0 {
		for _, syn := range syns {
			if syn <= acks[0] {
				answered = syn
			}
		}
	}
	return answered
}

package synth

import (
	"cmp"
	"math/bits"
	"slices"
	"time"
)

// A request in the extended model is planned by a small event simulation of
// the client's sender and the server's receiver, because with upstream loss
// and reordering each one's timing depends on the other's.
//
// The client is Linux's sender: segments leave back to back; a segment sent
// before one the server has acknowledged or SACKed is lost once its RACK
// deadline passes (the newer one's RTT plus a reordering window of a
// quarter of the minimum RTT, none once three segments are SACKed); with no
// such evidence a tail loss probe resends the last segment once, then the
// RTO resends the first unacknowledged one, doubling per expiry and marking
// the rest for resending when ACKs come back. RTT samples (rtoEst) come from
// the server's ACKs: from the oldest newly acknowledged segment's send, or,
// when retransmitted data is acknowledged, from the timestamp the server
// echoes. The server ACKs at once a connection's first request (quickack),
// out-of-order data (with SACK blocks), a filled hole, a second full-sized
// segment and a duplicate (with a D-SACK block); otherwise its delayed ACK
// fires after 40 ms unless the response, which carries the ACK, leaves
// first.

const srvAckDelay = 20 * time.Microsecond // the server kernel answering with an ACK

// reqResult is what sendRequest planned.
type reqResult struct {
	firstCap  int64 // first copy captured of the segment carrying the first byte
	firstArr  int64 // first request packet captured, any segment
	doneCap   int64 // the request became complete at the capture point
	lost      int   // copies lost before the capture point
	reordered bool
	hsLost    bool // the handshake ACK, planned with this request, was lost
}

type reqSeg struct {
	off, end int
	lastTx   int64 // newest transmission (client clock)
	copies   int
	done     bool // the client knows the server has it
	lost     bool // marked lost, waiting to be resent
}

const (
	simArrive uint8 = iota // a copy reaches the server
	simAck                 // a server ACK reaches the client
	simDelAck              // the server's delayed-ACK timer
	simTimer               // the client's TLP, RTO or RACK timer
)

type simEv struct {
	t    int64
	seq  int
	kind uint8
	seg  int
	// send: arrive, the copy's send time; ack, the send time of the copy
	// whose TSval the server echoes.
	send int64
	mask uint32 // ack: the segments the server had
	gen  int
}

type reqSim struct {
	g        *gen
	pc       *pconn
	req      []byte
	base     uint32
	srvTime  int64
	reorder  int64
	segs     []reqSeg
	q        []simEv
	seq      int
	pk       []int // g.ev indices of the client's packets, in send order
	res      reqResult
	lastSend int64
	// lateAt is when the first segment's held-up first copy is captured,
	// otherAt the earliest capture of any other segment.
	lateAt, otherAt int64

	// The client.
	una                  int // first segment not cumulatively acknowledged
	sentEnd              int
	tlpDone, rtoFired    bool
	recovery             bool // RACK found a loss: no tail loss probe now
	backoff              int
	rtoAt, tlpAt, rackAt int64
	rackXmit, rackRTT    int64
	timerGen             int

	// The server.
	got         uint32
	cum         int
	fullUnacked int
	delAckAt    int64
	delGen      int
	echo        int64
	quick       bool
}

// sendRequest plans req on pc, its first byte sent at t0 (client clock),
// the server answering srvTime after it is complete. reorder > 0 delays the
// first segment's first copy by that much on its way to the capture point.
// A pending handshake ACK is planned first and its loss decided here.
func (g *gen) sendRequest(pc *pconn, t0 int64, req []byte, srvTime, reorder int64) reqResult {
	r := &reqSim{g: g, pc: pc, req: req, base: pc.cRel, srvTime: srvTime, reorder: reorder, quick: !pc.hadData}
	for off := 0; off < len(req); off += mss {
		r.segs = append(r.segs, reqSeg{off: off, end: min(off+mss, len(req))})
	}
	if len(r.segs) > 32 {
		panic("synth: request of more than 32 segments") // the caller cuts requests to initCwnd
	}
	hs := -1
	if pc.hsAck != 0 {
		hs = len(g.ev)
		r.pk = append(r.pk, hs)
		g.add(pc.hsAck, pc.c, evACK, 0, nil)
	}
	for i := range r.segs {
		r.send(i, t0+int64(i)*int64(segGap))
	}
	r.rtoAt = fire(r.lastSend, pc.crto.rto())
	r.tlpAt = fire(r.lastSend, pc.crto.probeTimeout(len(r.segs)))
	r.arm()
	for len(r.q) > 0 {
		e := r.pop()
		switch e.kind {
		case simArrive:
			r.arrive(e)
		case simAck:
			r.ackIn(e)
		case simDelAck:
			if e.gen == r.delGen && r.delAckAt != 0 {
				r.ack(e.t, nil)
			}
		case simTimer:
			if e.gen == r.timerGen {
				r.fire(e.t)
			}
		}
	}
	if hs >= 0 {
		// A lost handshake ACK is only modelled when the request reaches
		// the server within its 1 s SYN/ACK timer (which would resend the
		// SYN/ACK); the request, which carries the ACK, then completes
		// the handshake and is the server's RTT sample.
		if g.wl.AckLossRate > 0 && r.res.firstArr < pc.capSA+int64(time.Second) && g.rng.Float64() < g.wl.AckLossRate {
			g.ev[hs].kind = evCLost
			r.res.hsLost = true
			g.sum.LostACKs++
			pc.srto.sample(r.res.firstArr-pc.capSA, 0, 0)
		} else {
			pc.srto.sample(pc.hsAck-pc.capSA, 0, 0)
		}
		pc.hsAck = 0
	}
	// Reordered only if a later segment did overtake the held-up one (it
	// may have been lost itself).
	r.res.reordered = r.lateAt != 0 && r.otherAt != 0 && r.otherAt < r.lateAt
	if r.res.reordered {
		// IP IDs are taken when sent; packets captured out of that order
		// keep them (see event.idOff).
		ord := slices.Clone(r.pk)
		slices.SortStableFunc(ord, func(a, b int) int { return cmp.Compare(g.ev[a].t, g.ev[b].t) })
		for rank, idx := range ord {
			sent, _ := slices.BinarySearch(r.pk, idx)
			g.ev[idx].idOff = int8(sent - rank)
		}
	}
	pc.cRel += uint32(len(req))
	pc.hadData = true
	return r.res
}

func (r *reqSim) push(e simEv) {
	r.seq++
	e.seq = r.seq
	r.q = append(r.q, e)
}

func (r *reqSim) pop() simEv {
	m := 0
	for i, e := range r.q {
		if e.t < r.q[m].t || e.t == r.q[m].t && e.seq < r.q[m].seq {
			m = i
		}
	}
	e := r.q[m]
	r.q = slices.Delete(r.q, m, m+1)
	return e
}

// send transmits segment i at t (client clock); a copy may be lost before
// the capture point, except the last allowed one.
func (r *reqSim) send(i int, t int64) {
	g, pc, s := r.g, r.pc, &r.segs[i]
	s.copies++
	s.lastTx, s.lost = t, false
	r.lastSend = t
	r.sentEnd = max(r.sentEnd, s.end)
	r.pk = append(r.pk, len(g.ev))
	if s.copies < maxCopies && g.wl.UpstreamLossRate > 0 && g.rng.Float64() < g.wl.UpstreamLossRate {
		g.add(t+pc.d, pc.c, evCLost, 0, nil)
		r.res.lost++
		g.sum.UpstreamLost++
		return
	}
	at := t + pc.d
	lag := i == 0 && s.copies == 1 && r.reorder > 0
	if lag {
		at += r.reorder
		r.lateAt = at
	} else if i > 0 && (r.otherAt == 0 || at < r.otherAt) {
		r.otherAt = at
	}
	g.add(at, pc.c, evReqAt, r.base+uint32(s.off), r.req[s.off:s.end])
	if lag {
		g.ev[len(g.ev)-1].lag = uint16(r.reorder / 1000)
	}
	r.push(simEv{t: at, kind: simArrive, seg: i, send: t})
}

// resend transmits the marked segments at now, back to back.
func (r *reqSim) resend(now int64) {
	for j := range r.segs {
		if s := &r.segs[j]; s.lost && !s.done {
			r.send(j, now)
			if j == r.una {
				r.rtoAt = fire(now, r.pc.crto.backedOff(r.backoff))
			}
			now += int64(segGap)
		}
	}
}

func (r *reqSim) offOf(k int) int { return min(k*mss, len(r.req)) }

// sack encodes the server's SACK blocks after segment latest arrived.
func (r *reqSim) sack(latest int) []byte {
	if r.got>>r.cum == 0 {
		return nil
	}
	return sackOf(len(r.segs), func(i int) bool { return r.got&(1<<i) != 0 }, r.cum, latest, r.base, len(r.req))
}

// arrive is the server receiving a copy.
func (r *reqSim) arrive(e simEv) {
	bit := uint32(1) << e.seg
	r.echo = e.send
	if r.got&bit != 0 {
		s := r.segs[e.seg]
		r.ack(e.t, dsackOf(r.base+uint32(s.off), r.base+uint32(s.end), r.sack(e.seg)))
		return
	}
	r.got |= bit
	if r.res.firstArr == 0 {
		r.res.firstArr = e.t
	}
	if e.seg == 0 {
		r.res.firstCap = e.t
	}
	was := r.cum
	for r.cum < len(r.segs) && r.got&(1<<r.cum) != 0 {
		r.cum++
	}
	done := r.cum == len(r.segs)
	if done {
		r.res.doneCap = e.t
	}
	switch s := r.segs[e.seg]; {
	case e.seg > was || r.got>>r.cum != 0 || r.cum-was > 1 || r.quick:
		r.ack(e.t, r.sack(e.seg))
	default:
		if s.end-s.off == mss {
			r.fullUnacked++
		}
		if r.fullUnacked >= 2 {
			r.ack(e.t, nil)
		} else if r.delAckAt == 0 {
			r.delAckAt = e.t + int64(delAckMax)
			r.push(simEv{t: r.delAckAt, kind: simDelAck, gen: r.delGen})
		}
	}
	if done && r.delAckAt != 0 && e.t+r.srvTime <= r.delAckAt {
		// The response leaves first and carries the ACK.
		r.delAckAt = 0
		r.delGen++
		r.push(simEv{t: e.t + r.srvTime + r.pc.d, kind: simAck, mask: r.got, send: r.echo})
	}
}

// ack is the server sending a pure ACK at t, with SACK blocks.
func (r *reqSim) ack(t int64, sack []byte) {
	at := t + int64(srvAckDelay)
	r.g.add(at, r.pc.c, evSAckTo, r.base+uint32(r.offOf(r.cum)), sack)
	r.fullUnacked = 0
	if r.delAckAt != 0 {
		r.delAckAt = 0
		r.delGen++
	}
	r.push(simEv{t: at + r.pc.d, kind: simAck, mask: r.got, send: r.echo})
}

// ackIn is the client receiving an ACK: RTT sample, RACK, timers.
func (r *reqSim) ackIn(e simEv) {
	n := len(r.segs)
	newly := false
	for j := range r.segs {
		if s := &r.segs[j]; e.mask&(1<<j) != 0 && !s.done {
			s.done, newly = true, true
			if s.lastTx > r.rackXmit {
				r.rackXmit, r.rackRTT = s.lastTx, e.t-s.lastTx
			}
		}
	}
	cum := min(bits.TrailingZeros32(^e.mask), n)
	advanced := cum > r.una
	if advanced {
		m := e.t - r.segs[r.una].lastTx
		for _, s := range r.segs[r.una:cum] {
			if s.copies > 1 {
				m = e.t - e.send // Karn: the timestamp echo instead
				break
			}
		}
		r.pc.crto.sample(m, r.base+uint32(r.offOf(cum)), r.base+uint32(r.sentEnd))
		r.una, r.backoff = cum, 0
	}
	if r.una == n || !newly && !advanced {
		return
	}
	r.rack(e.t)
	if advanced {
		r.rtoAt = fire(e.t, r.pc.crto.rto())
		if r.rtoFired {
			r.resend(e.t)
		}
		if r.tlpOK() {
			out := 0
			for _, s := range r.segs[r.una:] {
				if !s.done {
					out++
				}
			}
			r.tlpAt = fire(e.t, r.pc.crto.probeTimeout(out))
		}
	}
	r.arm()
}

// rack marks lost the segments sent before the newest delivered one whose
// reordering window has passed, resends them, and sets the reorder timer
// for the others.
func (r *reqSim) rack(now int64) {
	if r.rackXmit == 0 {
		return
	}
	reo, sacked := r.pc.crto.minRTT/4, 0
	for _, s := range r.segs[r.una:] {
		if s.done {
			sacked++
		}
	}
	if sacked >= 3 {
		reo = 0
	}
	r.rackAt = 0
	lost := false
	for j := r.una; j < len(r.segs); j++ {
		s := &r.segs[j]
		if s.done || s.lost || s.lastTx >= r.rackXmit {
			continue
		}
		if at := s.lastTx + r.rackRTT + reo; at <= now {
			s.lost, lost = true, true
		} else if r.rackAt == 0 || at < r.rackAt {
			r.rackAt = at
		}
	}
	if lost {
		r.recovery = true
		r.resend(now)
	}
}

func (r *reqSim) tlpOK() bool {
	if r.tlpDone || r.rtoFired || r.recovery {
		return false
	}
	for _, s := range r.segs[r.una:] {
		if s.done {
			return false // SACKed data: RACK's job
		}
	}
	return true
}

// arm schedules the client's earliest timer.
func (r *reqSim) arm() {
	r.timerGen++
	if r.una == len(r.segs) {
		return
	}
	at := r.rtoAt
	if r.tlpOK() {
		at = min(at, r.tlpAt)
	}
	if r.rackAt != 0 {
		at = min(at, r.rackAt)
	}
	r.push(simEv{t: at, kind: simTimer, gen: r.timerGen})
}

// fire runs the client's timer at now.
func (r *reqSim) fire(now int64) {
	if r.una == len(r.segs) {
		return // all acknowledged since the timer was set
	}
	switch {
	case r.rackAt != 0 && now >= r.rackAt:
		r.rack(now)
	case r.tlpOK() && now >= r.tlpAt:
		r.tlpDone = true
		last := len(r.segs) - 1
		for r.segs[last].done {
			last--
		}
		r.send(last, now)
		r.rtoAt = fire(now, r.pc.crto.backedOff(r.backoff))
	case now >= r.rtoAt:
		r.rtoFired = true
		r.backoff++
		for j := r.una; j < len(r.segs); j++ {
			if !r.segs[j].done {
				r.segs[j].lost = true
			}
		}
		r.send(r.una, now)
		r.rtoAt = fire(now, r.pc.crto.backedOff(r.backoff))
	}
	r.arm()
}

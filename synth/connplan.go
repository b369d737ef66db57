package synth

import (
	"cmp"
	"net/netip"
	"slices"
)

// Planning one connection: its handshake, each request's exchange with the
// server's segments and the client's ACKs, and the keep-alive close.

// pconn is a connection being planned: the generator's own view of the
// sequence space, since the Conn only advances when events are written.
type pconn struct {
	c       *Conn
	d       int64 // one-way client delay
	start   int64 // client's first SYN send time
	ready   int64 // handshake complete at the client
	syns    int
	synacks int
	sSYN    int64
	cRel    uint32
	sRel    uint32
	used    bool
	free    int64 // client time it can send the next request
	lastCap int64 // capture time of the last packet planned

	// Extended model.
	srv   netip.AddrPort
	capSA int64 // capture time of the accepted SYN/ACK
	// hsAck is the handshake ACK's capture time while it is unplanned: its
	// loss is decided with the first request, which then completes the
	// handshake at the server.
	hsAck      int64
	crto, srto rtoEst // the client's and the server's retransmission timers
	hadData    bool   // the server has had data: its quickack mode is over
	// restart: the server retransmitted its SYN/ACK more than once, so its
	// first response starts with a window of one segment (Linux
	// tcp_init_transfer, RFC 5681 3.1).
	restart bool
	tail    *tailLoss // the last response's final ACK was lost
	closeAt int64     // planned keep-alive close (no-Referer clients)
	closed  bool
}

// open plans a handshake started by the client at tc (client clock).
func (g *gen) open(cl *client, srv netip.AddrPort, tc int64) *pconn {
	cl.port++
	if cl.port < 32768 || cl.port > 60999 {
		cl.port = 32768
	}
	c := g.w.Conn(netip.AddrPortFrom(cl.addr, cl.port), srv, g.rng.Uint32(), g.rng.Uint32())
	pc := &pconn{c: c, d: cl.rtt / 2, start: tc, srv: srv}
	g.sum.Connections++
	answered := int64(-1) // send time of the first SYN the server answered
	if g.ext {
		c.Opts.IPID = g.wl.IPID
		c.Opts.ClientRTT = 2 * pc.d
		if g.wl.IPID == IPIDPerConn {
			c.ClientIPID, c.ServerIPID = uint16(g.rng.Uint32()), uint16(g.rng.Uint32())
		}
	}
	for attempt := 0; ; attempt++ {
		last := attempt == len(synGaps)
		capSYN := tc + pc.d
		if attempt == 0 {
			pc.sSYN = capSYN
		} else {
			g.sum.SYNRetrans++
		}
		g.add(capSYN, c, evSYN, 0, nil)
		pc.syns++
		if !last && g.rng.Float64() < g.wl.SYNLossRate {
			tc += int64(synGaps[attempt])
			continue
		}
		capSA := capSYN + int64(synackDelay)
		if answered < 0 {
			answered = tc
		}
		g.add(capSA, c, evSYNACK, 0, nil)
		pc.synacks++
		g.sum.SYNACKs++
		if !last && g.rng.Float64() < g.wl.SYNACKLossRate {
			tc += int64(synGaps[attempt])
			continue
		}
		pc.ready = capSA + pc.d
		pc.lastCap = capSA + 2*pc.d
		pc.restart = pc.synacks > 2
		pc.free = pc.ready
		if g.ext {
			// The client's RTT sample comes from the SYN/ACK's timestamp
			// echo, which names the first SYN the server answered: after
			// a lost SYN/ACK it spans the client's SYN timeout (Linux then
			// starts with an RTO of about 3 s; with a SYN dropped at the
			// server the sample is one round trip).
			pc.capSA, pc.hsAck = capSA, pc.lastCap
			pc.crto.sample(pc.ready-answered, 0, 0)
			if crtt := g.recalled(destKey{cl.addr, srv.Addr()}, pc.ready); crtt > pc.crto.srtt {
				pc.crto.initRTO = crtt + max(2*crtt, int64(minRTO))
			}
			return pc
		}
		g.add(pc.lastCap, c, evACK, 0, nil)
		return pc
	}
}

// exchange plans one request/response on pc, the request sent at pc.free
// (client clock), and returns its truth.
func (g *gen) exchange(pc *pconn, req, head []byte, bodyLen int, srvTime int64) TruthRecord {
	d := pc.d
	rtt := 2 * d
	tReq := pc.free
	capReq := tReq + d
	g.add(capReq, pc.c, evReq, 0, req)
	pc.cRel += uint32(len(req))
	tr := TruthRecord{NewConn: !pc.used, RTT: rtt, RequestBytes: len(req), ServerTime: srvTime,
		ReqFirstCap: capReq, ReqLastCap: capReq, Start: tReq}
	if !pc.used {
		tr.Start, tr.Tconn = pc.start, pc.ready-pc.start
		tr.SYNs, tr.SYNACKs, tr.SYNCap = pc.syns, pc.synacks, pc.sSYN
	}
	pc.used = true
	if srvTime > int64(delAckMax) {
		g.add(capReq+int64(delAckMax), pc.c, evSAck, 0, nil)
	}
	respStart := capReq + srvTime
	g.respond(pc, &tr, -1, head, nil, len(head)+bodyLen, respStart)
	tr.Trequest = 0
	tr.Tserver = (respStart + d) - tReq
	tr.Ttransfer = tr.End - (respStart + d)
	return tr
}

// sendSpan is the time from a response's first segment to its last
// segment's first transmission when slow start begins at cwnd segments and
// nothing is lost: the schedule respond follows.
func sendSpan(nseg, cwnd int, rtt int64) int64 {
	var seg int
	var round int64
	for {
		n := min(cwnd, nseg-seg)
		if seg+n >= nseg {
			return round + int64(n-1)*int64(segGap)
		}
		seg += n
		round = max(round+rtt, round+int64(n)*int64(segGap))
		cwnd *= 2
	}
}

// response is one response respond is planning.
type response struct {
	pc      *pconn
	tr      *TruthRecord
	base    uint32 // the server's relative sequence number of its first byte
	total   int
	nseg    int
	payload func(i int) []byte // segment i's bytes
	arrive  []int64            // each segment's (last copy's) arrival at the client
	// The extended model needs each segment's first transmission, for the
	// server's RTT samples (none from retransmitted data: Karn).
	tx     []int64
	retx   []bool
	lastTx int64 // capture time of the last transmission
}

// respond plans a response of total bytes (head, then body or filler when
// body is nil) whose first byte leaves at respStart, and the client's ACKs;
// it fills tr's response fields and End. rec is tr's index in g.recs
// (extended model: a lost final ACK leaves a tail to resolve).
func (g *gen) respond(pc *pconn, tr *TruthRecord, rec int, head, body []byte, total int, respStart int64) {
	r := &response{pc: pc, tr: tr, base: pc.sRel, total: total, nseg: (total + mss - 1) / mss,
		payload: segmenter(head, body, total)}
	r.arrive = make([]int64, r.nseg)
	if g.ext {
		r.tx, r.retx = make([]int64, r.nseg), make([]bool, r.nseg)
	}
	g.sendResponse(r, respStart)
	a := g.ackResponse(r)
	pc.sRel += uint32(total)
	pc.free = a.end
	pc.lastCap = max(a.ackCap, r.lastTx, a.lastClient)
	if g.ext && a.ackCap == 0 {
		// The ACK of the last byte was lost: the server's timers run from
		// its last transmission or the last ACK it had.
		pc.tail = &tailLoss{rec: rec, base: r.base, total: total, nseg: r.nseg, acked: a.srvAcked,
			t0: max(r.lastTx, a.lastAck), payload: r.payload}
	}
	tr.ResponseBytes, tr.BodyBytes = total, total-len(head)
	tr.RespFirstCap, tr.RespLastCap, tr.AckCap = respStart, r.lastTx, a.ackCap
	tr.End = a.end
}

// segmenter returns the bytes of a response's segment i: head then body,
// or head then filler when body is nil.
func segmenter(head, body []byte, total int) func(i int) []byte {
	var wire []byte
	if body != nil {
		wire = append(append(make([]byte, 0, total), head...), body...)
	}
	return func(i int) []byte {
		off, end := i*mss, min((i+1)*mss, total)
		if wire != nil {
			return wire[off:end]
		}
		if off >= len(head) {
			return filler[off-len(head) : end-len(head)]
		}
		p := make([]byte, 0, end-off)
		p = append(p, head[off:min(end, len(head))]...)
		if end > len(head) {
			p = append(p, filler[:end-len(head)]...)
		}
		return p
	}
}

// sendResponse plans the server's segments in slow start from respStart,
// with their losses after the capture point and retransmissions.
func (g *gen) sendResponse(r *response, respStart int64) {
	pc, tr, nseg := r.pc, r.tr, r.nseg
	rtt := 2 * pc.d
	r.lastTx = respStart
	cwnd, seg, round := initCwnd, 0, respStart
	if pc.restart {
		pc.restart, cwnd = false, 1
		tr.WindowRestart = sendSpan(nseg, 1, rtt) - sendSpan(nseg, initCwnd, rtt)
	}
	for seg < nseg {
		n := min(cwnd, nseg-seg)
		for i := range n {
			s := seg + i
			t := round + int64(i)*int64(segGap)
			p := r.payload(s)
			g.add(t, pc.c, evData, r.base+uint32(s*mss), p)
			final := t
			if g.rng.Float64() < g.wl.DataLossRate {
				// Lost after the capture point: fast retransmit when the
				// dupACKs of later segments arrive, else an RTO.
				if s < nseg-1 {
					final = t + rtt + int64(segGap)
				} else {
					final = t + max(rtt+int64(minRTO), 2*rtt)
				}
				g.add(final, pc.c, evRetrans, r.base+uint32(s*mss), p)
				g.sum.DataRetrans++
				tr.RetransBytes += len(p)
			}
			if r.tx != nil {
				r.tx[s], r.retx[s] = t, final != t
			}
			r.arrive[s] = final + pc.d
			r.lastTx = max(r.lastTx, final)
		}
		seg += n
		round = max(round+rtt, round+int64(n)*int64(segGap))
		cwnd *= 2
	}
}

// responseAcks is what the client's ACKs of a response came to.
type responseAcks struct {
	end        int64 // the last segment's arrival at the client
	ackCap     int64 // capture time of the ACK of the last byte (0: lost)
	lastClient int64 // capture time of the client's last ACK (extended model)
	// The server's view in the extended model: segments it has seen
	// acknowledged, and when it last saw them advance.
	srvAcked int
	lastAck  int64
}

// ackResponse plans the client's ACKs: every second in-order segment,
// immediately on a hole (dupACK) and when a hole is filled; always for the
// last byte.
func (g *gen) ackResponse(r *response) responseAcks {
	pc, nseg := r.pc, r.nseg
	order := make([]int, nseg)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(r.arrive[a], r.arrive[b]) })
	got := make([]bool, nseg)
	cum, cnt := 0, 0
	var a responseAcks
	sent, maxGot := 0, -1 // the server's sent segments by an ACK's time; the highest segment the client has
	for _, s := range order {
		got[s] = true
		hole := s != cum
		before := cum
		for cum < nseg && got[cum] {
			cum++
		}
		cnt++
		a.end = max(a.end, r.arrive[s])
		if !hole && cum-before <= 1 && cnt%2 != 0 && cum != nseg {
			if g.ext {
				maxGot = max(maxGot, s)
			}
			continue
		}
		ackRel := r.base + uint32(min(cum*mss, r.total))
		t := r.arrive[s] + pc.d
		if !g.ext {
			g.add(t, pc.c, evCAckTo, ackRel, nil)
			if cum == nseg && a.ackCap == 0 {
				a.ackCap = t
			}
			continue
		}
		maxGot = max(maxGot, s)
		a.lastClient = t
		switch {
		case maxGot >= cum:
			// Data above a hole: a dupACK with SACK blocks, never lost
			// here (the fast retransmits above assume it arrives).
			g.add(t, pc.c, evCAckSACK, ackRel, sackOf(nseg, func(i int) bool { return got[i] }, cum, s, r.base, r.total))
		case g.wl.AckLossRate > 0 && g.rng.Float64() < g.wl.AckLossRate:
			g.add(t, pc.c, evCLost, 0, nil)
			r.tr.LostACKs++
			g.sum.LostACKs++
			continue
		default:
			g.add(t, pc.c, evCAckTo, ackRel, nil)
		}
		if cum == nseg && a.ackCap == 0 {
			a.ackCap = t
		}
		if cum > a.srvAcked {
			for sent < nseg && r.tx[sent] <= t {
				sent++
			}
			if !slices.Contains(r.retx[a.srvAcked:cum], true) {
				pc.srto.sample(t-r.tx[a.srvAcked], ackRel, r.base+uint32(min(sent*mss, r.total)))
			}
			a.srvAcked, a.lastAck = cum, t
		}
	}
	return a
}

// close plans the server's keep-alive timeout close and the client's answer.
func (g *gen) close(pc *pconn) {
	t := pc.lastCap + int64(keepAlive)
	g.add(t, pc.c, evSFIN, 0, nil)
	g.add(t+2*pc.d, pc.c, evCFIN, 0, nil)
	g.add(t+2*pc.d+int64(synackDelay), pc.c, evSAck, 0, nil)
	if g.ext {
		// That ACK reaches the client one way later: it stores its RTT.
		g.remember(destKey{pc.c.ClientAddr.Addr(), pc.srv.Addr()}, t+3*pc.d+int64(synackDelay), pc.crto.srtt)
	}
}

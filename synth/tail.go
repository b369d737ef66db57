package synth

import "math"

// tailLoss is a response whose last client ACK was lost before the capture
// point. The client has every byte; the server does not know it and its
// timers will resend the tail, unless a later client packet acknowledges
// everything first.
type tailLoss struct {
	rec   int // the response's truth record in g.recs
	base  uint32
	total int
	nseg  int
	acked int   // segments the server has seen acknowledged (its snd_una)
	t0    int64 // the server's last transmission or ACK received: its timers run from here
	// payload gives segment i's bytes again.
	payload func(int) []byte
}

// noNext is resolveTail's next when no client packet follows.
const noNext = math.MaxInt64

// resolveTail plans pc's pending tail up to next, the capture time of the
// next client packet to reach the server (it acknowledges everything).
//
// Linux's server: a tail loss probe resends the last segment after
// rtoEst.probeTimeout (two smoothed RTTs plus 200 ms for one outstanding
// segment, 2 ms for more, at most the RTO); then the RTO resends the first
// unacknowledged segment, doubling each time. The client answers every copy
// at once with a duplicate ACK whose first SACK block reports the copy
// (D-SACK, RFC 2883); that ACK may be lost too. Its timestamp echo is the
// probe's TSval when the copy ends where the client's lost ACK did (the
// copy passes the client's sequence check, and RFC 7323 takes TS.Recent
// from it - verified on Linux 6.18), and stays older for a copy that ends
// below (an old duplicate: ServerDupAt). The client had the bytes already,
// so its End does not move.
func (g *gen) resolveTail(pc *pconn, next int64) {
	tl := pc.tail
	pc.tail = nil
	tr := &g.recs[tl.rec]
	at := fire(tl.t0, pc.srto.probeTimeout(tl.nseg-tl.acked))
	for k := 0; at < next; k++ {
		s := tl.nseg - 1
		if k > 0 {
			s = tl.acked
		}
		p := tl.payload(s)
		rel := tl.base + uint32(s*mss)
		if s == tl.nseg-1 {
			g.add(at, pc.c, evRetrans, rel, p)
		} else {
			g.add(at, pc.c, evDupRetrans, rel, p)
		}
		tr.SpuriousRetrans = true
		tr.RetransBytes += len(p)
		tr.RespLastCap = max(tr.RespLastCap, at)
		g.sum.SpuriousRetrans++
		ack := at + 2*pc.d
		pc.lastCap = max(pc.lastCap, ack)
		if k < maxCopies-1 && g.wl.AckLossRate > 0 && g.rng.Float64() < g.wl.AckLossRate {
			g.add(ack, pc.c, evCLost, 0, nil)
			tr.LostACKs++
			g.sum.LostACKs++
		} else {
			g.add(ack, pc.c, evCAckSACK, tl.base+uint32(tl.total), dsackOf(rel, rel+uint32(len(p)), nil))
			tr.AckCap = ack
			break
		}
		if k == 0 {
			at = fire(at, pc.srto.rto())
		} else {
			at = fire(at, pc.srto.backedOff(k))
		}
	}
	if next != noNext && (tr.AckCap == 0 || next < tr.AckCap) {
		tr.AckCap = next
	}
}

package reconstruct

import "math"

// The client's round trip, timed from the server's segments to the ACKs
// that cover them.

// clientRTT is the round trip between the capture point and the client: the
// smallest sample of the handshake (SYN/ACK out, ACK back) and of data/ACK
// pairs. Queueing or a delayed ACK only ever inflates a sample, so the
// minimum is the best estimate of the path itself.
func (c *conn) clientRTT() int64 {
	data := int64(0)
	if c.flowState != nil { // else no data: no data sample
		data = c.dataRTT
	}
	switch {
	case c.handshakeRTT > 0 && data > 0:
		return min(c.handshakeRTT, data)
	case c.handshakeRTT > 0:
		return c.handshakeRTT
	}
	return data
}

// rttProbes remembers when recent server segments left, so the client's ACKs
// yield RTT samples when no handshake was captured. The newest segment an ACK
// covers gives the sample: the client acknowledges on receipt (or within its
// delayed-ACK timer, which the minimum over samples filters out). With more
// segments in flight than the ring holds (a bulk transfer), the ring's
// entries are gone before their ACKs come back; one segment is then timed
// until its ACK arrives (as TCP senders time one segment per round trip),
// a sample that may include the gap to the segment that triggered the ACK.
//
// The ring is a shift, newest first, and keeps for each segment how far
// its end falls short of math.MaxInt64: the zero value, an empty or
// forgotten slot, is then covered by no ACK, with no count or head to
// keep, and the probes take 64 B.
type rttProbes struct {
	ring [3]struct{ short, ts int64 } // end = math.MaxInt64 - short
	held struct{ end, ts int64 }      // ts 0: none
}

func (r *rttProbes) sent(end, ts int64) {
	r.ring[2], r.ring[1] = r.ring[1], r.ring[0]
	r.ring[0].short, r.ring[0].ts = math.MaxInt64-end, ts
	if r.held.ts == 0 {
		r.held.end, r.held.ts = end, ts
	}
}

// acked returns the send time of the newest segment ending at or before off
// and forgets every segment the ACK covers.
func (r *rttProbes) acked(off int64) (int64, bool) {
	held := r.held
	if held.ts != 0 && held.end <= off {
		r.held.ts = 0
	}
	for i := range r.ring {
		if math.MaxInt64-r.ring[i].short <= off {
			ts := r.ring[i].ts
			for j := i; j < len(r.ring); j++ {
				r.ring[j].short = 0 // older entries are covered too
			}
			return ts, true
		}
	}
	if held.ts != 0 && held.end <= off {
		return held.ts, true
	}
	return 0, false
}

func (r *rttProbes) reset() {
	r.ring[0].short, r.ring[1].short, r.ring[2].short, r.held.ts = 0, 0, 0, 0
}

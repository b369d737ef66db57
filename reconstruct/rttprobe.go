package reconstruct

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
	switch hs := c.handshakeRTT(); {
	case hs > 0 && data > 0:
		return min(hs, data)
	case hs > 0:
		return hs
	}
	return data
}

// rttProbes: the server log (serverLog) remembers when recent server
// segments left, so the client's ACKs yield RTT samples when no handshake
// was captured. The newest segment an ACK covers gives the sample: the
// client acknowledges on receipt (or within its delayed-ACK timer, which
// the minimum over samples filters out). With more segments in flight
// than the log holds (a bulk transfer), its entries are gone before their
// ACKs come back; one segment is then timed until its ACK arrives (as TCP
// senders time one segment per round trip), held, a sample that may
// include the gap to the segment that triggered the ACK.

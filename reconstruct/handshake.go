package reconstruct

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

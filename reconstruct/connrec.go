package reconstruct

import "net/netip"

// connRec is what an open connection keeps of its Connection record: the
// fields its packets set. Those derived from the rest of the state (byte
// counts, Tconn, RTTClient, ...) and the TLS ones (in tlsSession, which
// only TLS connections have) are filled in when the record is emitted,
// so every open connection does not carry them (issue 15).
type connRec struct {
	idHash                  uint64 // see conn.id
	Client, Server          netip.Addr
	SYNTimes, SYNACKTimes   []int64
	Interface               int
	Established, FirstSeen  int64
	LastSeen, Closed        int64
	SYNLosses, SYNACKLosses int
	RTTServer               int64
	ClientPort, ServerPort  uint16
	MSSClient, MSSServer    uint16 // as the SYN options carry them
	Flags                   Flags
	idMade                  bool // idHash is made
}

// record is the connection's Connection record, its derived fields
// filled in.
func (c *conn) record() Connection {
	r := &c.rec
	id := c.id()
	rtt := c.clientRTT()
	var tconn int64
	if len(r.SYNTimes) > 0 {
		if r.Established > 0 {
			tconn = max(c.connectedAt()-r.SYNTimes[0], 0)
		} else {
			r.Flags |= FlagIncomplete // the handshake never completed
		}
	}
	if c.handshakeRTT == 0 {
		r.Flags |= FlagRTTEstimated
	}
	out := Connection{
		ID:           id,
		Interface:    r.Interface,
		Client:       r.Client,
		ClientPort:   r.ClientPort,
		Server:       r.Server,
		ServerPort:   r.ServerPort,
		SYNTimes:     r.SYNTimes,
		SYNACKTimes:  r.SYNACKTimes,
		Established:  r.Established,
		FirstSeen:    r.FirstSeen,
		LastSeen:     r.LastSeen,
		Closed:       r.Closed,
		SYNLosses:    r.SYNLosses,
		SYNACKLosses: r.SYNACKLosses,
		RTTServer:    r.RTTServer,
		MSSClient:    int(r.MSSClient),
		MSSServer:    int(r.MSSServer),
		Flags:        r.Flags,
		RTTClient:    rtt,
		Tconn:        tconn,
		BytesClient:  c.c2s.bytes,
		BytesServer:  c.s2c.bytes,
		RetransBytes: c.c2s.retransBytes + c.s2c.retransBytes,
		Transactions: c.nextIndex,
	}
	if s := c.tls; s != nil {
		out.TLSVersion, out.SNI, out.ALPN, out.Ttls = s.version, s.sni, s.alpn, s.ttls
	}
	out.SYNLossGap, out.SYNACKLossGap = handshakeLossGaps(&out)
	return out
}

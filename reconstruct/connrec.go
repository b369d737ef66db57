package reconstruct

import (
	"net/netip"
	"slices"
)

// connRec is what an open connection keeps of its Connection record: the
// fields its packets set. Those derived from the rest of the state (byte
// counts, Tconn, RTTClient, ...) and the TLS ones (in tlsSession, which
// only TLS connections have) are filled in when the record is emitted,
// so every open connection does not carry them (issue 15).
type connRec struct {
	// firstSeq is the first packet's sequence number, which the stable
	// id's hash takes (conn.id): 4 bytes kept instead of the 8 of the
	// hash, which each record makes again.
	// The addresses as 16 bytes and a kind (see packAddr): netip.Addr
	// would add a zone pointer each, which the capture never sets.
	client, server [16]byte
	// The SYN times, then the SYN/ACK times, nSYN of the first (see
	// hsAll): in hsFew while there are at most two, the one SYN and
	// SYN/ACK of almost every connection, so that it needs no allocation
	// of its own; in *hsMore once there are more (a lost SYN or SYN/ACK).
	hsFew                  [2]int64
	hsMore                 *[]int64
	Established, FirstSeen int64
	LastSeen, Closed       int64
	RTTServer              int64
	// Interface as an int32: an interface index. The SYN counts as
	// uint16, saturating (inc16): a client gives up after a few SYNs, a
	// flood's copies of one 4-tuple past 65535 are all counted as that.
	Interface               int32
	firstSeq                uint32
	SYNLosses, SYNACKLosses uint16
	ClientPort, ServerPort  uint16
	MSSClient, MSSServer    uint16 // as the SYN options carry them
	Flags                   Flags
	clientKind, serverKind  uint8
	nSYN                    uint8 // at most maxHandshakeTimes
	nFew                    uint8 // times in hsFew
	// wscale: the window scale each side offered in its SYN (client) and
	// SYN/ACK (server), -1 absent; windows scale only when both did.
	wscale [2]int8
	twin   uint8 // earlier connections with the same id inputs (see Tracker.instant)
	// answered is 1 + the index in synackTimes of the SYN/ACK the
	// handshake ACK answered, 0 when the handshake gave no round trip
	// (see conn.handshakeRTT).
	answered uint8
}

// hsAll is the SYN times, then the SYN/ACK times, for reading.
func (r *connRec) hsAll() []int64 {
	if r.hsMore != nil {
		return *r.hsMore
	}
	return r.hsFew[:r.nFew:r.nFew]
}

// insertHS inserts handshake time ts at index i of hsAll.
func (r *connRec) insertHS(i int, ts int64) {
	if r.hsMore == nil && int(r.nFew) < len(r.hsFew) {
		copy(r.hsFew[i+1:r.nFew+1], r.hsFew[i:r.nFew])
		r.hsFew[i] = ts
		r.nFew++
		return
	}
	if r.hsMore == nil {
		more := slices.Clone(r.hsFew[:r.nFew])
		r.hsMore = &more
	}
	*r.hsMore = slices.Insert(*r.hsMore, i, ts)
}

// synTimes is every SYN with the connection's ISN (nil for none), as
// Connection.SYNTimes.
func (r *connRec) synTimes() []int64 {
	if r.nSYN == 0 {
		return nil
	}
	return r.hsAll()[:r.nSYN:r.nSYN]
}

// synackTimes is every SYN/ACK (nil for none), as Connection.SYNACKTimes.
func (r *connRec) synackTimes() []int64 {
	all := r.hsAll()
	if len(all) == int(r.nSYN) {
		return nil
	}
	return all[r.nSYN:]
}

// ownTimes is synTimes and synackTimes copied, for a record: hsFew is
// the connection's, and a late SYN may still change it.
func (r *connRec) ownTimes() (syns, synacks []int64) {
	all := slices.Clone(r.hsAll())
	if r.nSYN > 0 {
		syns = all[:r.nSYN:r.nSYN]
	}
	if len(all) > int(r.nSYN) {
		synacks = all[r.nSYN:]
	}
	return syns, synacks
}

// Address kinds in connRec: none (the zero Addr), IPv4, IPv6 (which
// includes IPv4-mapped IPv6, kept apart from IPv4 as netip.Addr does).
const (
	addrNone uint8 = iota
	addrV4
	addrV6
)

// packAddr is a as connRec keeps it. The zone is dropped: addresses
// decoded from packets have none.
func packAddr(a netip.Addr) ([16]byte, uint8) {
	switch {
	case a.Is4():
		return a.As16(), addrV4
	case a.IsValid():
		return a.As16(), addrV6
	}
	return [16]byte{}, addrNone
}

func unpackAddr(b [16]byte, kind uint8) netip.Addr {
	switch kind {
	case addrV4:
		return netip.AddrFrom16(b).Unmap()
	case addrV6:
		return netip.AddrFrom16(b)
	}
	return netip.Addr{}
}

// Client and Server are the connection's addresses.
func (r *connRec) Client() netip.Addr { return unpackAddr(r.client, r.clientKind) }
func (r *connRec) Server() netip.Addr { return unpackAddr(r.server, r.serverKind) }

// record is the connection's Connection record, its derived fields
// filled in.
func (c *conn) record() Connection {
	r := &c.rec
	id := c.id()
	rtt := c.clientRTT()
	var tconn int64
	if len(r.synTimes()) > 0 {
		if r.Established > 0 {
			tconn = max(c.connectedAt()-r.synTimes()[0], 0)
		} else {
			r.Flags |= FlagIncomplete // the handshake never completed
		}
	}
	if c.handshakeRTT() == 0 {
		r.Flags |= FlagRTTEstimated
	}
	syns, synacks := r.ownTimes()
	out := Connection{
		ID:           id,
		Interface:    int(r.Interface),
		Client:       r.Client(),
		ClientPort:   r.ClientPort,
		Server:       r.Server(),
		ServerPort:   r.ServerPort,
		SYNTimes:     syns,
		SYNACKTimes:  synacks,
		Established:  r.Established,
		FirstSeen:    r.FirstSeen,
		LastSeen:     r.LastSeen,
		Closed:       r.Closed,
		SYNLosses:    int(r.SYNLosses),
		SYNACKLosses: int(r.SYNACKLosses),
		RTTServer:    r.RTTServer,
		MSSClient:    int(r.MSSClient),
		MSSServer:    int(r.MSSServer),
		Flags:        r.Flags,
		RTTClient:    rtt,
		Tconn:        tconn,
		BytesClient:  c.c2s.carried(c.gapped(0)),
		BytesServer:  c.s2c.carried(c.gapped(1)),
		RetransBytes: c.retransBytes(),
		Transactions: int(c.nextIndex),
	}
	if s := c.tls; s != nil {
		out.TLSVersion, out.SNI, out.ALPN, out.Ttls = s.version, s.sni, s.alpn, s.ttls
	}
	out.SYNLossGap, out.SYNACKLossGap = handshakeLossGaps(&out)
	return out
}

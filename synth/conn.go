package synth

import (
	"net/netip"
	"time"

	"github.com/rtmon/rtmon/capture"
)

// Base is the epoch synthetic captures start from: 2026-01-01T00:00:00Z in ns.
var Base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// T returns Base + sec seconds in ns since the Unix epoch (the project's time
// convention), rounded to the nearest ns so T(0.0015) is exactly 1.5 ms.
func T(sec float64) int64 {
	if sec >= 0 {
		return Base + int64(sec*1e9+0.5)
	}
	return Base + int64(sec*1e9-0.5)
}

// IPIDMode chooses how a connection's IPv4 Identification fields are written.
type IPIDMode uint8

const (
	// IPIDCounter numbers every packet of the file with the Writer's
	// packet counter (mod 2^16), whatever its connection.
	IPIDCounter IPIDMode = iota
	// IPIDPerConn is Linux: each side of a connection counts the packets
	// it sends, lost ones included, from a random start (Conn.ClientIPID,
	// Conn.ServerIPID); the SYN/ACK, sent before the server's socket
	// exists, carries 0 and takes no number.
	IPIDPerConn
	// IPIDZero writes 0 everywhere (atomic datagrams, RFC 6864).
	IPIDZero
)

// ConnOptions choose the TCP options a connection's segments carry.
type ConnOptions struct {
	MSS         uint16 // advertised on SYN and SYN/ACK; 0 = absent
	SACKPerm    bool   // on SYN and SYN/ACK
	WindowScale int8   // on SYN and SYN/ACK; -1 = absent
	Timestamps  bool   // on every segment
	Window      uint16 // raw window field on non-SYN segments
	HopByHop    bool   // IPv6 only: every segment carries a hop-by-hop header
	IPID        IPIDMode
	// ClientRTT (ns), when > 0, makes the client see the server's segments
	// as a client that far (round trip) from the capture point would: its
	// segments acknowledge and echo (TSecr) only server segments captured
	// at least ClientRTT before them, never an old duplicate (ServerDupAt);
	// and every SYN/ACK echoes the first SYN the server answered (its
	// request socket keeps that TSval), as Linux's do. When 0, a client
	// acknowledges and echoes the newest server segment written and a
	// SYN/ACK echoes the newest SYN. Explicit ACKs (ClientAckTo) keep
	// their ack number either way.
	ClientRTT int64
}

// DefaultConnOptions are Linux's: MSS 1460, SACK, window scale 7, timestamps.
func DefaultConnOptions() ConnOptions {
	return ConnOptions{MSS: 1460, SACKPerm: true, WindowScale: 7, Timestamps: true, Window: 502}
}

// Conn scripts one TCP connection seen from a capture point near the server.
// Sequence numbers are tracked per side; relative sequence 0 is the first data
// byte (ISN+1) and all arithmetic wraps modulo 2^32. Each method writes one
// segment immediately; errors are sticky in the Writer (see Writer.Err/Close).
type Conn struct {
	w                      *Writer
	ClientAddr, ServerAddr netip.AddrPort
	CISN, SISN             uint32
	Opts                   ConnOptions
	cNext, sNext           uint32 // relative next sequence of each side (FIN included)
	cTS, sTS               uint32 // last TSval each side sent, echoed by the other
	cTSOff, sTSOff         uint32 // per-side timestamp clock offsets, like Linux's randomised ones
	// ClientIPID and ServerIPID are the IPv4 IDs each side sends next
	// (IPIDPerConn); set them to choose the random starts.
	ClientIPID, ServerIPID uint16

	// With Opts.ClientRTT: server TSvals on their way to the client, the
	// client's TS.Recent, and the TSval a SYN/ACK echoes.
	inFlight  []tsMark
	cEcho     uint32
	cRcv      uint32 // the client's highest server sequence received (relative)
	synEcho   uint32
	synEchoed bool
	// lag (ns): the next client segment was sent this long before its
	// capture time (held up behind later ones); Generate sets it.
	lag     int64
	lagOnce bool // lag was set by QueuedNext, for one client segment
}

// tsMark is a server segment's capture time, TSval and relative end.
type tsMark struct {
	t   int64
	ts  uint32
	end uint32
}

// Conn starts a connection with DefaultConnOptions.
func (w *Writer) Conn(client, server netip.AddrPort, clientISN, serverISN uint32) *Conn {
	return w.ConnWith(client, server, clientISN, serverISN, DefaultConnOptions())
}

// ConnWith starts a connection with explicit TCP options.
func (w *Writer) ConnWith(client, server netip.AddrPort, clientISN, serverISN uint32, o ConnOptions) *Conn {
	return &Conn{w: w, ClientAddr: client, ServerAddr: server, CISN: clientISN, SISN: serverISN, Opts: o,
		cTSOff: clientISN ^ 0x5a5a5a5a, sTSOff: serverISN ^ 0xa5a5a5a5}
}

// ClientNext and ServerNext return the relative sequence each side sends next.
func (c *Conn) ClientNext() uint32 { return c.cNext }
func (c *Conn) ServerNext() uint32 { return c.sNext }

// QueuedNext makes the next client segment one that the client sent d
// before its capture time, held in a queue on the way: its timestamp value
// is the client's clock at sending.
func (c *Conn) QueuedNext(d int64) { c.lag, c.lagOnce = d, true }

// ClientSeq and ServerSeq turn a relative sequence number into the wire value.
func (c *Conn) ClientSeq(rel uint32) uint32 { return c.CISN + 1 + rel }
func (c *Conn) ServerSeq(rel uint32) uint32 { return c.SISN + 1 + rel }

func (c *Conn) send(t int64, toServer bool, seq, ack uint32, flags uint8, payload []byte) {
	c.sendSACK(t, toServer, seq, ack, flags, payload, nil, false)
}

// sendSACK writes one segment with SACK blocks (wire sequence numbers); dup
// marks a server retransmission the client discards as an old duplicate.
func (c *Conn) sendSACK(t int64, toServer bool, seq, ack uint32, flags uint8, payload []byte, sack []capture.SACKBlock, dup bool) {
	s := Segment{Time: t, Seq: seq, Ack: ack, Flags: flags, Window: c.Opts.Window,
		WindowScale: -1, HopByHop: c.Opts.HopByHop, ToServer: toServer, Payload: payload}
	s.NumSACK = copy(s.SACK[:], sack)
	if len(sack) > len(s.SACK) {
		s.NumSACK = len(sack) // let WriteSegment report it
	}
	if toServer {
		s.Src, s.Dst = c.ClientAddr, c.ServerAddr
	} else {
		s.Src, s.Dst = c.ServerAddr, c.ClientAddr
	}
	if flags&capture.FlagSYN != 0 {
		s.MSS, s.SACKPerm, s.WindowScale = c.Opts.MSS, c.Opts.SACKPerm, c.Opts.WindowScale
		s.Window = 64240 // SYNs carry an unscaled window
	}
	if c.Opts.Timestamps {
		// A 1 kHz timestamp clock, as Linux uses.
		ms := uint32(t / 1e6)
		s.Timestamps = true
		if toServer {
			ms = uint32((t - c.lag) / 1e6)
			c.cTS = ms + c.cTSOff
			s.TSVal, s.TSEcr = c.cTS, c.sTS
		} else {
			if !dup {
				c.sTS = ms + c.sTSOff
			}
			s.TSVal, s.TSEcr = ms+c.sTSOff, c.cTS
		}
		if c.Opts.ClientRTT > 0 {
			c.linuxEcho(&s, flags, dup)
		}
		if flags == capture.FlagSYN {
			s.TSEcr = 0
		}
	}
	switch c.Opts.IPID {
	case IPIDPerConn:
		s.HasIPID = true
		switch {
		case toServer:
			s.IPID = c.ClientIPID
			c.ClientIPID++
		case flags != capture.FlagSYN|capture.FlagACK:
			s.IPID = c.ServerIPID
			c.ServerIPID++
		}
	case IPIDZero:
		s.HasIPID = true
	}
	_ = c.w.WriteSegment(&s)
	if toServer && c.lagOnce {
		c.lag, c.lagOnce = 0, false
	}
}

// linuxEcho sets s's TSecr as Linux peers would (see ConnOptions.ClientRTT).
func (c *Conn) linuxEcho(s *Segment, flags uint8, dup bool) {
	switch {
	case s.ToServer:
		c.clientView(s.Time)
		s.TSEcr = c.cEcho
	case flags == capture.FlagSYN|capture.FlagACK:
		if !c.synEchoed {
			c.synEcho, c.synEchoed = c.cTS, true
		}
		s.TSEcr = c.synEcho
		c.inFlight = append(c.inFlight, tsMark{s.Time, s.TSVal, 0})
	case !dup:
		end := s.Seq - c.SISN - 1 + uint32(len(s.Payload))
		if flags&capture.FlagFIN != 0 {
			end++
		}
		c.inFlight = append(c.inFlight, tsMark{s.Time, s.TSVal, end})
	}
}

// clientView takes in the server segments that can have reached the
// client by its segment at t (captured at least ClientRTT before it was
// sent): the newest is its TS.Recent, the highest end what it acknowledges.
func (c *Conn) clientView(t int64) {
	n := 0
	for n < len(c.inFlight) && c.inFlight[n].t <= t-c.lag-c.Opts.ClientRTT {
		m := c.inFlight[n]
		c.cEcho = m.ts
		if int32(m.end-c.cRcv) > 0 {
			c.cRcv = m.end
		}
		n++
	}
	c.inFlight = c.inFlight[:copy(c.inFlight, c.inFlight[n:])]
}

// cAckAt is what a client segment at t acknowledges: everything the server
// has sent, or with Opts.ClientRTT what can have reached the client.
func (c *Conn) cAckAt(t int64) uint32 {
	if c.Opts.ClientRTT > 0 {
		c.clientView(t)
		return c.ServerSeq(c.cRcv)
	}
	return c.ServerSeq(c.sNext)
}
func (c *Conn) sAck() uint32 { return c.ClientSeq(c.cNext) }

// SYN writes the client's SYN; call again for a retransmission (same ISN).
func (c *Conn) SYN(t int64) { c.send(t, true, c.CISN, 0, capture.FlagSYN, nil) }

// SYNACK writes the server's SYN/ACK; may be repeated.
func (c *Conn) SYNACK(t int64) {
	c.send(t, false, c.SISN, c.CISN+1, capture.FlagSYN|capture.FlagACK, nil)
}

// ACK writes the client's handshake-completing ACK.
func (c *Conn) ACK(t int64) { c.send(t, true, c.CISN+1, c.SISN+1, capture.FlagACK, nil) }

// Client writes one client data segment at the client's next sequence number,
// acknowledging everything the server has sent, and advances the sequence.
func (c *Conn) Client(t int64, payload []byte) {
	c.send(t, true, c.ClientSeq(c.cNext), c.cAckAt(t), capture.FlagPSH|capture.FlagACK, payload)
	c.cNext += uint32(len(payload))
}

// Server writes one server data segment and advances the server's sequence.
func (c *Conn) Server(t int64, payload []byte) {
	c.send(t, false, c.ServerSeq(c.sNext), c.sAck(), capture.FlagPSH|capture.FlagACK, payload)
	c.sNext += uint32(len(payload))
}

// ServerMSS splits payload into mss-byte segments sent gap ns apart starting at
// t (PSH only on the last, as Linux does for one write) and returns their times.
func (c *Conn) ServerMSS(t int64, payload []byte, mss int, gap int64) []int64 {
	return c.serverMSS(t, payload, mss, gap, c.sAck())
}

// ServerMSSAcking is ServerMSS whose segments acknowledge the client's
// stream only up to relAck: the server lacks client bytes that were lost
// before the capture point too (SkipClient), and waits for their resend.
func (c *Conn) ServerMSSAcking(t int64, relAck uint32, payload []byte, mss int, gap int64) []int64 {
	return c.serverMSS(t, payload, mss, gap, c.ClientSeq(relAck))
}

func (c *Conn) serverMSS(t int64, payload []byte, mss int, gap int64, ack uint32) []int64 {
	if mss <= 0 {
		mss = 1460
	}
	var times []int64
	for off := 0; off < len(payload) || (off == 0 && len(payload) == 0); off += mss {
		end := min(off+mss, len(payload))
		flags := capture.FlagACK
		if end == len(payload) {
			flags |= capture.FlagPSH
		}
		c.send(t, false, c.ServerSeq(c.sNext), ack, flags, payload[off:end])
		c.sNext += uint32(end - off)
		times = append(times, t)
		t += gap
		if len(payload) == 0 {
			break
		}
	}
	return times
}

// ClientAt writes client data at an explicit relative sequence number without
// advancing: retransmissions, overlaps and out-of-order segments.
func (c *Conn) ClientAt(t int64, relSeq uint32, payload []byte) {
	c.send(t, true, c.ClientSeq(relSeq), c.cAckAt(t), capture.FlagPSH|capture.FlagACK, payload)
}

// ServerAt is ClientAt for the server side.
func (c *Conn) ServerAt(t int64, relSeq uint32, payload []byte) {
	c.send(t, false, c.ServerSeq(relSeq), c.sAck(), capture.FlagPSH|capture.FlagACK, payload)
}

// ClientAck writes a pure client ACK of everything the server has sent.
func (c *Conn) ClientAck(t int64) {
	c.send(t, true, c.ClientSeq(c.cNext), c.cAckAt(t), capture.FlagACK, nil)
}

// ClientAckTo writes a pure client ACK up to the server's relative sequence
// relSeq (exclusive): partial and duplicate ACKs.
func (c *Conn) ClientAckTo(t int64, relSeq uint32) {
	c.send(t, true, c.ClientSeq(c.cNext), c.ServerSeq(relSeq), capture.FlagACK, nil)
}

// ServerAck writes a pure server ACK of everything the client has sent.
func (c *Conn) ServerAck(t int64) {
	c.send(t, false, c.ServerSeq(c.sNext), c.sAck(), capture.FlagACK, nil)
}

// ServerAckTo is ClientAckTo for the server side.
func (c *Conn) ServerAckTo(t int64, relSeq uint32) {
	c.send(t, false, c.ServerSeq(c.sNext), c.ClientSeq(relSeq), capture.FlagACK, nil)
}

// ClientFIN writes FIN|ACK from the client; the FIN consumes one sequence number.
func (c *Conn) ClientFIN(t int64) {
	c.send(t, true, c.ClientSeq(c.cNext), c.cAckAt(t), capture.FlagFIN|capture.FlagACK, nil)
	c.cNext++
}

// ServerFIN writes FIN|ACK from the server.
func (c *Conn) ServerFIN(t int64) {
	c.send(t, false, c.ServerSeq(c.sNext), c.sAck(), capture.FlagFIN|capture.FlagACK, nil)
	c.sNext++
}

// ClientRST writes RST|ACK from the client.
func (c *Conn) ClientRST(t int64) {
	c.send(t, true, c.ClientSeq(c.cNext), c.cAckAt(t), capture.FlagRST|capture.FlagACK, nil)
}

// ServerRST writes RST|ACK from the server.
func (c *Conn) ServerRST(t int64) {
	c.send(t, false, c.ServerSeq(c.sNext), c.sAck(), capture.FlagRST|capture.FlagACK, nil)
}

// ServerDupAt is ServerAt for an old duplicate: a retransmission that ends
// before what the client last acknowledged. The client drops it at its
// sequence check, so (RFC 7323, Linux's tcp_sequence) it never becomes the
// TSval the client echoes. A retransmission ending exactly at the client's
// last acknowledgment - a tail loss probe after a lost ACK - passes that
// check and is echoed: write it with ServerAt.
func (c *Conn) ServerDupAt(t int64, relSeq uint32, payload []byte) {
	c.sendSACK(t, false, c.ServerSeq(relSeq), c.sAck(), capture.FlagPSH|capture.FlagACK, payload, nil, true)
}

// ClientAckToSACK is ClientAckTo with SACK blocks given as relative server
// sequence ranges [Left, Right): a duplicate (D-SACK, RFC 2883) first, below
// relSeq, or out-of-order data above it.
func (c *Conn) ClientAckToSACK(t int64, relSeq uint32, sack ...capture.SACKBlock) {
	c.ackSACK(t, true, relSeq, sack)
}

// ServerAckToSACK is ServerAckTo with SACK blocks as relative client
// sequence ranges.
func (c *Conn) ServerAckToSACK(t int64, relSeq uint32, sack ...capture.SACKBlock) {
	c.ackSACK(t, false, relSeq, sack)
}

func (c *Conn) ackSACK(t int64, toServer bool, relSeq uint32, rel []capture.SACKBlock) {
	var buf [capture.MaxSACKBlocks]capture.SACKBlock
	wire := buf[:0]
	if len(rel) > len(buf) {
		wire = make([]capture.SACKBlock, 0, len(rel)) // WriteSegment reports it
	}
	seq := c.ClientSeq
	if toServer {
		seq = c.ServerSeq
	}
	for _, b := range rel {
		wire = append(wire, capture.SACKBlock{Left: seq(b.Left), Right: seq(b.Right)})
	}
	if toServer {
		c.sendSACK(t, true, c.ClientSeq(c.cNext), c.ServerSeq(relSeq), capture.FlagACK, nil, wire, false)
		return
	}
	c.sendSACK(t, false, c.ServerSeq(c.sNext), c.ClientSeq(relSeq), capture.FlagACK, nil, wire, false)
}

// ClientLost stands for a client packet sent but lost before the capture
// point: nothing is written, but it takes the client's next IP ID.
func (c *Conn) ClientLost() {
	if c.Opts.IPID == IPIDPerConn {
		c.ClientIPID++
	}
}

// SkipClient and SkipServer advance a side's sequence without writing: bytes
// that were sent but never captured (a hole in the capture).
func (c *Conn) SkipClient(n int) { c.cNext += uint32(n) }
func (c *Conn) SkipServer(n int) { c.sNext += uint32(n) }

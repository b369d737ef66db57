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

// ConnOptions choose the TCP options a connection's segments carry.
type ConnOptions struct {
	MSS         uint16 // advertised on SYN and SYN/ACK; 0 = absent
	SACKPerm    bool   // on SYN and SYN/ACK
	WindowScale int8   // on SYN and SYN/ACK; -1 = absent
	Timestamps  bool   // on every segment
	Window      uint16 // raw window field on non-SYN segments
	HopByHop    bool   // IPv6 only: every segment carries a hop-by-hop header
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

// ClientSeq and ServerSeq turn a relative sequence number into the wire value.
func (c *Conn) ClientSeq(rel uint32) uint32 { return c.CISN + 1 + rel }
func (c *Conn) ServerSeq(rel uint32) uint32 { return c.SISN + 1 + rel }

func (c *Conn) send(t int64, toServer bool, seq, ack uint32, flags uint8, payload []byte) {
	s := Segment{Time: t, Seq: seq, Ack: ack, Flags: flags, Window: c.Opts.Window,
		WindowScale: -1, HopByHop: c.Opts.HopByHop, ToServer: toServer, Payload: payload}
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
			c.cTS = ms + c.cTSOff
			s.TSVal, s.TSEcr = c.cTS, c.sTS
		} else {
			c.sTS = ms + c.sTSOff
			s.TSVal, s.TSEcr = c.sTS, c.cTS
		}
		if flags == capture.FlagSYN {
			s.TSEcr = 0
		}
	}
	_ = c.w.WriteSegment(&s)
}

func (c *Conn) cAck() uint32 { return c.ServerSeq(c.sNext) }
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
	c.send(t, true, c.ClientSeq(c.cNext), c.cAck(), capture.FlagPSH|capture.FlagACK, payload)
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
		c.send(t, false, c.ServerSeq(c.sNext), c.sAck(), flags, payload[off:end])
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
	c.send(t, true, c.ClientSeq(relSeq), c.cAck(), capture.FlagPSH|capture.FlagACK, payload)
}

// ServerAt is ClientAt for the server side.
func (c *Conn) ServerAt(t int64, relSeq uint32, payload []byte) {
	c.send(t, false, c.ServerSeq(relSeq), c.sAck(), capture.FlagPSH|capture.FlagACK, payload)
}

// ClientAck writes a pure client ACK of everything the server has sent.
func (c *Conn) ClientAck(t int64) {
	c.send(t, true, c.ClientSeq(c.cNext), c.cAck(), capture.FlagACK, nil)
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
	c.send(t, true, c.ClientSeq(c.cNext), c.cAck(), capture.FlagFIN|capture.FlagACK, nil)
	c.cNext++
}

// ServerFIN writes FIN|ACK from the server.
func (c *Conn) ServerFIN(t int64) {
	c.send(t, false, c.ServerSeq(c.sNext), c.sAck(), capture.FlagFIN|capture.FlagACK, nil)
	c.sNext++
}

// ClientRST writes RST|ACK from the client.
func (c *Conn) ClientRST(t int64) {
	c.send(t, true, c.ClientSeq(c.cNext), c.cAck(), capture.FlagRST|capture.FlagACK, nil)
}

// ServerRST writes RST|ACK from the server.
func (c *Conn) ServerRST(t int64) {
	c.send(t, false, c.ServerSeq(c.sNext), c.sAck(), capture.FlagRST|capture.FlagACK, nil)
}

// SkipClient and SkipServer advance a side's sequence without writing: bytes
// that were sent but never captured (a hole in the capture).
func (c *Conn) SkipClient(n int) { c.cNext += uint32(n) }
func (c *Conn) SkipServer(n int) { c.sNext += uint32(n) }

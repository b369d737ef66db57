// Package synth generates synthetic packet captures whose timings are known
// exactly. Tests of the other stages, the benchmark command and the demo data use
// it: a Writer emits TCP segments in any supported file format and link type, a
// Conn scripts one TCP conversation packet by packet, and Generate produces a
// large, realistic, deterministic workload together with its client-side truth
// (see TruthRecord for the timing model).
//
// Writes are immediate: packets appear in the file in call order, so callers
// write in capture-time order. Errors are sticky: Conn methods return nothing,
// and Writer.Err/Close report the first failure.
//
// Not modelled by Generate: server-side SYN/ACK retransmission timers (a lost
// SYN/ACK is repaired by the client's SYN retransmission), loss of server
// retransmissions, pipelining, NAT. Client-side losses, reordering, request
// bodies and real HTML are opt-in Workload options (see Workload).
package synth

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/rtmon/rtmon/capture"
)

// Format is the capture file format.
type Format int

const (
	PCAP Format = iota
	PCAPNG
)

// LinkType is the link-layer framing of every packet in the file.
type LinkType int

const (
	Ethernet  LinkType = iota
	LinuxSLL           // Linux "cooked" capture v1 (any interface)
	LinuxSLL2          // Linux "cooked" capture v2
	RawIP              // no link header (LINKTYPE_RAW)
	Null               // BSD loopback: 4-byte host-order address family
)

func (l LinkType) String() string {
	switch l {
	case Ethernet:
		return "ethernet"
	case LinuxSLL:
		return "sll"
	case LinuxSLL2:
		return "sll2"
	case RawIP:
		return "raw"
	case Null:
		return "null"
	}
	return fmt.Sprintf("linktype(%d)", int(l))
}

func (l LinkType) layersType() (layers.LinkType, error) {
	switch l {
	case Ethernet:
		return layers.LinkTypeEthernet, nil
	case LinuxSLL:
		return layers.LinkTypeLinuxSLL, nil
	case LinuxSLL2:
		return layers.LinkTypeLinuxSLL2, nil
	case RawIP:
		return layers.LinkTypeRaw, nil
	case Null:
		return layers.LinkTypeNull, nil
	}
	return 0, fmt.Errorf("synth: unknown link type %d", int(l))
}

// Options configure the output file.
type Options struct {
	Format     Format
	LinkType   LinkType
	VLANs      []uint16 // 0, 1 (802.1Q) or 2 (QinQ: outer 0x88a8, inner 0x8100) tags; Ethernet only
	Nanosecond bool     // pcap nanosecond magic / pcapng if_tsresol 9 (else microseconds)
	Snaplen    int      // cut packets to this many bytes (0 = no cut); headers keep the true lengths
	Gzip       bool     // gzip the whole output stream
}

// Fixed MAC addresses: the capture point sits between a router (client side)
// and the server, like a span port in front of a web server.
var (
	macRouter = net.HardwareAddr{0x02, 0x00, 0x5e, 0x00, 0x00, 0x01}
	macServer = net.HardwareAddr{0x02, 0x00, 0x5e, 0x00, 0x00, 0x02}
)

// Segment is one TCP segment as the low-level writer takes it. Conn fills it in;
// tests that need something a Conn cannot express may call WriteSegment directly.
type Segment struct {
	Time     int64 // capture time, ns since the Unix epoch
	Src, Dst netip.AddrPort
	Seq, Ack uint32
	Flags    uint8 // capture.Flag* bits
	Window   uint16
	// TCP options, in Linux's order.
	MSS         uint16 // 0 = absent
	SACKPerm    bool
	Timestamps  bool
	TSVal       uint32
	TSEcr       uint32
	WindowScale int8 // -1 = absent
	HopByHop    bool // IPv6 only: insert a hop-by-hop extension header (PadN)
	ToServer    bool // direction, for link types that record it (SLL packet type)
	Payload     []byte
	// SACK blocks (wire sequence numbers), written after the timestamps as
	// Linux does (NOP, NOP, SACK). The options must fit in 40 bytes: at
	// most 3 blocks with timestamps, 4 without.
	SACK    [capture.MaxSACKBlocks]capture.SACKBlock
	NumSACK int
	// IPID is the IPv4 Identification field when HasIPID is set; otherwise
	// the Writer numbers packets with its own counter. Ignored for IPv6.
	IPID    uint16
	HasIPID bool
}

// Writer writes TCP segments to a capture stream. Writes are immediate and in
// call order: callers write in capture-time order (Generate does so through a
// heap of per-pageview event streams). Not safe for concurrent use.
type Writer struct {
	opts   Options
	dst    io.Writer
	gz     *gzip.Writer
	bw     *bufio.Writer
	pw     *pcapgo.Writer
	ng     *pcapgo.NgWriter
	ngus   *ngMicroWriter
	buf    gopacket.SerializeBuffer
	sopts  gopacket.SerializeOptions
	stack  []gopacket.SerializableLayer
	eth    layers.Ethernet
	vlan   [2]layers.Dot1Q
	cooked cookedLayer
	loop   layers.Loopback
	ip4    layers.IPv4
	ip6    layers.IPv6
	hbh    layers.IPv6HopByHop
	tcp    layers.TCP
	optbuf [8]layers.TCPOption
	mssB   [2]byte
	wsB    [1]byte
	tsB    [8]byte
	sackB  [8 * capture.MaxSACKBlocks]byte

	cw      *countWriter
	err     error // first error; sticky so Conn methods need not return one
	packets int64
}

// countWriter counts the uncompressed file bytes.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// NewWriter writes the file header and returns a Writer. Close must be called to
// flush buffers (it does not close w).
func NewWriter(w io.Writer, opts Options) (*Writer, error) {
	lt, err := opts.LinkType.layersType()
	if err != nil {
		return nil, err
	}
	if len(opts.VLANs) > 2 {
		return nil, fmt.Errorf("synth: %d VLAN tags, at most 2 supported", len(opts.VLANs))
	}
	if len(opts.VLANs) > 0 && opts.LinkType != Ethernet {
		return nil, fmt.Errorf("synth: VLAN tags need link type ethernet, not %v", opts.LinkType)
	}
	if opts.Snaplen < 0 {
		return nil, fmt.Errorf("synth: negative snaplen %d", opts.Snaplen)
	}
	wr := &Writer{
		opts:  opts,
		dst:   w,
		buf:   gopacket.NewSerializeBufferExpectedSize(128, 2048),
		sopts: gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
	}
	out := w
	if opts.Gzip {
		// BestSpeed: gzip is for handing files around, and the default level
		// would make gzip the generator's bottleneck.
		wr.gz, _ = gzip.NewWriterLevel(w, gzip.BestSpeed)
		out = wr.gz
	}
	wr.bw = bufio.NewWriterSize(out, 1<<20)
	wr.cw = &countWriter{w: wr.bw}
	snap := uint32(opts.Snaplen)
	if snap == 0 {
		snap = 262144
	}
	switch opts.Format {
	case PCAP:
		if opts.Nanosecond {
			wr.pw = pcapgo.NewWriterNanos(wr.cw)
		} else {
			wr.pw = pcapgo.NewWriter(wr.cw)
		}
		if err := wr.pw.WriteFileHeader(snap, lt); err != nil {
			return nil, fmt.Errorf("synth: writing pcap header: %w", err)
		}
	case PCAPNG:
		if !opts.Nanosecond {
			// pcapgo's NgWriter hard-codes if_tsresol 9; microsecond
			// pcapng files (what many tools write) need our own writer.
			wr.ngus = &ngMicroWriter{w: wr.cw}
			if err := wr.ngus.header(lt, snap); err != nil {
				return nil, fmt.Errorf("synth: writing pcapng header: %w", err)
			}
			break
		}
		intf := pcapgo.DefaultNgInterface
		intf.Name = "synth0"
		intf.LinkType = lt
		intf.SnapLength = snap
		intf.TimestampResolution = 9
		ngo := pcapgo.DefaultNgWriterOptions
		ngo.SectionInfo.Application = "rtmon synth"
		wr.ng, err = pcapgo.NewNgWriterInterface(wr.cw, intf, ngo)
		if err != nil {
			return nil, fmt.Errorf("synth: writing pcapng header: %w", err)
		}
	default:
		return nil, fmt.Errorf("synth: unknown format %d", int(opts.Format))
	}
	wr.eth = layers.Ethernet{}
	wr.ip4 = layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, Flags: layers.IPv4DontFragment}
	wr.ip6 = layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP}
	// An 8-byte hop-by-hop header: next header, length, and a 4-byte PadN
	// option (type 1, length 4 - 2) - the simplest valid filler.
	wr.hbh = layers.IPv6HopByHop{Options: []*layers.IPv6HopByHopOption{{OptionType: 1, OptionData: make([]byte, 4)}}}
	wr.hbh.NextHeader = layers.IPProtocolTCP
	return wr, nil
}

// Err returns the first error any write met.
func (w *Writer) Err() error { return w.err }

// Packets returns the number of packets written so far.
func (w *Writer) Packets() int64 { return w.packets }

// Bytes returns the uncompressed size of the file so far, headers included;
// exact for pcap, up to pcapgo's 4 KB internal buffer behind for nanosecond
// pcapng until Close.
func (w *Writer) Bytes() int64 { return w.cw.n }

// Close flushes buffered data and the gzip stream. It does not close the
// underlying io.Writer.
func (w *Writer) Close() error {
	if w.ng != nil {
		if err := w.ng.Flush(); err != nil && w.err == nil {
			w.err = fmt.Errorf("synth: flushing pcapng: %w", err)
		}
	}
	if err := w.bw.Flush(); err != nil && w.err == nil {
		w.err = fmt.Errorf("synth: flushing: %w", err)
	}
	if w.gz != nil {
		if err := w.gz.Close(); err != nil && w.err == nil {
			w.err = fmt.Errorf("synth: closing gzip: %w", err)
		}
	}
	return w.err
}

func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// WriteSegment serializes one segment with correct lengths and checksums and
// appends it to the file.
func (w *Writer) WriteSegment(s *Segment) error {
	if w.err != nil {
		return w.err
	}
	if s.Src.Addr().Is4() != s.Dst.Addr().Is4() {
		w.fail(fmt.Errorf("synth: mixed address families %v -> %v", s.Src, s.Dst))
		return w.err
	}
	if s.NumSACK < 0 || s.NumSACK > capture.MaxSACKBlocks || optionBytes(s) > 40 {
		w.fail(fmt.Errorf("synth: %v -> %v seq %d: %d SACK blocks do not fit in the TCP options", s.Src, s.Dst, s.Seq, s.NumSACK))
		return w.err
	}
	w.stack = w.stack[:0]
	w.linkLayers(s)
	w.tcpLayer(s, w.ipLayer(s))
	if err := gopacket.SerializeLayers(w.buf, w.sopts, w.stack...); err != nil {
		w.fail(fmt.Errorf("synth: serializing %v -> %v seq %d: %w", s.Src, s.Dst, s.Seq, err))
		return w.err
	}
	if err := w.writeFrame(s.Time, w.buf.Bytes()); err != nil {
		w.fail(fmt.Errorf("synth: writing packet %d: %w", w.packets, err))
		return w.err
	}
	w.packets++
	return nil
}

// linkLayers stacks the link header (and VLAN tags) for s.
func (w *Writer) linkLayers(s *Segment) {
	v4 := s.Src.Addr().Is4()
	etype := layers.EthernetTypeIPv4
	if !v4 {
		etype = layers.EthernetTypeIPv6
	}
	switch w.opts.LinkType {
	case Ethernet:
		if s.ToServer {
			w.eth.SrcMAC, w.eth.DstMAC = macRouter, macServer
		} else {
			w.eth.SrcMAC, w.eth.DstMAC = macServer, macRouter
		}
		w.stack = append(w.stack, &w.eth)
		switch len(w.opts.VLANs) {
		case 0:
			w.eth.EthernetType = etype
		case 1:
			w.eth.EthernetType = layers.EthernetTypeDot1Q
			w.vlan[0] = layers.Dot1Q{VLANIdentifier: w.opts.VLANs[0], Type: etype}
			w.stack = append(w.stack, &w.vlan[0])
		case 2:
			w.eth.EthernetType = layers.EthernetTypeQinQ
			w.vlan[0] = layers.Dot1Q{VLANIdentifier: w.opts.VLANs[0], Type: layers.EthernetTypeDot1Q}
			w.vlan[1] = layers.Dot1Q{VLANIdentifier: w.opts.VLANs[1], Type: etype}
			w.stack = append(w.stack, &w.vlan[0], &w.vlan[1])
		}
	case LinuxSLL, LinuxSLL2:
		w.cooked = cookedLayer{v2: w.opts.LinkType == LinuxSLL2, toServer: s.ToServer, proto: etype}
		w.stack = append(w.stack, &w.cooked)
	case Null:
		w.loop.Family = layers.ProtocolFamilyIPv4
		if !v4 {
			w.loop.Family = layers.ProtocolFamilyIPv6BSD
		}
		w.stack = append(w.stack, &w.loop)
	}
}

// ipLayer stacks the IPv4 or IPv6 header for s and returns it for the TCP
// checksum.
func (w *Writer) ipLayer(s *Segment) gopacket.NetworkLayer {
	if s.Src.Addr().Is4() {
		w.ip4.SrcIP = as4(s.Src.Addr())
		w.ip4.DstIP = as4(s.Dst.Addr())
		w.ip4.Id = uint16(w.packets)
		if s.HasIPID {
			w.ip4.Id = s.IPID
		}
		w.stack = append(w.stack, &w.ip4)
		return &w.ip4
	}
	src, dst := s.Src.Addr().As16(), s.Dst.Addr().As16()
	w.ip6.SrcIP = src[:]
	w.ip6.DstIP = dst[:]
	w.ip6.HopByHop = nil
	w.ip6.NextHeader = layers.IPProtocolTCP
	if s.HopByHop {
		w.ip6.HopByHop = &w.hbh
		w.ip6.NextHeader = layers.IPProtocolIPv6HopByHop
	}
	w.stack = append(w.stack, &w.ip6)
	return &w.ip6
}

// tcpLayer stacks the TCP header and the payload for s.
func (w *Writer) tcpLayer(s *Segment, netLayer gopacket.NetworkLayer) {
	t := &w.tcp
	*t = layers.TCP{
		SrcPort: layers.TCPPort(s.Src.Port()),
		DstPort: layers.TCPPort(s.Dst.Port()),
		Seq:     s.Seq,
		Ack:     s.Ack,
		FIN:     s.Flags&0x01 != 0,
		SYN:     s.Flags&0x02 != 0,
		RST:     s.Flags&0x04 != 0,
		PSH:     s.Flags&0x08 != 0,
		ACK:     s.Flags&0x10 != 0,
		URG:     s.Flags&0x20 != 0,
		Window:  s.Window,
		Options: w.tcpOptions(s),
	}
	_ = t.SetNetworkLayerForChecksum(netLayer)
	w.stack = append(w.stack, t, gopacket.Payload(s.Payload))
}

// writeFrame appends one serialized frame captured at ts (ns), cut to the
// snap length.
func (w *Writer) writeFrame(ts int64, data []byte) error {
	ci := gopacket.CaptureInfo{Length: len(data), CaptureLength: len(data)}
	if w.opts.Snaplen > 0 && len(data) > w.opts.Snaplen {
		data = data[:w.opts.Snaplen]
		ci.CaptureLength = len(data)
	}
	switch {
	case w.pw != nil:
		ci.Timestamp = time.Unix(0, ts)
		return w.pw.WritePacket(ci, data)
	case w.ng != nil:
		ci.Timestamp = time.Unix(0, ts)
		return w.ng.WritePacket(ci, data)
	}
	return w.ngus.packet(ts/1000, data, ci.Length)
}

// optionBytes is the length of the TCP options tcpOptions writes for s,
// before padding.
func optionBytes(s *Segment) int {
	n := 0
	if s.MSS != 0 {
		n += 4
	}
	if s.SACKPerm {
		n += 2
	}
	if s.Timestamps {
		n += 10
		if !s.SACKPerm && s.MSS == 0 {
			n += 2
		}
	}
	if s.NumSACK > 0 {
		n += 4 + 8*s.NumSACK
	}
	if s.WindowScale >= 0 {
		n += 4
	}
	return n
}

// tcpOptions builds the options in Linux's layout (MSS, SACK_PERM, TS, NOP, WS
// on SYNs; NOP, NOP, TS, then NOP, NOP, SACK otherwise) so third-party
// dissectors see familiar bytes.
func (w *Writer) tcpOptions(s *Segment) []layers.TCPOption {
	o := w.optbuf[:0]
	if s.MSS != 0 {
		binary.BigEndian.PutUint16(w.mssB[:], s.MSS)
		o = append(o, layers.TCPOption{OptionType: layers.TCPOptionKindMSS, OptionData: w.mssB[:]})
	}
	if s.SACKPerm {
		o = append(o, layers.TCPOption{OptionType: layers.TCPOptionKindSACKPermitted})
	}
	if s.Timestamps {
		if !s.SACKPerm && s.MSS == 0 {
			o = append(o, layers.TCPOption{OptionType: layers.TCPOptionKindNop}, layers.TCPOption{OptionType: layers.TCPOptionKindNop})
		}
		binary.BigEndian.PutUint32(w.tsB[0:4], s.TSVal)
		binary.BigEndian.PutUint32(w.tsB[4:8], s.TSEcr)
		o = append(o, layers.TCPOption{OptionType: layers.TCPOptionKindTimestamps, OptionData: w.tsB[:]})
	}
	if s.NumSACK > 0 {
		b := w.sackB[:8*s.NumSACK]
		for i, blk := range s.SACK[:s.NumSACK] {
			binary.BigEndian.PutUint32(b[8*i:], blk.Left)
			binary.BigEndian.PutUint32(b[8*i+4:], blk.Right)
		}
		o = append(o, layers.TCPOption{OptionType: layers.TCPOptionKindNop}, layers.TCPOption{OptionType: layers.TCPOptionKindNop},
			layers.TCPOption{OptionType: layers.TCPOptionKindSACK, OptionData: b})
	}
	if s.WindowScale >= 0 {
		w.wsB[0] = byte(s.WindowScale)
		o = append(o, layers.TCPOption{OptionType: layers.TCPOptionKindNop}, layers.TCPOption{OptionType: layers.TCPOptionKindWindowScale, OptionData: w.wsB[:]})
	}
	return o
}

func as4(a netip.Addr) net.IP {
	b := a.As4()
	return net.IP(b[:])
}

// ngMicroWriter writes a minimal little-endian pcapng stream (one section, one
// interface with if_tsresol 6, enhanced packet blocks).
type ngMicroWriter struct {
	w   io.Writer
	hdr [28]byte
}

func (n *ngMicroWriter) header(lt layers.LinkType, snap uint32) error {
	le := binary.LittleEndian
	var b [28 + 32]byte
	// Section header block: type, length, byte-order magic, version 1.0,
	// unknown section length, length again.
	le.PutUint32(b[0:], 0x0A0D0D0A)
	le.PutUint32(b[4:], 28)
	le.PutUint32(b[8:], 0x1A2B3C4D)
	le.PutUint16(b[12:], 1)
	le.PutUint16(b[14:], 0)
	le.PutUint64(b[16:], ^uint64(0))
	le.PutUint32(b[24:], 28)
	// Interface description block with if_tsresol = 6 and opt_endofopt.
	i := b[28:]
	le.PutUint32(i[0:], 1)
	le.PutUint32(i[4:], 32)
	le.PutUint16(i[8:], uint16(lt))
	le.PutUint32(i[12:], snap)
	le.PutUint16(i[16:], 9) // if_tsresol
	le.PutUint16(i[18:], 1)
	i[20] = 6
	le.PutUint32(i[28:], 32) // options end (zeros at 24:28), then length
	_, err := n.w.Write(b[:])
	return err
}

func (n *ngMicroWriter) packet(us int64, data []byte, origLen int) error {
	le := binary.LittleEndian
	pad := (4 - len(data)&3) & 3
	total := uint32(28 + len(data) + pad + 4)
	le.PutUint32(n.hdr[0:], 6) // enhanced packet block
	le.PutUint32(n.hdr[4:], total)
	le.PutUint32(n.hdr[8:], 0)
	le.PutUint32(n.hdr[12:], uint32(uint64(us)>>32))
	le.PutUint32(n.hdr[16:], uint32(us))
	le.PutUint32(n.hdr[20:], uint32(len(data)))
	le.PutUint32(n.hdr[24:], uint32(origLen))
	if _, err := n.w.Write(n.hdr[:]); err != nil {
		return err
	}
	if _, err := n.w.Write(data); err != nil {
		return err
	}
	var tail [8]byte
	le.PutUint32(tail[pad:], total)
	_, err := n.w.Write(tail[:pad+4])
	return err
}

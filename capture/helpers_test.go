package capture

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// seg describes one TCP segment to build; want() is the Packet we expect back.
type seg struct {
	src, dst     netip.Addr
	sport, dport uint16
	seq, ack     uint32
	ipid         uint16 // IPv4 only
	flags        uint8
	win          uint16
	mss          uint16
	wscale       int8 // -1: absent
	sackOK       bool
	ts           *[2]uint32
	sack         []SACKBlock
	payload      []byte
	v6ext        bool // insert hop-by-hop, routing and destination options headers
	v6extNoHBH   bool // only routing and destination options (no gopacket allocations)
}

var (
	cli4 = netip.MustParseAddr("198.51.100.10")
	srv4 = netip.MustParseAddr("203.0.113.80")
	cli6 = netip.MustParseAddr("2001:db8::10")
	srv6 = netip.MustParseAddr("2001:db8::80")
)

func (s seg) tcpLayer() *layers.TCP {
	t := &layers.TCP{
		SrcPort: layers.TCPPort(s.sport), DstPort: layers.TCPPort(s.dport),
		Seq: s.seq, Ack: s.ack, Window: s.win,
		FIN: s.flags&FlagFIN != 0, SYN: s.flags&FlagSYN != 0, RST: s.flags&FlagRST != 0,
		PSH: s.flags&FlagPSH != 0, ACK: s.flags&FlagACK != 0, URG: s.flags&FlagURG != 0,
	}
	if s.mss != 0 {
		t.Options = append(t.Options, layers.TCPOption{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: binary.BigEndian.AppendUint16(nil, s.mss)})
	}
	if s.sackOK {
		t.Options = append(t.Options, layers.TCPOption{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2})
	}
	if s.ts != nil {
		d := binary.BigEndian.AppendUint32(nil, s.ts[0])
		d = binary.BigEndian.AppendUint32(d, s.ts[1])
		t.Options = append(t.Options, layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
			layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
			layers.TCPOption{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: d})
	}
	if len(s.sack) > 0 {
		var d []byte
		for _, b := range s.sack {
			d = binary.BigEndian.AppendUint32(d, b.Left)
			d = binary.BigEndian.AppendUint32(d, b.Right)
		}
		t.Options = append(t.Options, layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
			layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
			layers.TCPOption{OptionType: layers.TCPOptionKindSACK, OptionLength: uint8(2 + len(d)), OptionData: d})
	}
	if s.wscale >= 0 {
		t.Options = append(t.Options, layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
			layers.TCPOption{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{byte(s.wscale)}})
	}
	return t
}

var serOpts = gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}

// ip returns the IP packet (header, TCP header, payload).
func (s seg) ip(t testing.TB) []byte {
	t.Helper()
	tcp := s.tcpLayer()
	buf := gopacket.NewSerializeBuffer()
	if s.src.Is4() {
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, Id: s.ipid,
			SrcIP: net.IP(s.src.AsSlice()), DstIP: net.IP(s.dst.AsSlice())}
		tcp.SetNetworkLayerForChecksum(ip)
		if err := gopacket.SerializeLayers(buf, serOpts, ip, tcp, gopacket.Payload(s.payload)); err != nil {
			t.Fatal(err)
		}
		return bytes.Clone(buf.Bytes())
	}
	ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP,
		SrcIP: net.IP(s.src.AsSlice()), DstIP: net.IP(s.dst.AsSlice())}
	tcp.SetNetworkLayerForChecksum(ip)
	if err := gopacket.SerializeLayers(buf, serOpts, ip, tcp, gopacket.Payload(s.payload)); err != nil {
		t.Fatal(err)
	}
	b := bytes.Clone(buf.Bytes())
	if s.v6ext || s.v6extNoHBH {
		// Splice extension headers after the fixed header; gopacket's
		// serializers for them are incomplete, and the bytes are simple.
		var ext []byte
		first := byte(43) // routing
		if s.v6ext {
			first = 0
			ext = append(ext, 43, 0, 1, 4, 0, 0, 0, 0) // hop-by-hop: PadN(4)
		}
		ext = append(ext, 60, 0, 4, 0, 0, 0, 0, 0) // routing type 4 (SRH-like), segments left 0
		ext = append(ext, 6, 0, 1, 4, 0, 0, 0, 0)  // destination options: PadN(4)
		b[6] = first
		binary.BigEndian.PutUint16(b[4:6], binary.BigEndian.Uint16(b[4:6])+uint16(len(ext)))
		b = append(b[:40:40], append(ext, b[40:]...)...)
	}
	return b
}

func (s seg) want() Packet {
	p := Packet{SrcIP: s.src, DstIP: s.dst, SrcPort: s.sport, DstPort: s.dport, Seq: s.seq, Ack: s.ack,
		Flags: s.flags, Window: s.win, MSS: s.mss, WindowScale: s.wscale, SACKPermitted: s.sackOK,
		Payload: s.payload, PayloadLen: len(s.payload)}
	if s.src.Is4() {
		p.IPID = s.ipid
	}
	if s.ts != nil {
		p.HasTimestamps, p.TSVal, p.TSEcr = true, s.ts[0], s.ts[1]
	}
	p.NumSACK = copy(p.SACK[:], s.sack)
	return p
}

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xb}
)

func etherType(ipPkt []byte) layers.EthernetType {
	if ipPkt[0]>>4 == 6 {
		return layers.EthernetTypeIPv6
	}
	return layers.EthernetTypeIPv4
}

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, ls...); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(buf.Bytes())
}

// Link framings of an IP packet.
func ethFrame(t testing.TB, ipPkt []byte) []byte {
	return serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: etherType(ipPkt)}, gopacket.Payload(ipPkt))
}

func vlanFrame(t testing.TB, ipPkt []byte) []byte {
	return serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeDot1Q},
		&layers.Dot1Q{VLANIdentifier: 100, Type: etherType(ipPkt)}, gopacket.Payload(ipPkt))
}

func qinqFrame(t testing.TB, ipPkt []byte) []byte {
	return serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeQinQ},
		&layers.Dot1Q{VLANIdentifier: 10, Type: layers.EthernetTypeDot1Q},
		&layers.Dot1Q{VLANIdentifier: 200, Type: etherType(ipPkt)}, gopacket.Payload(ipPkt))
}

func sllFrame(_ testing.TB, ipPkt []byte) []byte {
	h := make([]byte, 16)
	binary.BigEndian.PutUint16(h[0:], 0) // to us
	binary.BigEndian.PutUint16(h[2:], 1) // ARPHRD_ETHER
	binary.BigEndian.PutUint16(h[4:], 6) // address length
	copy(h[6:], macA)
	binary.BigEndian.PutUint16(h[14:], uint16(etherType(ipPkt)))
	return append(h, ipPkt...)
}

func sll2Frame(_ testing.TB, ipPkt []byte) []byte {
	h := make([]byte, 20)
	binary.BigEndian.PutUint16(h[0:], uint16(etherType(ipPkt)))
	binary.BigEndian.PutUint32(h[4:], 3) // ifindex
	binary.BigEndian.PutUint16(h[8:], 1) // ARPHRD_ETHER
	h[10] = 4                            // outgoing
	h[11] = 6
	copy(h[12:], macA)
	return append(h, ipPkt...)
}

func family(ipPkt []byte) uint32 {
	if ipPkt[0]>>4 == 6 {
		return 24 // BSD AF_INET6 (also accepted: 28, 30)
	}
	return 2
}

// nullFrame is DLT_NULL: the family in the capturing host's byte order (little-endian here).
func nullFrame(_ testing.TB, ipPkt []byte) []byte {
	return append(binary.LittleEndian.AppendUint32(nil, family(ipPkt)), ipPkt...)
}

// loopFrame is DLT_LOOP (OpenBSD): the family in network byte order.
func loopFrame(_ testing.TB, ipPkt []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, family(ipPkt)), ipPkt...)
}

func rawFrame(_ testing.TB, ipPkt []byte) []byte { return bytes.Clone(ipPkt) }

type framing struct {
	name string
	lt   layers.LinkType
	f    func(testing.TB, []byte) []byte
}

var framings = []framing{
	{"ethernet", layers.LinkTypeEthernet, ethFrame},
	{"vlan", layers.LinkTypeEthernet, vlanFrame},
	{"qinq", layers.LinkTypeEthernet, qinqFrame},
	{"sll", layers.LinkTypeLinuxSLL, sllFrame},
	{"sll2", layers.LinkTypeLinuxSLL2, sll2Frame},
	{"null", layers.LinkTypeNull, nullFrame},
	{"loop", layers.LinkTypeLoop, loopFrame},
	{"raw101", layers.LinkTypeRaw, rawFrame},
	{"raw12", 12, rawFrame},
	{"raw14", 14, rawFrame},
}

// Segments covering the option and address variants.
var segs = []seg{
	{src: cli4, dst: srv4, sport: 40000, dport: 80, seq: 1000, ipid: 0xfffe, flags: FlagSYN, win: 64240,
		mss: 1460, wscale: 7, sackOK: true, ts: &[2]uint32{12345, 0}},
	{src: srv4, dst: cli4, sport: 80, dport: 40000, seq: 5000, ack: 1001, flags: FlagSYN | FlagACK, win: 65160,
		mss: 1400, wscale: 14, sackOK: true, ts: &[2]uint32{999, 12345}},
	{src: cli4, dst: srv4, sport: 40000, dport: 80, seq: 1001, ack: 5001, ipid: 7, flags: FlagACK | FlagPSH, win: 502,
		wscale: -1, ts: &[2]uint32{12350, 999}, payload: []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
	{src: srv4, dst: cli4, sport: 80, dport: 40000, seq: 5001, ack: 1028, flags: FlagACK, win: 500,
		wscale: -1, sack: []SACKBlock{{1, 2}, {3, 4}, {5, 6}}},
	{src: cli6, dst: srv6, sport: 50000, dport: 443, seq: 7, flags: FlagSYN, win: 1000, mss: 1440, wscale: 0},
	{src: srv6, dst: cli6, sport: 443, dport: 50000, seq: 9, ack: 8, flags: FlagACK | FlagFIN, win: 1,
		wscale: -1, payload: []byte("bye"), v6ext: true},
	{src: cli6, dst: srv6, sport: 50000, dport: 443, seq: 8, ack: 10, flags: FlagRST | FlagURG, win: 0,
		wscale: -1, payload: bytes.Repeat([]byte{0xab}, 100), v6extNoHBH: true},
}

// rec is a frame with its capture time.
type rec struct {
	ts   time.Time
	data []byte
	lt   layers.LinkType
}

// writePcap writes recs as a classic pcap file (ns or µs magic).
func writePcap(t testing.TB, path string, lt layers.LinkType, nanos bool, gz bool, recs []rec) {
	t.Helper()
	var buf bytes.Buffer
	var w *pcapgo.Writer
	if nanos {
		w = pcapgo.NewWriterNanos(&buf)
	} else {
		w = pcapgo.NewWriter(&buf)
	}
	if err := w.WriteFileHeader(65536, lt); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		ci := gopacket.CaptureInfo{Timestamp: r.ts, CaptureLength: len(r.data), Length: len(r.data)}
		if err := w.WritePacket(ci, r.data); err != nil {
			t.Fatal(err)
		}
	}
	writeMaybeGz(t, path, buf.Bytes(), gz)
}

// writePcapng writes recs as pcapng, one interface per distinct link type.
func writePcapng(t testing.TB, path string, gz bool, recs []rec) {
	t.Helper()
	var buf bytes.Buffer
	ids := map[layers.LinkType]int{}
	var w *pcapgo.NgWriter
	for _, r := range recs {
		if _, ok := ids[r.lt]; ok {
			continue
		}
		intf := pcapgo.DefaultNgInterface
		intf.LinkType = r.lt
		intf.Name = r.lt.String()
		var err error
		if w == nil {
			w, err = pcapgo.NewNgWriterInterface(&buf, intf, pcapgo.DefaultNgWriterOptions)
			ids[r.lt] = 0
		} else {
			ids[r.lt], err = w.AddInterface(intf)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range recs {
		ci := gopacket.CaptureInfo{Timestamp: r.ts, CaptureLength: len(r.data), Length: len(r.data), InterfaceIndex: ids[r.lt]}
		if err := w.WritePacket(ci, r.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	writeMaybeGz(t, path, buf.Bytes(), gz)
}

func writeMaybeGz(t testing.TB, path string, b []byte, gz bool) {
	t.Helper()
	if gz {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(b)
		zw.Close()
		b = z.Bytes()
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func tmp(t testing.TB, name string) string { return filepath.Join(t.TempDir(), name) }

// readAll drains a Source, copying payloads.
func readAll(t testing.TB, s Source) ([]Packet, error) {
	t.Helper()
	var out []Packet
	var p Packet
	for i := 0; i < 10_000_000; i++ {
		if err := s.Next(&p); err != nil {
			return out, err
		}
		q := p
		q.Payload = bytes.Clone(p.Payload)
		out = append(out, q)
	}
	t.Fatal("source never ended")
	return nil, nil
}

func samePacket(t testing.TB, what string, got, want Packet) {
	t.Helper()
	gp, wp := got.Payload, want.Payload
	got.Payload, want.Payload = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
	if !bytes.Equal(gp, wp) {
		t.Errorf("%s: payload %q, want %q", what, gp, wp)
	}
}

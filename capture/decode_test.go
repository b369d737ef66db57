package capture

import (
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

func TestDecodeLinkTypes(t *testing.T) {
	for _, fr := range framings {
		for i, s := range segs {
			name := fmt.Sprintf("%s/seg%d", fr.name, i)
			d := NewDecoder()
			var p Packet
			p.Interface, p.Timestamp = 7, 42 // Decode must leave these alone
			frame := fr.f(t, s.ip(t))
			if !d.Decode(fr.lt, frame, &p) {
				t.Errorf("%s: not decoded: %v", name, d.Stats())
				continue
			}
			want := s.want()
			want.Interface, want.Timestamp = 7, 42
			samePacket(t, name, p, want)
			if st := d.Stats(); st.Frames != 1 || st.TCP != 1 || st.SkippedTotal() != 0 {
				t.Errorf("%s: stats %v", name, st)
			}
		}
	}
}

// Reusing one Packet must not leak options from the previous segment.
func TestDecodeReusesPacket(t *testing.T) {
	d := NewDecoder()
	var p Packet
	for _, i := range []int{0, 3, 2, 1, 4} {
		if !d.Decode(layers.LinkTypeEthernet, ethFrame(t, segs[i].ip(t)), &p) {
			t.Fatalf("seg %d not decoded", i)
		}
		samePacket(t, fmt.Sprint("seg", i), p, segs[i].want())
	}
}

func TestDecodeLoopbackIPv6Families(t *testing.T) {
	for _, fam := range []uint32{10, 24, 28, 30} {
		s := segs[4]
		frame := append(binary.LittleEndian.AppendUint32(nil, fam), s.ip(t)...)
		d := NewDecoder()
		var p Packet
		if !d.Decode(layers.LinkTypeNull, frame, &p) {
			t.Fatalf("family %d: %v", fam, d.Stats())
		}
		samePacket(t, fmt.Sprint("family ", fam), p, s.want())
	}
}

// The snap length cuts the payload: Payload is what was captured,
// PayloadLen what the IP header says was sent.
func TestDecodeSnaplenCut(t *testing.T) {
	for _, s := range []seg{segs[2], segs[6]} {
		full := ethFrame(t, s.ip(t))
		frame := full[:len(full)-10]
		d := NewDecoder()
		var p Packet
		if !d.Decode(layers.LinkTypeEthernet, frame, &p) {
			t.Fatalf("not decoded: %v", d.Stats())
		}
		if p.PayloadLen != len(s.payload) || len(p.Payload) != len(s.payload)-10 {
			t.Errorf("PayloadLen %d len(Payload) %d, want %d and %d", p.PayloadLen, len(p.Payload), len(s.payload), len(s.payload)-10)
		}
	}
}

// Ethernet pads short frames to 60 bytes; the padding is not payload.
func TestDecodeEthernetPadding(t *testing.T) {
	s := segs[3]
	s.sack = nil
	frame := ethFrame(t, s.ip(t))
	if len(frame) < 60 { // gopacket's serializer may already have padded it
		frame = append(frame, make([]byte, 60-len(frame))...)
	}
	if len(frame) != 60 || 14+20+20 >= 60 {
		t.Fatalf("frame %d bytes, want a padded 60", len(frame))
	}
	d := NewDecoder()
	var p Packet
	if !d.Decode(layers.LinkTypeEthernet, frame, &p) {
		t.Fatal(d.Stats())
	}
	if p.PayloadLen != 0 || len(p.Payload) != 0 {
		t.Errorf("PayloadLen %d Payload %q, want none", p.PayloadLen, p.Payload)
	}
}

func ipv4Frag(t testing.TB, s seg, offset uint16, more bool) []byte {
	b := s.ip(t)
	ff := offset
	if more {
		ff |= 1 << 13
	}
	binary.BigEndian.PutUint16(b[6:8], ff)
	return b
}

// ipv6Frag inserts a fragment header after the fixed IPv6 header.
func ipv6Frag(t testing.TB, s seg, offset uint16, more bool) []byte {
	b := s.ip(t)
	fh := []byte{b[6], 0, 0, 0, 0, 0, 0, 1}
	ff := offset << 3
	if more {
		ff |= 1
	}
	binary.BigEndian.PutUint16(fh[2:4], ff)
	b[6] = 44
	binary.BigEndian.PutUint16(b[4:6], binary.BigEndian.Uint16(b[4:6])+8)
	return append(b[:40:40], append(fh, b[40:]...)...)
}

func TestDecodeFragments(t *testing.T) {
	s4, s6 := segs[2], segs[6]
	s6.v6extNoHBH = false
	cases := []struct {
		name  string
		frame []byte
		ok    bool
	}{
		{"v4 first", ipv4Frag(t, s4, 0, true), true},
		{"v4 middle", ipv4Frag(t, s4, 185, true), false},
		{"v4 last", ipv4Frag(t, s4, 370, false), false},
		{"v6 first", ipv6Frag(t, s6, 0, true), true},
		{"v6 last", ipv6Frag(t, s6, 100, false), false},
		{"v6 atomic", ipv6Frag(t, s6, 0, false), true}, // not really fragmented
	}
	for _, c := range cases {
		d := NewDecoder()
		var p Packet
		ok := d.Decode(layers.LinkTypeRaw, c.frame, &p)
		st := d.Stats()
		if ok != c.ok {
			t.Errorf("%s: decoded %v, want %v (%v)", c.name, ok, c.ok, st)
			continue
		}
		if !ok {
			if st.Skipped[ReasonFragment] != 1 {
				t.Errorf("%s: %v, want one fragment", c.name, st)
			}
			continue
		}
		want := s4.want()
		if strings.HasPrefix(c.name, "v6") {
			want = s6.want()
		}
		samePacket(t, c.name, p, want)
		if wantFirst := uint64(0); c.name != "v6 atomic" && st.FirstFragments != 1 || c.name == "v6 atomic" && st.FirstFragments != wantFirst {
			t.Errorf("%s: FirstFragments %d", c.name, st.FirstFragments)
		}
	}
}

func udpFrame(t testing.TB) []byte {
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IP(cli4.AsSlice()), DstIP: net.IP(srv4.AsSlice())}
	udp := &layers.UDP{SrcPort: 5353, DstPort: 53}
	udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, serOpts,
		&layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}, ip, udp, gopacket.Payload("q")); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func arpFrame(t testing.TB) []byte {
	return serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: macA, SourceProtAddress: cli4.AsSlice(),
			DstHwAddress: make([]byte, 6), DstProtAddress: srv4.AsSlice()})
}

func icmpFrame(t testing.TB) []byte {
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolICMPv4,
		SrcIP: net.IP(cli4.AsSlice()), DstIP: net.IP(srv4.AsSlice())}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, serOpts, ip,
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0)}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type badFrame struct {
	name   string
	lt     layers.LinkType
	frame  []byte
	reason Reason
}

func malformedFrames(t testing.TB) []badFrame {
	v4 := segs[2].ip(t)
	v6 := segs[6].ip(t)
	with := func(b []byte, f func([]byte)) []byte { b = append([]byte(nil), b...); f(b); return b }
	eth := func(b []byte) []byte { return ethFrame(t, b) }
	return []badFrame{
		{"short ethernet", layers.LinkTypeEthernet, ethFrame(t, v4)[:10], ReasonTruncatedLink},
		{"ethernet only", layers.LinkTypeEthernet, ethFrame(t, v4)[:14], ReasonTruncatedIP},
		{"vlan cut", layers.LinkTypeEthernet, vlanFrame(t, v4)[:16], ReasonTruncatedLink},
		{"short sll", layers.LinkTypeLinuxSLL, sllFrame(t, v4)[:10], ReasonTruncatedLink},
		{"short sll2", layers.LinkTypeLinuxSLL2, sll2Frame(t, v4)[:12], ReasonTruncatedLink},
		{"short null", layers.LinkTypeNull, []byte{2, 0}, ReasonTruncatedLink},
		{"bad null family", layers.LinkTypeNull, append([]byte{1, 2, 3, 4}, v4...), ReasonBadLinkHeader},
		{"unknown null family", layers.LinkTypeNull, append([]byte{99, 0, 0, 0}, v4...), ReasonNotTCP},
		{"ip header cut", layers.LinkTypeEthernet, eth(v4)[:24], ReasonTruncatedIP},
		{"v6 header cut", layers.LinkTypeRaw, v6[:30], ReasonTruncatedIP},
		{"v6 ext cut", layers.LinkTypeRaw, v6[:44], ReasonTruncatedIP},
		{"empty raw", layers.LinkTypeRaw, nil, ReasonTruncatedIP},
		{"raw version 5", layers.LinkTypeRaw, with(v4, func(b []byte) { b[0] = 0x55 }), ReasonBadIPVersion},
		{"ethertype v4 holds v6", layers.LinkTypeEthernet,
			serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}, gopacket.Payload(v6)), ReasonBadIPVersion},
		{"ethertype v6 holds v4", layers.LinkTypeEthernet,
			serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv6}, gopacket.Payload(append(v4, make([]byte, 40)...))), ReasonBadIPVersion},
		{"IHL 4", layers.LinkTypeRaw, with(v4, func(b []byte) { b[0] = 0x44 }), ReasonBadIPHeaderLen},
		{"IHL 15 short", layers.LinkTypeRaw, with(v4, func(b []byte) { b[0] = 0x4f })[:40], ReasonTruncatedIP},
		{"total length 10", layers.LinkTypeRaw, with(v4, func(b []byte) { binary.BigEndian.PutUint16(b[2:], 10) }), ReasonBadIPLength},
		{"tcp cut", layers.LinkTypeRaw, v4[:30], ReasonTruncatedTCP},
		{"tcp absent", layers.LinkTypeRaw, v4[:20], ReasonTruncatedTCP},
		{"tcp offset 4", layers.LinkTypeRaw, with(v4, func(b []byte) { b[32] = 4 << 4 }), ReasonBadTCPDataOffset},
		{"tcp offset beyond ip", layers.LinkTypeRaw, with(v4, func(b []byte) {
			binary.BigEndian.PutUint16(b[2:], 20+24) // IP says 24 bytes of TCP, header claims 60
			b[32] = 15 << 4
		}), ReasonBadTCPDataOffset},
		{"v4 non-first fragment", layers.LinkTypeRaw, ipv4Frag(t, segs[2], 8, false), ReasonFragment},
		{"udp", layers.LinkTypeEthernet, udpFrame(t), ReasonNotTCP},
		{"arp", layers.LinkTypeEthernet, arpFrame(t), ReasonNotTCP},
		{"icmp", layers.LinkTypeRaw, icmpFrame(t), ReasonNotTCP},
		{"link type 9999", 9999, ethFrame(t, v4), ReasonUnsupportedLink},
	}
}

func TestDecodeMalformed(t *testing.T) {
	all := NewDecoder()
	var p Packet
	for _, c := range malformedFrames(t) {
		d := NewDecoder()
		if d.Decode(c.lt, c.frame, &p) {
			t.Errorf("%s: decoded %+v", c.name, p)
			continue
		}
		all.Decode(c.lt, c.frame, &p)
		st := d.Stats()
		if st.Skipped[c.reason] != 1 || st.SkippedTotal() != 1 || st.Frames != 1 || st.TCP != 0 {
			t.Errorf("%s: %v, want one %q", c.name, st, c.reason)
		}
	}
	st := all.Stats()
	if st.Frames != st.TCP+st.SkippedTotal() {
		t.Errorf("inconsistent %v", st)
	}
	m := st.Map()
	if m["not TCP"] != 4 || m["truncated IP"] != 6 {
		t.Errorf("Map %v", m)
	}
	if s := st.String(); !strings.Contains(s, "not TCP=4") || !strings.Contains(s, "frames=27") {
		t.Errorf("String %q", s)
	}
}

// The hot path must not allocate: one decoder, every common framing.
func TestDecodeZeroAllocs(t *testing.T) {
	type in struct {
		lt    layers.LinkType
		frame []byte
	}
	var frames []in
	for _, fr := range framings {
		for _, s := range segs {
			if s.v6ext { // gopacket allocates per hop-by-hop option
				continue
			}
			frames = append(frames, in{fr.lt, fr.f(t, s.ip(t))})
		}
	}
	d := NewDecoder()
	var p Packet
	for _, f := range frames { // warm up: TCP option slice grows once
		d.Decode(f.lt, f.frame, &p)
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, f := range frames {
			if !d.Decode(f.lt, f.frame, &p) {
				t.Fatal("not decoded")
			}
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per %d frames, want 0", allocs, len(frames))
	}
	// Skipping non-TCP is on the hot path too.
	udp := udpFrame(t)
	if a := testing.AllocsPerRun(100, func() { d.Decode(layers.LinkTypeEthernet, udp, &p) }); a != 0 {
		t.Errorf("UDP skip: %v allocations", a)
	}
}

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Reasons() {
		n := r.String()
		if n == "" || seen[n] || strings.HasPrefix(n, "reason(") {
			t.Errorf("reason %d name %q", r, n)
		}
		seen[n] = true
	}
	if len(seen) != int(numReasons) {
		t.Errorf("%d names", len(seen))
	}
}

// IP-in-IP (6in4 here) decodes to the inner packet's addresses and lengths.
func TestDecodeTunnel(t *testing.T) {
	inner := segs[6].ip(t)
	outer := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolIPv6,
		SrcIP: net.IP(cli4.AsSlice()), DstIP: net.IP(srv4.AsSlice())}
	frame := serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}, outer, gopacket.Payload(inner))
	// serialize does not fix lengths; set the outer total length by hand.
	binary.BigEndian.PutUint16(frame[14+2:], uint16(20+len(inner)))
	frame[14] = 0x45
	d := NewDecoder()
	var p Packet
	if !d.Decode(layers.LinkTypeEthernet, frame, &p) {
		t.Fatal(d.Stats())
	}
	samePacket(t, "6in4", p, segs[6].want())
}

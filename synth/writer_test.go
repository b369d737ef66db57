package synth

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/rtmon/rtmon/capture"
)

// want is what one segment must decode to.
type want struct {
	t        int64
	toServer bool
	seq, ack uint32
	flags    uint8
	payload  []byte
}

// readBack is one packet as read from a file.
type readBack struct {
	ci   gopacket.CaptureInfo
	data []byte
}

// readAll reads every packet of a (possibly gzipped) pcap or pcapng stream.
func readAll(t *testing.T, raw []byte, opts Options) (layers.LinkType, []readBack) {
	t.Helper()
	var r io.Reader = bytes.NewReader(raw)
	if opts.Gzip {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatalf("gunzip: %v", err)
		}
		r = zr
	}
	type source interface {
		ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
	}
	var src source
	var lt layers.LinkType
	if opts.Format == PCAP {
		pr, err := pcapgo.NewReader(r)
		if err != nil {
			t.Fatalf("pcap reader: %v", err)
		}
		if got := pr.Resolution().ToDuration().Nanoseconds(); opts.Nanosecond && got != 1 || !opts.Nanosecond && got != 1000 {
			t.Fatalf("pcap resolution %dns", got)
		}
		src, lt = pr, pr.LinkType()
	} else {
		nr, err := pcapgo.NewNgReader(r, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			t.Fatalf("pcapng reader: %v", err)
		}
		if got := nr.Resolution().ToDuration().Nanoseconds(); opts.Nanosecond && got != 1 || !opts.Nanosecond && got != 1000 {
			t.Fatalf("pcapng resolution %dns", got)
		}
		src, lt = nr, nr.LinkType()
	}
	var out []readBack
	for {
		data, ci, err := src.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading packet %d: %v", len(out), err)
		}
		out = append(out, readBack{ci, append([]byte(nil), data...)})
	}
	return lt, out
}

// script writes a conversation exercising every Conn method, with ISNs just
// below 2^32 so both sequence spaces wrap, and returns what each segment must be.
func script(w *Writer, client, server netip.AddrPort, o ConnOptions) []want {
	const cISN, sISN = 0xFFFFFFF0, 0xFFFFFFFE
	c := w.ConnWith(client, server, cISN, sISN, o)
	req := Request("GET", "www.example.com", "/index.html", "User-Agent: synth-test")
	resp := ResponseLen(200, "text/html", 3000)
	var ws []want
	add := func(t int64, toServer bool, seq, ack uint32, flags uint8, p []byte) {
		ws = append(ws, want{t, toServer, seq, ack, flags, p})
	}
	const A, S, F, P, R = capture.FlagACK, capture.FlagSYN, capture.FlagFIN, capture.FlagPSH, capture.FlagRST
	t0 := T(10)
	c.SYN(t0)
	add(t0, true, cISN, 0, S, nil)
	c.SYN(t0 + 1e9)
	add(t0+1e9, true, cISN, 0, S, nil)
	c.SYNACK(t0 + 1e9 + 7)
	add(t0+1e9+7, false, sISN, 0xFFFFFFF1, S|A, nil)
	c.ACK(T(11.1))
	add(T(11.1), true, 0xFFFFFFF1, 0xFFFFFFFF, A, nil)
	c.Client(T(11.1)+1, req)
	add(T(11.1)+1, true, 0xFFFFFFF1, 0xFFFFFFFF, P|A, req)
	cEnd := uint32(0xFFFFFFF1) + uint32(len(req)) // wrapped
	c.ServerAck(T(11.15))
	add(T(11.15), false, 0xFFFFFFFF, cEnd, A, nil)
	times := c.ServerMSS(T(11.2), resp, 1460, 12345)
	seqs := []uint32{0xFFFFFFFF, 1459, 2919}
	for i, s := range seqs {
		end := min((i+1)*1460, len(resp))
		fl := A
		if end == len(resp) {
			fl |= P
		}
		add(T(11.2)+int64(i)*12345, false, s, cEnd, fl, resp[i*1460:end])
		if times[i] != T(11.2)+int64(i)*12345 {
			panic(fmt.Sprintf("ServerMSS time %d = %d", i, times[i]))
		}
	}
	c.ClientAckTo(T(11.3), 1460)
	add(T(11.3), true, cEnd, 1459, A, nil)
	c.ServerAt(T(11.5), 1460, resp[1460:2920]) // retransmission
	add(T(11.5), false, 1459, cEnd, P|A, resp[1460:2920])
	c.ClientAck(T(11.6))
	sEnd := uint32(0xFFFFFFFF) + uint32(len(resp))
	add(T(11.6), true, cEnd, sEnd, A, nil)
	c.SkipClient(100) // a client segment the capture missed
	c.ClientAt(T(11.7), 0, req[:10])
	add(T(11.7), true, 0xFFFFFFF1, sEnd, P|A, req[:10])
	c.ServerFIN(T(12))
	add(T(12), false, sEnd, cEnd+100, F|A, nil)
	c.ClientFIN(T(12.2))
	add(T(12.2), true, cEnd+100, sEnd+1, F|A, nil)
	c.ServerAckTo(T(12.2)+5, uint32(len(req))+101)
	add(T(12.2)+5, false, sEnd+1, cEnd+101, A, nil)
	c.SkipServer(10)
	c.ServerRST(T(13))
	add(T(13), false, sEnd+11, cEnd+101, R|A, nil)
	c.ClientRST(T(13.5))
	add(T(13.5), true, cEnd+101, sEnd+11, R|A, nil)
	return ws
}

func TestWriterRoundTrip(t *testing.T) {
	v4c, v4s := netip.MustParseAddrPort("198.51.100.7:51000"), netip.MustParseAddrPort("203.0.113.5:80")
	v6c, v6s := netip.MustParseAddrPort("[2001:db8::7]:51000"), netip.MustParseAddrPort("[2001:db8:1::5]:443")
	type tcase struct {
		opts   Options
		v6     bool
		hbh    bool
		tsOpts bool
	}
	var cases []tcase
	for _, f := range []Format{PCAP, PCAPNG} {
		for _, lt := range []LinkType{Ethernet, LinuxSLL, LinuxSLL2, RawIP, Null} {
			vlanSets := [][]uint16{nil}
			if lt == Ethernet {
				vlanSets = [][]uint16{nil, {100}, {200, 300}}
			}
			for _, vl := range vlanSets {
				for _, gz := range []bool{false, true} {
					for _, ns := range []bool{false, true} {
						for _, v6 := range []bool{false, true} {
							cases = append(cases, tcase{opts: Options{Format: f, LinkType: lt, VLANs: vl, Gzip: gz, Nanosecond: ns}, v6: v6, hbh: v6 && ns, tsOpts: !gz})
						}
					}
				}
			}
		}
	}
	// Snap length cuts, with the original lengths preserved.
	cases = append(cases, tcase{opts: Options{Snaplen: 96}}, tcase{opts: Options{Format: PCAPNG, Snaplen: 128, LinkType: LinuxSLL2}, v6: true, hbh: true})
	for _, tc := range cases {
		name := fmt.Sprintf("f%d/%v/vlan%d/gz%v/ns%v/v6%v/hbh%v/snap%d", tc.opts.Format, tc.opts.LinkType, len(tc.opts.VLANs), tc.opts.Gzip, tc.opts.Nanosecond, tc.v6, tc.hbh, tc.opts.Snaplen)
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			cl, sv := v4c, v4s
			if tc.v6 {
				cl, sv = v6c, v6s
			}
			o := DefaultConnOptions()
			o.HopByHop = tc.hbh
			if !tc.tsOpts {
				o = ConnOptions{MSS: 1400, WindowScale: -1, Window: 1000, HopByHop: tc.hbh}
			}
			ws := script(w, cl, sv, o)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if !tc.opts.Gzip && w.Bytes() != int64(buf.Len()) {
				t.Errorf("Bytes() = %d, file has %d", w.Bytes(), buf.Len())
			}
			lt, pkts := readAll(t, buf.Bytes(), tc.opts)
			wantLT, _ := tc.opts.LinkType.layersType()
			if lt != wantLT {
				t.Fatalf("link type %v, want %v", lt, wantLT)
			}
			if len(pkts) != len(ws) {
				t.Fatalf("%d packets, want %d", len(pkts), len(ws))
			}
			// TSval ticks at 1 kHz: within one direction it advances by
			// exactly the elapsed whole milliseconds.
			lastTS := map[bool][2]int64{}
			for i, p := range pkts {
				tsval, ok := checkPacket(t, i, p, ws[i], tc.opts, lt, cl, sv, o, tc.v6)
				if !ok || !o.Timestamps {
					continue
				}
				if prev, seen := lastTS[ws[i].toServer]; seen {
					if got, want := int64(uint32(tsval)-uint32(prev[0])), ws[i].t/1e6-prev[1]/1e6; got != want {
						t.Errorf("pkt %d: TSval advanced %d, want %d", i, got, want)
					}
				}
				lastTS[ws[i].toServer] = [2]int64{int64(tsval), ws[i].t}
			}
		})
	}
}

func checkPacket(t *testing.T, i int, p readBack, wt want, opts Options, lt layers.LinkType, cl, sv netip.AddrPort, o ConnOptions, v6 bool) (uint32, bool) {
	t.Helper()
	wantTS := wt.t
	if !opts.Nanosecond {
		wantTS = wt.t / 1000 * 1000
	}
	if got := p.ci.Timestamp.UnixNano(); got != wantTS {
		t.Errorf("pkt %d: ts %d, want %d", i, got, wantTS)
	}
	if p.ci.CaptureLength != len(p.data) || (opts.Snaplen > 0 && len(p.data) > opts.Snaplen) {
		t.Errorf("pkt %d: caplen %d, data %d, snaplen %d", i, p.ci.CaptureLength, len(p.data), opts.Snaplen)
	}
	if opts.Snaplen == 0 && p.ci.Length != len(p.data) {
		t.Errorf("pkt %d: length %d != caplen %d", i, p.ci.Length, len(p.data))
	}
	pkt := gopacket.NewPacket(p.data, lt, gopacket.Default)
	src, dst := cl, sv
	if !wt.toServer {
		src, dst = sv, cl
	}
	// Link layer.
	switch opts.LinkType {
	case Ethernet:
		eth, _ := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		if eth == nil {
			t.Fatalf("pkt %d: no ethernet", i)
		}
		vl := pkt.Layers()
		var tags []uint16
		for _, l := range vl {
			if d, ok := l.(*layers.Dot1Q); ok {
				tags = append(tags, d.VLANIdentifier)
			}
		}
		if fmt.Sprint(tags) != fmt.Sprint(opts.VLANs) && !(len(tags) == 0 && len(opts.VLANs) == 0) {
			t.Errorf("pkt %d: vlan tags %v, want %v", i, tags, opts.VLANs)
		}
		wantET := layers.EthernetTypeIPv4
		if v6 {
			wantET = layers.EthernetTypeIPv6
		}
		switch len(opts.VLANs) {
		case 1:
			wantET = layers.EthernetTypeDot1Q
		case 2:
			wantET = layers.EthernetTypeQinQ
		}
		if eth.EthernetType != wantET {
			t.Errorf("pkt %d: ethertype %v, want %v", i, eth.EthernetType, wantET)
		}
	case LinuxSLL:
		sll, _ := pkt.Layer(layers.LayerTypeLinuxSLL).(*layers.LinuxSLL)
		if sll == nil {
			t.Fatalf("pkt %d: no SLL", i)
		}
		wantPT := layers.LinuxSLLPacketTypeOutgoing
		if wt.toServer {
			wantPT = layers.LinuxSLLPacketTypeHost
		}
		if sll.PacketType != wantPT {
			t.Errorf("pkt %d: sll packet type %v, want %v", i, sll.PacketType, wantPT)
		}
	case LinuxSLL2:
		sll, _ := pkt.Layer(layers.LayerTypeLinuxSLL2).(*layers.LinuxSLL2)
		if sll == nil {
			t.Fatalf("pkt %d: no SLL2", i)
		}
		if sll.InterfaceIndex != 2 || (sll.PacketType == layers.LinuxSLL2PacketTypeHost) != wt.toServer {
			t.Errorf("pkt %d: sll2 ifindex %d packet type %v", i, sll.InterfaceIndex, sll.PacketType)
		}
	case Null:
		lb, _ := pkt.Layer(layers.LayerTypeLoopback).(*layers.Loopback)
		if lb == nil {
			t.Fatalf("pkt %d: no loopback header", i)
		}
		if v6 != (lb.Family == layers.ProtocolFamilyIPv6BSD) {
			t.Errorf("pkt %d: family %v", i, lb.Family)
		}
	}
	// Network layer: addresses and the true length even when cut.
	var ipPayloadLen int
	if v6 {
		ip, _ := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		if ip == nil {
			t.Fatalf("pkt %d: no IPv6 (%v)", i, pkt)
		}
		if netip.AddrFrom16([16]byte(ip.SrcIP)) != src.Addr() || netip.AddrFrom16([16]byte(ip.DstIP)) != dst.Addr() {
			t.Errorf("pkt %d: addrs %v -> %v", i, ip.SrcIP, ip.DstIP)
		}
		hasHBH := pkt.Layer(layers.LayerTypeIPv6HopByHop) != nil
		if hasHBH != o.HopByHop {
			t.Errorf("pkt %d: hop-by-hop present %v, want %v", i, hasHBH, o.HopByHop)
		}
		ipPayloadLen = int(ip.Length)
		if o.HopByHop {
			ipPayloadLen -= 8
		}
	} else {
		ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if ip == nil {
			t.Fatalf("pkt %d: no IPv4 (%v)", i, pkt)
		}
		if a, _ := netip.AddrFromSlice(ip.SrcIP); a != src.Addr() {
			t.Errorf("pkt %d: src %v", i, ip.SrcIP)
		}
		if a, _ := netip.AddrFromSlice(ip.DstIP); a != dst.Addr() {
			t.Errorf("pkt %d: dst %v", i, ip.DstIP)
		}
		ipPayloadLen = int(ip.Length) - int(ip.IHL)*4
	}
	tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if tcp == nil {
		if opts.Snaplen > 0 {
			return 0, false // cut inside the TCP header; lengths checked above
		}
		t.Fatalf("pkt %d: no TCP", i)
	}
	if uint16(tcp.SrcPort) != src.Port() || uint16(tcp.DstPort) != dst.Port() {
		t.Errorf("pkt %d: ports %d -> %d", i, tcp.SrcPort, tcp.DstPort)
	}
	if tcp.Seq != wt.seq || tcp.Ack != wt.ack {
		t.Errorf("pkt %d: seq %#x ack %#x, want %#x %#x", i, tcp.Seq, tcp.Ack, wt.seq, wt.ack)
	}
	var flags uint8
	for bit, on := range map[uint8]bool{capture.FlagFIN: tcp.FIN, capture.FlagSYN: tcp.SYN, capture.FlagRST: tcp.RST, capture.FlagPSH: tcp.PSH, capture.FlagACK: tcp.ACK, capture.FlagURG: tcp.URG} {
		if on {
			flags |= bit
		}
	}
	if flags != wt.flags {
		t.Errorf("pkt %d: flags %#x, want %#x", i, flags, wt.flags)
	}
	if got := ipPayloadLen - int(tcp.DataOffset)*4; got != len(wt.payload) {
		t.Errorf("pkt %d: payload length from IP header %d, want %d", i, got, len(wt.payload))
	}
	if opts.Snaplen == 0 && !bytes.Equal(tcp.Payload, wt.payload) {
		t.Errorf("pkt %d: payload %q, want %q", i, tcp.Payload, wt.payload)
	}
	if opts.Snaplen > 0 && !bytes.HasPrefix(wt.payload, tcp.Payload) {
		t.Errorf("pkt %d: cut payload %q is not a prefix", i, tcp.Payload)
	}
	if opts.Snaplen == 0 {
		checkChecksum(t, i, pkt)
	}
	return checkOptions(t, i, tcp, wt, o), true
}

func checkOptions(t *testing.T, i int, tcp *layers.TCP, wt want, o ConnOptions) uint32 {
	t.Helper()
	var mss uint16
	var sack, ts bool
	ws := -1
	var tsval uint32
	for _, op := range tcp.Options {
		switch op.OptionType {
		case layers.TCPOptionKindMSS:
			mss = binary.BigEndian.Uint16(op.OptionData)
		case layers.TCPOptionKindSACKPermitted:
			sack = true
		case layers.TCPOptionKindWindowScale:
			ws = int(op.OptionData[0])
		case layers.TCPOptionKindTimestamps:
			ts = true
			tsval = binary.BigEndian.Uint32(op.OptionData)
		}
	}
	syn := wt.flags&capture.FlagSYN != 0
	wantMSS, wantSACK, wantWS := uint16(0), false, -1
	if syn {
		wantMSS, wantSACK, wantWS = o.MSS, o.SACKPerm, int(o.WindowScale)
	}
	if mss != wantMSS || sack != wantSACK || ws != wantWS || ts != o.Timestamps {
		t.Errorf("pkt %d: options mss=%d sack=%v ws=%d ts=%v, want %d %v %d %v", i, mss, sack, ws, ts, wantMSS, wantSACK, wantWS, o.Timestamps)
	}
	if !syn && tcp.Window != o.Window {
		t.Errorf("pkt %d: window %d, want %d", i, tcp.Window, o.Window)
	}
	return tsval
}

// checkChecksum recomputes the TCP checksum gopacket-independently.
func checkChecksum(t *testing.T, i int, pkt gopacket.Packet) {
	t.Helper()
	tcpL := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
	seg := append(append([]byte(nil), tcpL.Contents...), tcpL.Payload...)
	var sum uint32
	add := func(b []byte) {
		for len(b) >= 2 {
			sum += uint32(b[0])<<8 | uint32(b[1])
			b = b[2:]
		}
		if len(b) == 1 {
			sum += uint32(b[0]) << 8
		}
	}
	if ip, ok := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
		add(ip.SrcIP.To4())
		add(ip.DstIP.To4())
	} else {
		ip := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		add(ip.SrcIP)
		add(ip.DstIP)
		sum += uint32(len(seg)>>16) + uint32(len(seg)&0xffff)
		sum += 6
		add(seg)
		for sum>>16 != 0 {
			sum = sum&0xffff + sum>>16
		}
		if sum != 0xffff {
			t.Errorf("pkt %d: bad TCP checksum (sum %#x)", i, sum)
		}
		return
	}
	sum += 6 + uint32(len(seg))
	add(seg)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	if sum != 0xffff {
		t.Errorf("pkt %d: bad TCP checksum (sum %#x)", i, sum)
	}
}

func TestT(t *testing.T) {
	if T(0) != 1767225600*1e9 {
		t.Fatalf("T(0) = %d", T(0))
	}
	if T(0.0015)-T(0) != 1500000 || T(-1) != T(0)-1e9 {
		t.Fatalf("T arithmetic: %d %d", T(0.0015)-T(0), T(-1)-T(0))
	}
}

func TestWriterErrors(t *testing.T) {
	if _, err := NewWriter(io.Discard, Options{LinkType: RawIP, VLANs: []uint16{1}}); err == nil {
		t.Error("VLAN on raw IP accepted")
	}
	if _, err := NewWriter(io.Discard, Options{VLANs: []uint16{1, 2, 3}}); err == nil {
		t.Error("three VLAN tags accepted")
	}
	w, err := NewWriter(io.Discard, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := w.Conn(netip.MustParseAddrPort("198.51.100.1:1000"), netip.MustParseAddrPort("[2001:db8::1]:80"), 1, 2)
	c.SYN(T(0))
	if w.Close() == nil || w.Packets() != 0 {
		t.Errorf("mixed families: err %v, packets %d", w.Err(), w.Packets())
	}
}

// TestWriterSACKAndIPID round-trips SACK blocks and explicit IP IDs through
// rtmon's own decoder, and rejects options that do not fit.
func TestWriterSACKAndIPID(t *testing.T) {
	cl, sv := netip.MustParseAddrPort("198.51.100.7:51000"), netip.MustParseAddrPort("203.0.113.5:80")
	blocks := []capture.SACKBlock{{Left: 0xFFFFFF00, Right: 0x10}, {Left: 100, Right: 200}, {Left: 300, Right: 400}, {Left: 500, Right: 600}}
	for _, tc := range []struct {
		ts   bool
		n    int
		ok   bool
		ipid uint16
	}{{true, 1, true, 0}, {true, 3, true, 7}, {true, 4, false, 0}, {false, 4, true, 0xFFFF}} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := Segment{Time: T(1), Src: cl, Dst: sv, Seq: 1, Ack: 2, Flags: capture.FlagACK, Window: 502, WindowScale: -1,
			Timestamps: tc.ts, TSVal: 11, TSEcr: 22, IPID: tc.ipid, HasIPID: true, ToServer: true}
		s.NumSACK = copy(s.SACK[:], blocks[:tc.n])
		err = w.WriteSegment(&s)
		if cerr := w.Close(); (err == nil) != tc.ok || (cerr == nil) != tc.ok {
			t.Fatalf("%d blocks with timestamps %v: write error %v, close %v", tc.n, tc.ts, err, cerr)
		}
		if !tc.ok {
			continue
		}
		lt, pkts := readAll(t, buf.Bytes(), Options{})
		var p capture.Packet
		if !capture.NewDecoder().Decode(lt, pkts[0].data, &p) {
			t.Fatalf("%d blocks: capture cannot decode the packet", tc.n)
		}
		if p.NumSACK != tc.n || !slices.Equal(p.SACK[:p.NumSACK], blocks[:tc.n]) || p.IPID != tc.ipid ||
			p.HasTimestamps != tc.ts || tc.ts && (p.TSVal != 11 || p.TSEcr != 22) {
			t.Errorf("%d blocks, ts %v: decoded %+v", tc.n, tc.ts, p)
		}
		// Linux's layout: NOP, NOP, TS, then NOP, NOP, SACK.
		opts := pkts[0].data[14+20+20 : 14+20+int(pkts[0].data[14+20+12]>>4)*4]
		want := []byte{1, 1, 5, byte(2 + 8*tc.n)}
		if tc.ts {
			want = append([]byte{1, 1, 8, 10}, append(make([]byte, 8), want...)...)
			copy(want[4:], []byte{0, 0, 0, 11, 0, 0, 0, 22})
		}
		if !bytes.HasPrefix(opts, want) {
			t.Errorf("%d blocks, ts %v: options % x", tc.n, tc.ts, opts)
		}
	}
}

// TestConnLinuxPeers: per-connection IP IDs (the SYN/ACK carries 0, lost
// packets take a number), D-SACKs, old duplicates that do not move the
// client's echo, and the ClientRTT view of what reached the client.
func TestConnLinuxPeers(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Options{Nanosecond: true})
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultConnOptions()
	o.IPID, o.ClientRTT = IPIDPerConn, int64(100*time.Millisecond)
	c := w.ConnWith(netip.MustParseAddrPort("198.51.100.7:51000"), netip.MustParseAddrPort("203.0.113.5:80"), 1000, 5000, o)
	c.ClientIPID, c.ServerIPID = 0xFFFE, 300
	ms := func(x float64) int64 { return T(x / 1000) }
	c.SYN(ms(0))                                                                 // client 0xFFFE
	c.SYNACK(ms(50))                                                             // 0
	c.ClientLost()                                                               // 0xFFFF: the handshake ACK, lost
	c.Client(ms(100), []byte("GET"))                                             // client 0
	c.ServerAck(ms(100.1))                                                       // server 300
	c.ServerMSS(ms(120), Body(2000), 1460, 10)                                   // 301, 302
	c.ClientAckTo(ms(220), 2000)                                                 // client 1, echo the data at 120 ms
	c.ServerAt(ms(500), 1460, Body(540))                                         // a probe of the tail: 303, echoed
	c.ClientAckToSACK(ms(600), 2000, capture.SACKBlock{Left: 1460, Right: 2000}) // client 2
	c.ServerDupAt(ms(900), 0, Body(1460))                                        // an old duplicate: 304, not echoed
	c.ClientAckToSACK(ms(1000), 2000, capture.SACKBlock{Left: 0, Right: 1460})   // client 3
	c.ServerMSS(ms(1200), Body(100), 1460, 0)                                    // 305, not yet at the client at 1250 ms
	c.Client(ms(1250), []byte("GET"))                                            // client 4: acks 2000 only
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lt, pkts := readAll(t, buf.Bytes(), Options{Nanosecond: true})
	d := capture.NewDecoder()
	var got []capture.Packet
	for _, rb := range pkts {
		var p capture.Packet
		if !d.Decode(lt, rb.data, &p) {
			t.Fatal("undecodable packet")
		}
		got = append(got, p)
	}
	wantIDs := []uint16{0xFFFE, 0, 0, 300, 301, 302, 1, 303, 2, 304, 3, 305, 4}
	tsAt := func(x float64, side uint32) uint32 { return uint32(ms(x)/1e6) + side }
	sOff := uint32(5000) ^ 0xa5a5a5a5
	for i, p := range got {
		if p.IPID != wantIDs[i] {
			t.Errorf("packet %d: IP ID %d, want %d", i, p.IPID, wantIDs[i])
		}
	}
	for _, tc := range []struct {
		i    int
		echo uint32
		ack  uint32
	}{{6, tsAt(120, sOff), 2000}, {8, tsAt(500, sOff), 2000}, {10, tsAt(500, sOff), 2000}, {12, tsAt(500, sOff), 2000}} {
		p := got[tc.i]
		if p.TSEcr != tc.echo || p.Ack != c.ServerSeq(tc.ack) {
			t.Errorf("packet %d: echo %d ack %d, want %d %d", tc.i, p.TSEcr, p.Ack-c.ServerSeq(0), tc.echo, tc.ack)
		}
	}
	if got[8].NumSACK != 1 || got[8].SACK[0] != (capture.SACKBlock{Left: c.ServerSeq(1460), Right: c.ServerSeq(2000)}) {
		t.Errorf("D-SACK: %+v", got[8].SACK)
	}
	// The SYN/ACK echoes the SYN.
	if got[1].TSEcr != got[0].TSVal {
		t.Errorf("SYN/ACK echoes %d, SYN's TSval %d", got[1].TSEcr, got[0].TSVal)
	}
}

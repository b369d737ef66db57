package capture

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Link types that gopacket names differently or not at all. DLT_RAW is 12 on
// most systems and 14 on OpenBSD; pcap files should say LINKTYPE_RAW (101)
// but libpcap hands the DLT value to live and some offline readers.
const (
	linkTypeDLTRaw12 layers.LinkType = 12
	linkTypeDLTRaw14 layers.LinkType = 14
)

// Reason says why a frame was skipped rather than delivered as a Packet.
type Reason int

// Skip reasons. None of them is fatal: the frame is counted and skipped.
const (
	ReasonUnsupportedLink  Reason = iota // link type we do not decode
	ReasonTruncatedLink                  // link header (Ethernet, VLAN, SLL, null) cut short
	ReasonBadLinkHeader                  // link header present but invalid (e.g. loopback family)
	ReasonTruncatedIP                    // IP header or IPv6 extension header cut short
	ReasonBadIPVersion                   // version nibble disagrees with the link layer's claim
	ReasonBadIPHeaderLen                 // IPv4 IHL < 5 or larger than the packet, bad IPv4 options
	ReasonBadIPLength                    // IP total/payload length inconsistent with the header
	ReasonTruncatedTCP                   // TCP header cut short by the snap length
	ReasonBadTCPDataOffset               // TCP data offset < 5 or beyond the IP payload
	ReasonFragment                       // non-first IP fragment (we do not reassemble)
	ReasonNotTCP                         // well-formed but not TCP (UDP, ARP, ICMP, ...)
	ReasonMalformed                      // anything else gopacket rejected
	numReasons
)

var reasonNames = [numReasons]string{
	ReasonUnsupportedLink:  "unsupported link type",
	ReasonTruncatedLink:    "truncated link header",
	ReasonBadLinkHeader:    "bad link header",
	ReasonTruncatedIP:      "truncated IP",
	ReasonBadIPVersion:     "bad IP version",
	ReasonBadIPHeaderLen:   "bad IP header length",
	ReasonBadIPLength:      "bad IP length",
	ReasonTruncatedTCP:     "truncated TCP",
	ReasonBadTCPDataOffset: "bad TCP data offset",
	ReasonFragment:         "fragment",
	ReasonNotTCP:           "not TCP",
	ReasonMalformed:        "malformed",
}

func (r Reason) String() string {
	if r >= 0 && r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// Reasons lists every skip reason, in a stable order for reports.
func Reasons() []Reason {
	rs := make([]Reason, numReasons)
	for i := range rs {
		rs[i] = Reason(i)
	}
	return rs
}

// DecodeStats counts decoded and skipped frames. Frames == TCP + sum(Skipped).
type DecodeStats struct {
	Frames  uint64             // frames handed to the decoder
	TCP     uint64             // frames delivered as Packets
	Skipped [numReasons]uint64 // frames skipped, by reason
	// FirstFragments counts first IP fragments delivered as Packets: their TCP
	// header is present but PayloadLen only covers this fragment's bytes.
	FirstFragments uint64
}

// SkippedTotal is the number of frames not delivered.
func (s DecodeStats) SkippedTotal() uint64 {
	var n uint64
	for _, c := range s.Skipped {
		n += c
	}
	return n
}

// Map returns the non-zero skip counters keyed by reason name.
func (s DecodeStats) Map() map[string]uint64 {
	m := make(map[string]uint64)
	for r, c := range s.Skipped {
		if c != 0 {
			m[Reason(r).String()] = c
		}
	}
	return m
}

// String is a one-line summary for logs: "frames=N tcp=N truncated IP=N ...".
func (s DecodeStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "frames=%d tcp=%d", s.Frames, s.TCP)
	for r, c := range s.Skipped {
		if c != 0 {
			fmt.Fprintf(&b, " %s=%d", Reason(r), c)
		}
	}
	if s.FirstFragments != 0 {
		fmt.Fprintf(&b, " first fragments=%d", s.FirstFragments)
	}
	return b.String()
}

func (s *DecodeStats) add(o DecodeStats) {
	s.Frames += o.Frames
	s.TCP += o.TCP
	s.FirstFragments += o.FirstFragments
	for i := range s.Skipped {
		s.Skipped[i] += o.Skipped[i]
	}
}

// Decoder turns link-layer frames into Packets. It keeps one preallocated
// gopacket layer of each kind and reuses it for every frame, so decoding a
// frame allocates nothing (except inside gopacket for IPv6 hop-by-hop
// options, which TCP traffic practically never carries). Not safe for
// concurrent use.
//
// IP fragments are not reassembled: a first fragment is delivered with the
// TCP header and the bytes it holds (PayloadLen covers only those, and
// DecodeStats.FirstFragments counts it); later fragments are skipped as
// ReasonFragment. Tunnelled IP-in-IP is decoded to the inner packet.
type Decoder struct {
	eth   layers.Ethernet
	dot1q layers.Dot1Q
	sll   layers.LinuxSLL
	sll2  layers.LinuxSLL2
	loop  layers.Loopback
	ip4   layers.IPv4
	ip6   layers.IPv6
	ext   layers.IPv6ExtensionSkipper
	frag6 layers.IPv6Fragment
	tcp   layers.TCP

	// One parser per first layer; all share the layers above, so the link
	// type only picks the entry point.
	pEth, pSLL, pSLL2, pLoop, pIP4, pIP6 parser

	// all holds the layers above in registration order; container maps
	// their types to them for the parsers and the direct path.
	all       []gopacket.DecodingLayer
	container gopacket.DecodingLayerContainer

	decoded []gopacket.LayerType
	stats   DecodeStats
}

// parser is a DecodingLayerParser plus the first layer it was built for,
// which the error classification needs and gopacket does not expose.
type parser struct {
	*gopacket.DecodingLayerParser
	first gopacket.LayerType
}

// NewDecoder returns a Decoder ready for any supported link type.
func NewDecoder() *Decoder {
	d := &Decoder{decoded: make([]gopacket.LayerType, 0, 16)}
	// Skipper first so the dedicated fragment layer overrides its entry:
	// we need the fragment offset, nothing else from extension headers.
	d.all = []gopacket.DecodingLayer{&d.eth, &d.dot1q, &d.sll, &d.sll2, &d.loop,
		&d.ip4, &d.ip6, &d.ext, &d.frag6, &d.tcp}
	// The sparse slice container is the fastest lookup gopacket has.
	d.container = gopacket.DecodingLayerSparse(nil)
	for _, l := range d.all {
		d.container = d.container.Put(l)
	}
	mk := func(first gopacket.LayerType) parser {
		p := gopacket.NewDecodingLayerParser(first)
		p.SetDecodingLayerContainer(d.container)
		// The layer after TCP (payload, or whatever a port suggests) and
		// protocols we do not decode end the chain without an error.
		p.IgnoreUnsupported = true
		return parser{p, first}
	}
	d.pEth = mk(layers.LayerTypeEthernet)
	d.pSLL = mk(layers.LayerTypeLinuxSLL)
	d.pSLL2 = mk(layers.LayerTypeLinuxSLL2)
	d.pLoop = mk(layers.LayerTypeLoopback)
	d.pIP4 = mk(layers.LayerTypeIPv4)
	d.pIP6 = mk(layers.LayerTypeIPv6)
	return d
}

// Stats returns the counters accumulated so far.
func (d *Decoder) Stats() DecodeStats { return d.stats }

// SupportedLinkType reports whether Decode understands frames of link type lt.
func SupportedLinkType(lt layers.LinkType) bool {
	switch lt {
	case layers.LinkTypeEthernet, layers.LinkTypeLinuxSLL, layers.LinkTypeLinuxSLL2,
		layers.LinkTypeNull, layers.LinkTypeLoop,
		layers.LinkTypeRaw, linkTypeDLTRaw12, linkTypeDLTRaw14,
		layers.LinkTypeIPv4, layers.LinkTypeIPv6:
		return true
	}
	return false
}

func (d *Decoder) skip(r Reason) bool {
	d.stats.Skipped[r]++
	return false
}

// Decode decodes one frame of link type lt into p. It returns false, and
// counts the reason, when the frame is not a decodable TCP segment. It sets
// every Packet field except Timestamp and Interface; p.Payload aliases frame.
func (d *Decoder) Decode(lt layers.LinkType, frame []byte, p *Packet) bool {
	d.stats.Frames++
	parser, r := d.parserFor(lt, frame)
	if r != reasonNone {
		return d.skip(r)
	}
	switch d.decodeDirect(parser.first, frame, p) {
	case directTCP:
		d.stats.TCP++
		return true
	case directNotTCP:
		return d.skip(ReasonNotTCP)
	}
	if err := parser.DecodeLayers(frame, &d.decoded); err != nil {
		return d.skip(d.classify(parser, frame))
	}
	ipType, r := d.innermostIP()
	if r != reasonNone {
		return d.skip(r)
	}
	firstFragment, r := d.reachTCP()
	if r != reasonNone {
		return d.skip(r)
	}
	if r := d.fillIP(ipType, p); r != reasonNone {
		return d.skip(r)
	}
	d.fillTCP(p)
	d.stats.TCP++
	if firstFragment {
		d.stats.FirstFragments++
	}
	return true
}

// reasonNone is "no reason to skip": the phases of Decode return it when
// the frame may go on.
const reasonNone Reason = -1

// parserFor picks the parser for link type lt; raw IP frames choose by the
// version nibble, having no link header to say.
func (d *Decoder) parserFor(lt layers.LinkType, frame []byte) (parser, Reason) {
	switch lt {
	case layers.LinkTypeEthernet:
		return d.pEth, reasonNone
	case layers.LinkTypeLinuxSLL:
		return d.pSLL, reasonNone
	case layers.LinkTypeLinuxSLL2:
		return d.pSLL2, reasonNone
	case layers.LinkTypeNull, layers.LinkTypeLoop:
		return d.pLoop, reasonNone
	case layers.LinkTypeRaw, linkTypeDLTRaw12, linkTypeDLTRaw14:
		if len(frame) == 0 {
			return parser{}, ReasonTruncatedIP
		}
		switch frame[0] >> 4 {
		case 4:
			return d.pIP4, reasonNone
		case 6:
			return d.pIP6, reasonNone
		}
		return parser{}, ReasonBadIPVersion
	case layers.LinkTypeIPv4:
		return d.pIP4, reasonNone
	case layers.LinkTypeIPv6:
		return d.pIP6, reasonNone
	}
	return parser{}, ReasonUnsupportedLink
}

// innermostIP finds the innermost IP layer (tunnels reuse the same layer
// struct, which then holds the inner header) and checks the version
// nibble, which gopacket's IPv4 decoder does not.
func (d *Decoder) innermostIP() (gopacket.LayerType, Reason) {
	var ipType gopacket.LayerType
	for _, t := range d.decoded {
		switch t {
		case layers.LayerTypeIPv4:
			if d.ip4.Version != 4 {
				return 0, ReasonBadIPVersion
			}
			ipType = t
		case layers.LayerTypeIPv6:
			if d.ip6.Version != 6 {
				return 0, ReasonBadIPVersion
			}
			ipType = t
		}
	}
	if len(d.decoded) == 0 {
		return 0, ReasonMalformed
	}
	return ipType, reasonNone
}

// reachTCP makes sure d.tcp holds the segment's header: the parser stops
// short of it in a first fragment, which is decoded here.
func (d *Decoder) reachTCP() (firstFragment bool, r Reason) {
	last := d.decoded[len(d.decoded)-1]
	switch {
	case last == layers.LayerTypeTCP:
		return false, reasonNone
	case last == layers.LayerTypeIPv4 && (d.ip4.FragOffset != 0 || d.ip4.Flags&layers.IPv4MoreFragments != 0):
		return true, d.firstFragmentTCP(d.ip4.FragOffset, d.ip4.Protocol, d.ip4.Payload)
	case last == layers.LayerTypeIPv6Fragment && (d.frag6.FragmentOffset != 0 || d.frag6.MoreFragments):
		return true, d.firstFragmentTCP(d.frag6.FragmentOffset, d.frag6.NextHeader, d.frag6.Payload)
	}
	// The parser also stops when a layer leaves no payload: then the next
	// header we would have decoded is missing.
	if l := d.layer(last); l != nil && len(l.LayerPayload()) == 0 {
		if r := missingReason(l.NextLayerType()); r != reasonNone {
			return false, r
		}
	}
	return false, ReasonNotTCP
}

// firstFragmentTCP decodes the TCP header of a fragment of an IPv4 or IPv6
// packet: only a first fragment of a TCP packet has one.
func (d *Decoder) firstFragmentTCP(offset uint16, proto layers.IPProtocol, payload []byte) Reason {
	if offset != 0 || proto != layers.IPProtocolTCP {
		return ReasonFragment
	}
	if r, ok := d.decodeTCP(payload); !ok {
		return r
	}
	return reasonNone
}

// fillIP sets p's addresses, IP id and payload length from the innermost IP
// header.
func (d *Decoder) fillIP(ipType gopacket.LayerType, p *Packet) Reason {
	tcp := &d.tcp
	hdrLen := len(tcp.Contents)
	switch ipType {
	case layers.LayerTypeIPv4:
		p.SrcIP = netip.AddrFrom4([4]byte(d.ip4.SrcIP))
		p.DstIP = netip.AddrFrom4([4]byte(d.ip4.DstIP))
		p.PayloadLen = int(d.ip4.Length) - int(d.ip4.IHL)*4 - hdrLen
		p.IPID = d.ip4.Id
	case layers.LayerTypeIPv6:
		p.IPID = 0
		p.SrcIP = netip.AddrFrom16([16]byte(d.ip6.SrcIP))
		p.DstIP = netip.AddrFrom16([16]byte(d.ip6.DstIP))
		if d.ip6.Length == 0 { // jumbogram: gopacket already bounded the payload
			p.PayloadLen = len(tcp.Payload)
		} else {
			// Extension headers between IPv6 and TCP count against the
			// payload length; the hop-by-hop one is already cut from Payload.
			ext := len(d.ip6.Payload) - (hdrLen + len(tcp.Payload))
			if d.ip6.HopByHop != nil {
				ext += d.ip6.HopByHop.ActualLength
			}
			p.PayloadLen = int(d.ip6.Length) - ext - hdrLen
		}
	default:
		return ReasonMalformed
	}
	if p.PayloadLen < len(tcp.Payload) {
		// Cannot happen with gopacket's length trimming; keep the
		// invariant PayloadLen >= len(Payload) for consumers regardless.
		p.PayloadLen = len(tcp.Payload)
	}
	return reasonNone
}

// fillTCP sets p's TCP fields and options from d.tcp.
func (d *Decoder) fillTCP(p *Packet) {
	tcp := &d.tcp
	p.SrcPort = uint16(tcp.SrcPort)
	p.DstPort = uint16(tcp.DstPort)
	p.Seq = tcp.Seq
	p.Ack = tcp.Ack
	p.Flags = tcp.Contents[13]
	p.Window = tcp.Window
	p.Payload = tcp.Payload

	p.MSS = 0
	p.WindowScale = -1
	p.SACKPermitted = false
	p.HasTimestamps = false
	p.TSVal, p.TSEcr = 0, 0
	p.NumSACK = 0
	p.SACK = [MaxSACKBlocks]SACKBlock{}
	for i := range tcp.Options {
		o := &tcp.Options[i]
		data := o.OptionData
		switch o.OptionType {
		case layers.TCPOptionKindMSS:
			if len(data) == 2 {
				p.MSS = uint16(data[0])<<8 | uint16(data[1])
			}
		case layers.TCPOptionKindWindowScale:
			if len(data) == 1 {
				p.WindowScale = int8(min(data[0], 14)) // RFC 7323: larger values mean 14
			}
		case layers.TCPOptionKindSACKPermitted:
			p.SACKPermitted = true
		case layers.TCPOptionKindSACK:
			for len(data) >= 8 && p.NumSACK < MaxSACKBlocks {
				p.SACK[p.NumSACK] = SACKBlock{Left: be32(data[0:4]), Right: be32(data[4:8])}
				p.NumSACK++
				data = data[8:]
			}
		case layers.TCPOptionKindTimestamps:
			if len(data) == 8 {
				p.HasTimestamps = true
				p.TSVal = be32(data[0:4])
				p.TSEcr = be32(data[4:8])
			}
		}
	}
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// decodeTCP decodes a TCP header the parser stopped short of (a first
// fragment), classifying failures like the parser path does.
func (d *Decoder) decodeTCP(data []byte) (Reason, bool) {
	if len(data) == 0 {
		return ReasonTruncatedTCP, false
	}
	if err := d.tcp.DecodeFromBytes(data, gopacket.NilDecodeFeedback); err != nil {
		return classifyTCP(data, d.ipCut()), false
	}
	return 0, true
}

// layer is the decoder's preallocated layer for t, nil for a layer type it
// does not know. Later entries of d.all win, as they do in the parsers'
// containers (the fragment layer over the extension skipper).
func (d *Decoder) layer(t gopacket.LayerType) gopacket.DecodingLayer {
	for i := len(d.all) - 1; i >= 0; i-- {
		if d.all[i].CanDecode().Contains(t) {
			return d.all[i]
		}
	}
	return nil
}

// missingReason names the reason for a frame where a header of type t
// should follow but has no bytes: reasonNone for the link headers a frame
// starts with and for types the decoder does not know.
func missingReason(t gopacket.LayerType) Reason {
	switch t {
	case layers.LayerTypeDot1Q:
		return ReasonTruncatedLink
	case layers.LayerTypeIPv4, layers.LayerTypeIPv6, layers.LayerTypeIPv6Fragment,
		layers.LayerTypeIPv6HopByHop, layers.LayerTypeIPv6Routing, layers.LayerTypeIPv6Destination:
		return ReasonTruncatedIP
	case layers.LayerTypeTCP:
		return ReasonTruncatedTCP
	}
	return reasonNone
}

// classify finds the layer that failed (the one after the last decoded) and
// inspects its input bytes to name the reason. Only runs on bad frames.
func (d *Decoder) classify(parser parser, frame []byte) Reason {
	failed := parser.first
	in := frame
	if n := len(d.decoded); n > 0 {
		l := d.layer(d.decoded[n-1])
		if l == nil {
			return ReasonMalformed
		}
		failed = l.NextLayerType()
		in = l.LayerPayload()
	}
	switch failed {
	case layers.LayerTypeEthernet, layers.LayerTypeDot1Q, layers.LayerTypeLinuxSLL,
		layers.LayerTypeLinuxSLL2, layers.LayerTypeLoopback:
		if parser.Truncated || len(in) < linkHeaderLen(failed) {
			return ReasonTruncatedLink
		}
		return ReasonBadLinkHeader
	case layers.LayerTypeIPv4, layers.LayerTypeIPv6:
		return classifyIP(in, failed == layers.LayerTypeIPv4, parser.Truncated)
	case layers.LayerTypeIPv6HopByHop, layers.LayerTypeIPv6Routing,
		layers.LayerTypeIPv6Destination, layers.LayerTypeIPv6Fragment:
		return ReasonTruncatedIP
	case layers.LayerTypeTCP:
		return classifyTCP(in, d.ipCut())
	}
	return ReasonMalformed
}

// ipCut reports whether the snap length cut the innermost IP packet. (The
// parser's Truncated flag will not do: gopacket's TCP layer sets it too.)
func (d *Decoder) ipCut() bool {
	for i := len(d.decoded) - 1; i >= 0; i-- {
		switch d.decoded[i] {
		case layers.LayerTypeIPv4:
			return len(d.ip4.Contents)+len(d.ip4.Payload) < int(d.ip4.Length)
		case layers.LayerTypeIPv6:
			n := len(d.ip6.Payload)
			if d.ip6.HopByHop != nil {
				n += d.ip6.HopByHop.ActualLength
			}
			return n < int(d.ip6.Length)
		}
	}
	return false
}

// classifyIP names what is wrong with an IPv4 or IPv6 header the parser
// rejected.
func classifyIP(in []byte, v4, truncated bool) Reason {
	minLen, version := 40, byte(6)
	if v4 {
		minLen, version = 20, 4
	}
	switch {
	case len(in) < minLen:
		return ReasonTruncatedIP
	case in[0]>>4 != version:
		return ReasonBadIPVersion
	case !v4 && truncated:
		return ReasonTruncatedIP
	case !v4:
		return ReasonBadIPLength // hop-by-hop/jumbogram inconsistencies
	case in[0]&0x0f < 5:
		return ReasonBadIPHeaderLen
	}
	ihl := int(in[0]&0x0f) * 4
	total := int(in[2])<<8 | int(in[3])
	switch {
	case total != 0 && total < ihl:
		return ReasonBadIPLength
	case ihl > len(in):
		return ReasonTruncatedIP
	}
	return ReasonBadIPHeaderLen // options that do not parse
}

func classifyTCP(in []byte, ipTruncated bool) Reason {
	switch {
	case len(in) < 20:
		return ReasonTruncatedTCP
	case in[12]>>4 < 5:
		return ReasonBadTCPDataOffset
	case int(in[12]>>4)*4 > len(in):
		// Beyond the captured bytes is a snap-length cut; beyond the IP
		// payload the IP header claimed is a bogus offset.
		if ipTruncated {
			return ReasonTruncatedTCP
		}
		return ReasonBadTCPDataOffset
	}
	return ReasonMalformed
}

func linkHeaderLen(t gopacket.LayerType) int {
	switch t {
	case layers.LayerTypeEthernet:
		return 14
	case layers.LayerTypeDot1Q, layers.LayerTypeLoopback:
		return 4
	case layers.LayerTypeLinuxSLL:
		return 16
	case layers.LayerTypeLinuxSLL2:
		return 20
	}
	return 0
}

package capture

// refDecoder is a frozen copy of the refDecoder as it was before the direct
// decoding path (main 89f0c67), kept so differential tests can prove the
// current refDecoder yields the same Packets and counters on any bytes.
// Do not edit it to match the refDecoder: it is the specification.

import (
	"net/netip"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// refDecoder turns link-layer frames into Packets. It keeps one preallocated
// gopacket layer of each kind and reuses it for every frame, so decoding a
// frame allocates nothing (except inside gopacket for IPv6 hop-by-hop
// options, which TCP traffic practically never carries). Not safe for
// concurrent use.
//
// IP fragments are not reassembled: a first fragment is delivered with the
// TCP header and the bytes it holds (PayloadLen covers only those, and
// DecodeStats.FirstFragments counts it); later fragments are skipped as
// ReasonFragment. Tunnelled IP-in-IP is decoded to the inner packet.
type refDecoder struct {
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

	// One refParser per first layer; all share the layers above, so the link
	// type only picks the entry point.
	pEth, pSLL, pSLL2, pLoop, pIP4, pIP6 refParser

	// all holds the layers above in registration order.
	all []gopacket.DecodingLayer

	decoded []gopacket.LayerType
	stats   DecodeStats
}

// refParser is a DecodingLayerParser plus the first layer it was built for,
// which the error classification needs and gopacket does not expose.
type refParser struct {
	*gopacket.DecodingLayerParser
	first gopacket.LayerType
}

// newRefDecoder returns a refDecoder ready for any supported link type.
func newRefDecoder() *refDecoder {
	d := &refDecoder{decoded: make([]gopacket.LayerType, 0, 16)}
	// Skipper first so the dedicated fragment layer overrides its entry:
	// we need the fragment offset, nothing else from extension headers.
	d.all = []gopacket.DecodingLayer{&d.eth, &d.dot1q, &d.sll, &d.sll2, &d.loop,
		&d.ip4, &d.ip6, &d.ext, &d.frag6, &d.tcp}
	mk := func(first gopacket.LayerType) refParser {
		p := gopacket.NewDecodingLayerParser(first)
		// The sparse slice container is the fastest lookup gopacket has.
		var c gopacket.DecodingLayerContainer = gopacket.DecodingLayerSparse(nil)
		for _, l := range d.all {
			c = c.Put(l)
		}
		p.SetDecodingLayerContainer(c)
		// The layer after TCP (payload, or whatever a port suggests) and
		// protocols we do not decode end the chain without an error.
		p.IgnoreUnsupported = true
		return refParser{p, first}
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
func (d *refDecoder) Stats() DecodeStats { return d.stats }

// SupportedLinkType reports whether Decode understands frames of link type lt.
func refSupportedLinkType(lt layers.LinkType) bool {
	switch lt {
	case layers.LinkTypeEthernet, layers.LinkTypeLinuxSLL, layers.LinkTypeLinuxSLL2,
		layers.LinkTypeNull, layers.LinkTypeLoop,
		layers.LinkTypeRaw, linkTypeDLTRaw12, linkTypeDLTRaw14,
		layers.LinkTypeIPv4, layers.LinkTypeIPv6:
		return true
	}
	return false
}

func (d *refDecoder) skip(r Reason) bool {
	d.stats.Skipped[r]++
	return false
}

// Decode decodes one frame of link type lt into p. It returns false, and
// counts the reason, when the frame is not a decodable TCP segment. It sets
// every Packet field except Timestamp and Interface; p.Payload aliases frame.
func (d *refDecoder) Decode(lt layers.LinkType, frame []byte, p *Packet) bool {
	d.stats.Frames++
	refParser, r := d.parserFor(lt, frame)
	if r != reasonNone {
		return d.skip(r)
	}
	if err := refParser.DecodeLayers(frame, &d.decoded); err != nil {
		return d.skip(d.refClassify(refParser, frame))
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

// parserFor picks the refParser for link type lt; raw IP frames choose by the
// version nibble, having no link header to say.
func (d *refDecoder) parserFor(lt layers.LinkType, frame []byte) (refParser, Reason) {
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
			return refParser{}, ReasonTruncatedIP
		}
		switch frame[0] >> 4 {
		case 4:
			return d.pIP4, reasonNone
		case 6:
			return d.pIP6, reasonNone
		}
		return refParser{}, ReasonBadIPVersion
	case layers.LinkTypeIPv4:
		return d.pIP4, reasonNone
	case layers.LinkTypeIPv6:
		return d.pIP6, reasonNone
	}
	return refParser{}, ReasonUnsupportedLink
}

// innermostIP finds the innermost IP layer (tunnels reuse the same layer
// struct, which then holds the inner header) and checks the version
// nibble, which gopacket's IPv4 decoder does not.
func (d *refDecoder) innermostIP() (gopacket.LayerType, Reason) {
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

// reachTCP makes sure d.tcp holds the segment's header: the refParser stops
// short of it in a first fragment, which is decoded here.
func (d *refDecoder) reachTCP() (firstFragment bool, r Reason) {
	last := d.decoded[len(d.decoded)-1]
	switch {
	case last == layers.LayerTypeTCP:
		return false, reasonNone
	case last == layers.LayerTypeIPv4 && (d.ip4.FragOffset != 0 || d.ip4.Flags&layers.IPv4MoreFragments != 0):
		return true, d.firstFragmentTCP(d.ip4.FragOffset, d.ip4.Protocol, d.ip4.Payload)
	case last == layers.LayerTypeIPv6Fragment && (d.frag6.FragmentOffset != 0 || d.frag6.MoreFragments):
		return true, d.firstFragmentTCP(d.frag6.FragmentOffset, d.frag6.NextHeader, d.frag6.Payload)
	}
	// The refParser also stops when a layer leaves no payload: then the next
	// header we would have decoded is missing.
	if l := d.layer(last); l != nil && len(l.LayerPayload()) == 0 {
		if r := refMissingReason(l.NextLayerType()); r != reasonNone {
			return false, r
		}
	}
	return false, ReasonNotTCP
}

// firstFragmentTCP decodes the TCP header of a fragment of an IPv4 or IPv6
// packet: only a first fragment of a TCP packet has one.
func (d *refDecoder) firstFragmentTCP(offset uint16, proto layers.IPProtocol, payload []byte) Reason {
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
func (d *refDecoder) fillIP(ipType gopacket.LayerType, p *Packet) Reason {
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
func (d *refDecoder) fillTCP(p *Packet) {
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
				p.SACK[p.NumSACK] = SACKBlock{Left: refBe32(data[0:4]), Right: refBe32(data[4:8])}
				p.NumSACK++
				data = data[8:]
			}
		case layers.TCPOptionKindTimestamps:
			if len(data) == 8 {
				p.HasTimestamps = true
				p.TSVal = refBe32(data[0:4])
				p.TSEcr = refBe32(data[4:8])
			}
		}
	}
}

func refBe32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// decodeTCP decodes a TCP header the refParser stopped short of (a first
// fragment), classifying failures like the refParser path does.
func (d *refDecoder) decodeTCP(data []byte) (Reason, bool) {
	if len(data) == 0 {
		return ReasonTruncatedTCP, false
	}
	if err := d.tcp.DecodeFromBytes(data, gopacket.NilDecodeFeedback); err != nil {
		return refClassifyTCP(data, d.ipCut()), false
	}
	return 0, true
}

// layer is the decoder's preallocated layer for t, nil for a layer type it
// does not know. Later entries of d.all win, as they do in the parsers'
// containers (the fragment layer over the extension skipper).
func (d *refDecoder) layer(t gopacket.LayerType) gopacket.DecodingLayer {
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
func refMissingReason(t gopacket.LayerType) Reason {
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
func (d *refDecoder) refClassify(refParser refParser, frame []byte) Reason {
	failed := refParser.first
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
		if refParser.Truncated || len(in) < refLinkHeaderLen(failed) {
			return ReasonTruncatedLink
		}
		return ReasonBadLinkHeader
	case layers.LayerTypeIPv4, layers.LayerTypeIPv6:
		return refClassifyIP(in, failed == layers.LayerTypeIPv4, refParser.Truncated)
	case layers.LayerTypeIPv6HopByHop, layers.LayerTypeIPv6Routing,
		layers.LayerTypeIPv6Destination, layers.LayerTypeIPv6Fragment:
		return ReasonTruncatedIP
	case layers.LayerTypeTCP:
		return refClassifyTCP(in, d.ipCut())
	}
	return ReasonMalformed
}

// ipCut reports whether the snap length cut the innermost IP packet. (The
// refParser's Truncated flag will not do: gopacket's TCP layer sets it too.)
func (d *refDecoder) ipCut() bool {
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

// classifyIP names what is wrong with an IPv4 or IPv6 header the refParser
// rejected.
func refClassifyIP(in []byte, v4, truncated bool) Reason {
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

func refClassifyTCP(in []byte, ipTruncated bool) Reason {
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

func refLinkHeaderLen(t gopacket.LayerType) int {
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

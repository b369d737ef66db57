package capture

import (
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// decodeDirect decodes the frames nearly all traffic consists of (a link
// header, optional VLAN tags, IPv4 or IPv6, then TCP) by calling the same
// gopacket layers' DecodeFromBytes in sequence, without the
// DecodingLayerParser's loop: its per-layer container lookups, interface
// calls and appends to the decoded list cost about as much as decoding
// IPv4 itself. It follows the parser step for step (NextLayerType picks
// the next layer, an empty payload ends the chain), so where it succeeds
// the layers hold what the parser would have left in them.
//
// It also settles well-formed frames that are not TCP (a link or IP layer
// whose next layer the parser does not decode, such as ARP or UDP): the
// parser path would stop there too and count them as ReasonNotTCP.
//
// It returns directUnsure, having counted nothing and left p alone, on
// anything else: errors, fragments, tunnels, extension headers, a version
// nibble the link layer did not promise. Decode then runs the parser path
// from the start; every layer the direct path touched is decoded again
// from the same bytes, so a failed attempt changes nothing.
func (d *Decoder) decodeDirect(first gopacket.LayerType, frame []byte, p *Packet) (res direct) {
	// The parser turns a panic in a layer into an error; leave that, and
	// the classification of the error, to it.
	defer func() {
		if recover() != nil {
			res = directUnsure
		}
	}()
	next, data := d.directLink(first, frame)
	for next == layers.LayerTypeDot1Q && len(data) > 0 {
		if d.dot1q.DecodeFromBytes(data, gopacket.NilDecodeFeedback) != nil {
			return directUnsure
		}
		next, data = d.dot1q.NextLayerType(), d.dot1q.Payload
	}
	if next == gopacket.LayerTypeZero {
		return directUnsure
	}
	if _, ok := d.container.Decoder(next); !ok {
		return directNotTCP
	}
	if len(data) == 0 {
		return directUnsure
	}
	ipType := next
	switch next {
	case layers.LayerTypeIPv4:
		ip := &d.ip4
		if ip.DecodeFromBytes(data, gopacket.NilDecodeFeedback) != nil || ip.Version != 4 {
			return directUnsure
		}
		next, data = ip.NextLayerType(), ip.Payload
	case layers.LayerTypeIPv6:
		ip := &d.ip6
		if ip.DecodeFromBytes(data, gopacket.NilDecodeFeedback) != nil || ip.Version != 6 {
			return directUnsure
		}
		next, data = ip.NextLayerType(), ip.Payload
	default:
		return directUnsure
	}
	if next != layers.LayerTypeTCP {
		return d.ipNotTCP(next)
	}
	if len(data) == 0 || d.tcp.DecodeFromBytes(data, gopacket.NilDecodeFeedback) != nil {
		return directUnsure
	}
	// The parser would go on into the payload if a port named a layer it
	// decodes (gopacket maps ports only to application protocols, but
	// layers.RegisterTCPPortLayerType can change that).
	if len(d.tcp.Payload) > 0 {
		if _, more := d.container.Decoder(d.tcp.NextLayerType()); more {
			return directUnsure
		}
	}
	if d.fillIP(ipType, p) != reasonNone {
		return directUnsure // cannot happen for IPv4 or IPv6; the parser path decides
	}
	d.fillTCP(p)
	return directTCP
}

// direct is the outcome of decodeDirect.
type direct int

const (
	directUnsure direct = iota // the parser path decides
	directTCP                  // p holds the segment
	directNotTCP               // a well-formed frame that is not TCP
)

// ipNotTCP settles an IP packet whose next layer, next, is not TCP: the
// parser stops at it unless it decodes that layer, and a fragment, whose
// next layer is LayerTypeFragment, may still hold a TCP header.
func (d *Decoder) ipNotTCP(next gopacket.LayerType) direct {
	if next == gopacket.LayerTypeFragment || next == gopacket.LayerTypeZero {
		return directUnsure
	}
	if _, ok := d.container.Decoder(next); ok {
		return directUnsure
	}
	return directNotTCP
}

// directLink decodes the link header that first, the first layer of the
// frame's parser (parserFor), names, and returns the type and bytes of the
// layer after it; raw IP has none. LayerTypeZero stops the direct path.
func (d *Decoder) directLink(first gopacket.LayerType, frame []byte) (gopacket.LayerType, []byte) {
	switch first {
	case layers.LayerTypeIPv4, layers.LayerTypeIPv6:
		return first, frame
	case layers.LayerTypeEthernet:
		// The common case, without the interface call.
		if d.eth.DecodeFromBytes(frame, gopacket.NilDecodeFeedback) != nil {
			return gopacket.LayerTypeZero, nil
		}
		return d.eth.NextLayerType(), d.eth.Payload
	}
	link, ok := d.container.Decoder(first)
	if !ok || link.DecodeFromBytes(frame, gopacket.NilDecodeFeedback) != nil {
		return gopacket.LayerTypeZero, nil
	}
	return link.NextLayerType(), link.LayerPayload()
}

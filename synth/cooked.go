package synth

import (
	"encoding/binary"
	"net"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Linux cooked headers (SLL and SLL2), which gopacket decodes but cannot
// serialize.

// sllLayer serializes a Linux cooked v1 header; gopacket only decodes it.
type sllLayer struct {
	toServer bool
	proto    layers.EthernetType
}

func (l *sllLayer) LayerType() gopacket.LayerType { return layers.LayerTypeLinuxSLL }

func (l *sllLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(16)
	if err != nil {
		return err
	}
	pt, mac := cookedDirection(l.toServer)
	binary.BigEndian.PutUint16(h[0:], uint16(pt))
	binary.BigEndian.PutUint16(h[2:], 1) // ARPHRD_ETHER
	binary.BigEndian.PutUint16(h[4:], 6)
	copy(h[6:14], mac)
	h[12], h[13] = 0, 0
	binary.BigEndian.PutUint16(h[14:], uint16(l.proto))
	return nil
}

// cookedDirection is a Linux cooked header's packet type and link address:
// 0 for a frame addressed to this host (the server, from the router), 4 for
// one it sent.
func cookedDirection(toServer bool) (packetType byte, mac net.HardwareAddr) {
	if toServer {
		return 0, macRouter
	}
	return 4, macServer
}

// sll2Layer serializes a Linux cooked v2 header; gopacket only decodes it.
type sll2Layer struct {
	toServer bool
	proto    layers.EthernetType
}

func (l *sll2Layer) LayerType() gopacket.LayerType { return layers.LayerTypeLinuxSLL2 }

func (l *sll2Layer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(20)
	if err != nil {
		return err
	}
	pt, mac := cookedDirection(l.toServer)
	binary.BigEndian.PutUint16(h[0:], uint16(l.proto))
	h[2], h[3] = 0, 0
	binary.BigEndian.PutUint32(h[4:], 2) // interface index
	binary.BigEndian.PutUint16(h[8:], 1) // ARPHRD_ETHER
	h[10] = pt
	h[11] = 6
	copy(h[12:20], mac)
	h[18], h[19] = 0, 0
	return nil
}

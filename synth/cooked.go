package synth

import (
	"encoding/binary"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// cookedLayer serializes a Linux cooked header, v1 (SLL) or v2 (SLL2),
// which gopacket decodes but cannot serialize.
type cookedLayer struct {
	v2       bool
	toServer bool
	proto    layers.EthernetType
}

func (l *cookedLayer) LayerType() gopacket.LayerType {
	if l.v2 {
		return layers.LayerTypeLinuxSLL2
	}
	return layers.LayerTypeLinuxSLL
}

func (l *cookedLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	size := 16
	if l.v2 {
		size = 20
	}
	h, err := b.PrependBytes(size)
	if err != nil {
		return err
	}
	// The packet type and link address: 0 for a frame addressed to this
	// host (the server, from the router), 4 for one it sent.
	pt, mac := byte(4), macServer
	if l.toServer {
		pt, mac = 0, macRouter
	}
	if l.v2 {
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
	binary.BigEndian.PutUint16(h[0:], uint16(pt))
	binary.BigEndian.PutUint16(h[2:], 1) // ARPHRD_ETHER
	binary.BigEndian.PutUint16(h[4:], 6)
	copy(h[6:14], mac)
	h[12], h[13] = 0, 0
	binary.BigEndian.PutUint16(h[14:], uint16(l.proto))
	return nil
}

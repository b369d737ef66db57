package capture

import "net/netip"

// TCP flag bits as they appear in the TCP header's flags byte.
const (
	FlagFIN uint8 = 1 << 0
	FlagSYN uint8 = 1 << 1
	FlagRST uint8 = 1 << 2
	FlagPSH uint8 = 1 << 3
	FlagACK uint8 = 1 << 4
	FlagURG uint8 = 1 << 5
)

// MaxSACKBlocks is the most SACK blocks a TCP header can carry (40 option bytes).
const MaxSACKBlocks = 4

// SACKBlock is one selective-acknowledgement range [Left, Right).
type SACKBlock struct{ Left, Right uint32 }

// Packet is one decoded TCP segment. The decoder reuses a single Packet, so its
// Payload aliases the source's buffer and is valid only until the next call:
// consumers copy what they keep. This is what lets the hot path allocate nothing.
type Packet struct {
	// Timestamp is the capture time in nanoseconds since the Unix epoch.
	Timestamp int64
	// Interface is the index of the capture source (file or live interface)
	// in the order they were opened; see Source names.
	Interface int

	SrcIP, DstIP     netip.Addr
	SrcPort, DstPort uint16
	// IPID is the IPv4 Identification field (0 for IPv6). Linux numbers a
	// connection's packets consecutively, so a gap is evidence of packets
	// lost before the capture point.
	IPID     uint16
	Seq, Ack uint32
	Flags    uint8
	Window   uint16

	// TCP options; zero values mean "absent" unless the Has* flag says otherwise.
	MSS           uint16
	WindowScale   int8 // -1 when absent
	SACKPermitted bool
	HasTimestamps bool
	TSVal, TSEcr  uint32
	NumSACK       int
	SACK          [MaxSACKBlocks]SACKBlock

	// Payload holds the captured TCP payload bytes (possibly fewer than
	// PayloadLen when the snap length cut the packet).
	Payload []byte
	// PayloadLen is the TCP payload length according to the IP header, i.e.
	// what was on the wire, whether or not it was captured.
	PayloadLen int
}

// Has reports whether all bits in f are set.
func (p *Packet) Has(f uint8) bool { return p.Flags&f == f }

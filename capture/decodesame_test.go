package capture

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"unsafe"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// sameLinkTypes is every link type the Decoder supports, plus one it does
// not, so both decoders see each frame under every entry point.
var sameLinkTypes = []layers.LinkType{
	layers.LinkTypeEthernet, layers.LinkTypeLinuxSLL, layers.LinkTypeLinuxSLL2,
	layers.LinkTypeNull, layers.LinkTypeLoop, layers.LinkTypeRaw, 12, 14,
	layers.LinkTypeIPv4, layers.LinkTypeIPv6, 9999,
}

// staleGarbage is what the Packet holds before a Decode, so a field one
// decoder sets and the other leaves alone shows up as a difference.
var staleGarbage = []byte{0xde, 0xad}

func garbagePacket() Packet {
	return Packet{Timestamp: 1, Interface: 2, SrcIP: netip.MustParseAddr("192.0.2.99"),
		DstIP: netip.MustParseAddr("2001:db8::99"), SrcPort: 3, DstPort: 4, IPID: 5, Seq: 6, Ack: 7,
		Flags: 8, Window: 9, MSS: 10, WindowScale: 11, SACKPermitted: true, HasTimestamps: true,
		TSVal: 12, TSEcr: 13, NumSACK: 3, SACK: [MaxSACKBlocks]SACKBlock{{1, 2}, {3, 4}, {5, 6}, {7, 8}},
		Payload: staleGarbage[:1], PayloadLen: 14}
}

// decodeSame decodes frame with the frozen reference and the current
// Decoder and fails on any difference: result, every Packet field (the
// payload by identity: it must alias the same bytes) and every counter.
func decodeSame(t testing.TB, ref *refDecoder, cur *Decoder, lt layers.LinkType, frame []byte) {
	t.Helper()
	want, got := garbagePacket(), garbagePacket()
	okWant := ref.Decode(lt, frame, &want)
	okGot := cur.Decode(lt, frame, &got)
	if okWant != okGot {
		t.Fatalf("lt %d frame %x: decoded %v, reference %v", lt, frame, okGot, okWant)
	}
	if ws, gs := ref.Stats(), cur.Stats(); ws != gs {
		t.Fatalf("lt %d frame %x: stats\n got %v\nwant %v", lt, frame, gs, ws)
	}
	if unsafe.SliceData(want.Payload) != unsafe.SliceData(got.Payload) || len(want.Payload) != len(got.Payload) ||
		cap(want.Payload) != cap(got.Payload) || (want.Payload == nil) != (got.Payload == nil) {
		t.Fatalf("lt %d frame %x: payload does not alias the same bytes", lt, frame)
	}
	want.Payload, got.Payload = nil, nil
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("lt %d frame %x: packet\n got %+v\nwant %+v", lt, frame, got, want)
	}
}

// sameSeeds is the frames the differential test and fuzz target start
// from: every framing of every segment, the malformed frames, fragments,
// a tunnel and a hop-by-hop IPv6 packet.
func sameSeeds(t testing.TB) [][]byte {
	var fs [][]byte
	for _, fr := range framings {
		for _, s := range segs {
			fs = append(fs, fr.f(t, s.ip(t)))
		}
	}
	for _, c := range malformedFrames(t) {
		fs = append(fs, c.frame)
	}
	for _, s := range []seg{segs[2], segs[0]} {
		fs = append(fs, ipv4Frag(t, s, 0, true), ipv4Frag(t, s, 8, true), ipv4Frag(t, s, 8, false))
	}
	for _, s := range []seg{segs[4], segs[5]} {
		fs = append(fs, ipv6Frag(t, s, 0, true), ipv6Frag(t, s, 8, false))
	}
	inner := segs[6].ip(t)
	outer := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolIPv6,
		SrcIP: net.IP(cli4.AsSlice()), DstIP: net.IP(srv4.AsSlice())}
	tun := serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}, outer, gopacket.Payload(inner))
	binary.BigEndian.PutUint16(tun[14+2:], uint16(20+len(inner)))
	tun[14] = 0x45
	fs = append(fs, tun, udpFrame(t), arpFrame(t), icmpFrame(t))
	return fs
}

// TestDecodeSameAsReference runs every seed, every prefix of it and many
// byte mutations of it through both decoders under every link type. The
// decoders are shared across frames, as in production, so state left by one
// frame must not change the next.
func TestDecodeSameAsReference(t *testing.T) {
	ref, cur := newRefDecoder(), NewDecoder()
	rng := rand.New(rand.NewPCG(15, 15))
	buf := make([]byte, 0, 2048)
	for _, seed := range sameSeeds(t) {
		for _, lt := range sameLinkTypes {
			for n := 0; n <= len(seed); n++ {
				decodeSame(t, ref, cur, lt, seed[:n])
			}
			// Header bytes matter most: mutate within the first 100 bytes,
			// with values that hit the interesting cases (0, 0xff, nibbles).
			for range 300 {
				buf = append(buf[:0], seed...)
				for range 1 + rng.IntN(3) {
					if len(buf) == 0 {
						break
					}
					i := rng.IntN(min(len(buf), 100))
					switch rng.IntN(4) {
					case 0:
						buf[i] = byte(rng.IntN(256))
					case 1:
						buf[i] ^= 1 << rng.IntN(8)
					case 2:
						buf[i] = []byte{0, 0xff, 0x45, 0x4f, 0x60, 0x06, 0x11, 0x50, 0xf0}[rng.IntN(9)]
					case 3:
						buf = buf[:i+rng.IntN(len(buf)-i+1)]
					}
				}
				decodeSame(t, ref, cur, lt, buf)
			}
		}
	}
	if s := cur.Stats(); s.TCP == 0 || s.SkippedTotal() == 0 {
		t.Fatalf("corpus does not exercise both outcomes: %v", s)
	}
}

func FuzzDecodeSame(f *testing.F) {
	for _, seed := range sameSeeds(f) {
		for _, lt := range sameLinkTypes {
			f.Add(seed, uint16(lt))
		}
	}
	ref, cur := newRefDecoder(), NewDecoder()
	f.Fuzz(func(t *testing.T, frame []byte, lt uint16) {
		decodeSame(t, ref, cur, layers.LinkType(lt), frame)
	})
}

// TestDecodeSameWithPortLayer registers a TCP port as a layer the decoder
// knows, so the parser goes on past TCP: the direct path must defer to it.
func TestDecodeSameWithPortLayer(t *testing.T) {
	layers.RegisterTCPPortLayerType(80, layers.LayerTypeIPv4)
	t.Cleanup(func() { layers.RegisterTCPPortLayerType(80, gopacket.LayerTypePayload) })
	ref, cur := newRefDecoder(), NewDecoder()
	for _, seed := range sameSeeds(t) {
		for _, lt := range sameLinkTypes {
			decodeSame(t, ref, cur, lt, seed)
		}
	}
}

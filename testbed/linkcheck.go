package testbed

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// LinkDelays measures the emulated link from the two captures: every
// packet seen on both sides, matched by its IP and TCP headers, gives one
// transit time, less the link's nominal one-way delay for its client. The
// truth of a scenario is taken at the client and rtmon works at the
// server, so a link that is late (a bridge thread waiting for the CPU)
// would show as an error that is the testbed's, not rtmon's.
type LinkDelays struct {
	// Excess is transit minus nominal one-way delay, per direction
	// (ToServer, ToClient), for every matched packet.
	Excess [2][]time.Duration
	// Worst describes the latest packets (for logs).
	Worst []string
	// byConn: per connection and client capture time, the largest
	// |excess| of the packets captured at that instant.
	byConn map[connKey]map[int64]time.Duration
	// Unmatched counts packets of one capture missing from the other
	// (lost on the link, or not captured).
	Unmatched [2]int
}

// connKey is one client connection: the client's address and port.
type connKey struct {
	client netip.Addr
	port   uint16
}

// LateAt is how late the link was (largest |excess|) for the packets of
// client:port's connection that the client sent or received at the given
// instants (client capture times), and whether all of them were found.
func (d *LinkDelays) LateAt(client netip.Addr, port uint16, ats ...int64) (time.Duration, bool) {
	var m time.Duration
	found := true
	byAt := d.byConn[connKey{client, port}]
	for _, at := range ats {
		ex, ok := byAt[at]
		found = found && ok
		m = max(m, ex)
	}
	return m, found
}

// LateBefore is how late the link was (largest |excess|) for any packet
// of client:port's connections that the client sent or received up to
// until (client capture time). A client's retransmission timer carries
// every RTT sample of its connection, so a request the client resent is
// timed by the link's whole history on that connection, not only by its
// own packets.
func (d *LinkDelays) LateBefore(client netip.Addr, port uint16, until int64) time.Duration {
	var m time.Duration
	for at, ex := range d.byConn[connKey{client, port}] {
		if at <= until {
			m = max(m, ex)
		}
	}
	return m
}

type pktKey struct {
	src, dst     netip.Addr
	sport, dport uint16
	seq, ack     uint32
	id           uint16
	flags        uint8
	n            int
}

// MeasureLink compares the client and server captures of a run.
func MeasureLink(clientPcap, serverPcap string, oneWay func(client netip.Addr) time.Duration) (*LinkDelays, error) {
	cli, err := readLinkCapture(clientPcap)
	if err != nil {
		return nil, err
	}
	srv, err := readLinkCapture(serverPcap)
	if err != nil {
		return nil, err
	}
	d := &LinkDelays{byConn: map[connKey]map[int64]time.Duration{}}
	var worst []latePacket
	for k, cts := range cli {
		worst = d.match(k, cts, srv[k], oneWay, worst)
	}
	for k, sts := range srv {
		if n := len(sts) - len(cli[k]); n > 0 {
			if ClientRange.Contains(k.src) {
				d.Unmatched[ToServer] += n
			} else {
				d.Unmatched[ToClient] += n
			}
		}
	}
	sort.Slice(worst, func(i, j int) bool { return worst[i].ex > worst[j].ex })
	for _, w := range worst[:min(len(worst), 8)] {
		k := w.key
		d.Worst = append(d.Worst, fmt.Sprintf("%v late: %s:%d -> %s:%d seq %d len %d flags %#x at %s",
			w.ex, k.src, k.sport, k.dst, k.dport, k.seq, k.n, k.flags, time.Unix(0, w.at).Format("15:04:05.000000")))
	}
	return d, nil
}

// readLinkCapture is the capture times of every TCP packet of a capture,
// by its headers.
func readLinkCapture(path string) (map[pktKey][]int64, error) {
	out := map[pktKey][]int64{}
	err := eachTCPPacket(path, func(p *tcpDecoder, data []byte, at time.Time) bool {
		src, dst := p.addrs()
		ip4, tcp := &p.ip4, &p.tcp
		k := pktKey{src, dst, uint16(tcp.SrcPort), uint16(tcp.DstPort), tcp.Seq, tcp.Ack, ip4.Id,
			data[14+int(ip4.IHL)*4+13], len(tcp.Payload)}
		out[k] = append(out[k], at.UnixNano())
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachTCPPacket calls fn with every IPv4 TCP packet of a pcap file, decoded,
// until fn returns false.
func eachTCPPacket(path string, fn func(p *tcpDecoder, data []byte, at time.Time) bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	p := newTCPDecoder()
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if p.decode(data) != nil || len(p.decoded) < 3 {
			continue
		}
		if !fn(p, data, ci.Timestamp) {
			return nil
		}
	}
}

// latePacket is one matched packet: its excess, the earlier of its two
// capture times and its headers.
type latePacket struct {
	ex  time.Duration
	at  int64
	key pktKey
}

// match pairs the client's copies of packet k (captured at cts) with the
// server's (at sts), records each pair's excess, counts the client's
// copies left unmatched, and returns worst with the pairs added.
func (d *LinkDelays) match(k pktKey, cts, sts []int64, oneWay func(client netip.Addr) time.Duration, worst []latePacket) []latePacket {
	up := ClientRange.Contains(k.src)
	client := k.src
	if !up {
		client = k.dst
	}
	nominal := oneWay(client)
	sts = slices.Clone(sts)
	for _, ct := range cts {
		// Identical packets (a SYN/ACK and its retransmission) may
		// have lost copies on one side: each copy is matched with the
		// unused one on the other side nearest to nominal.
		best := -1
		var bestEx time.Duration
		for j, st := range sts {
			if st == 0 {
				continue
			}
			ex := time.Duration(ct-st) - nominal
			if up {
				ex = time.Duration(st-ct) - nominal
			}
			if best < 0 || ex.Abs() < bestEx.Abs() {
				best, bestEx = j, ex
			}
		}
		if best < 0 {
			if up {
				d.Unmatched[ToServer]++
			} else {
				d.Unmatched[ToClient]++
			}
			continue
		}
		st := sts[best]
		sts[best] = 0
		ex := bestEx
		if up {
			d.Excess[ToServer] = append(d.Excess[ToServer], ex)
		} else {
			d.Excess[ToClient] = append(d.Excess[ToClient], ex)
		}
		worst = append(worst, latePacket{ex, min(ct, st), k})
		ck := connKey{k.src, k.sport}
		if !up {
			ck = connKey{k.dst, k.dport}
		}
		if d.byConn[ck] == nil {
			d.byConn[ck] = map[int64]time.Duration{}
		}
		d.byConn[ck][ct] = max(d.byConn[ck][ct], ex.Abs())
	}
	return worst
}

// tcpDecoder decodes the Ethernet, IPv4 and TCP layers of a testbed
// capture's frames into layers it reuses from frame to frame.
type tcpDecoder struct {
	eth     layers.Ethernet
	ip4     layers.IPv4
	tcp     layers.TCP
	payload gopacket.Payload
	parser  *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType
}

func newTCPDecoder() *tcpDecoder {
	d := &tcpDecoder{}
	d.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &d.eth, &d.ip4, &d.tcp, &d.payload)
	d.parser.IgnoreUnsupported = true
	return d
}

// decode decodes one frame; decoded lists the layers it holds.
func (d *tcpDecoder) decode(data []byte) error { return d.parser.DecodeLayers(data, &d.decoded) }

// addrs are the IPv4 source and destination of the frame decoded last.
func (d *tcpDecoder) addrs() (src, dst netip.Addr) {
	src, _ = netip.AddrFromSlice(d.ip4.SrcIP.To4())
	dst, _ = netip.AddrFromSlice(d.ip4.DstIP.To4())
	return src, dst
}

package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// This file reads the server-side pcap naively, independently of rtmon, to
// check the harness itself: that the capture holds what the scenario did and
// that curl's numbers agree with the wire.

// wireConn is one client connection as the capture shows it.
type wireConn struct {
	clientPort uint16
	isn        uint32
	syns       []time.Time // client SYNs with isn
	synacks    []time.Time
	reqs       []*wireReq
}

// wireReq is one request and the server payload that followed it.
type wireReq struct {
	path          string
	first         time.Time // request's first byte
	status        int
	respFirst     time.Time
	respLast      time.Time
	responseBytes int
}

type wire struct {
	conns      map[uint16]*wireConn
	foreignIPs []string // any address outside the two documentation ranges
	packets    int
}

func readWire(path string) (*wire, error) { return readWirePort(path, 80) }

// readWirePort is readWire for a server listening on serverPort.
func readWirePort(path string, serverPort uint16) (*wire, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open pcap: %w", err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("pcap header %s: %w", path, err)
	}
	w := &wire{conns: map[uint16]*wireConn{}}
	seen := map[string]bool{}
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read pcap %s: %w", path, err)
		}
		w.packets++
		pkt := gopacket.NewPacket(data, r.LinkType(), gopacket.Default)
		ip4, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if ip4 == nil || tcp == nil {
			return nil, fmt.Errorf("packet %d: not TCP over IPv4", w.packets)
		}
		for _, a := range []string{ip4.SrcIP.String(), ip4.DstIP.String()} {
			if !inRanges(a) && !seen[a] {
				seen[a] = true
				w.foreignIPs = append(w.foreignIPs, a)
			}
		}
		fromClient := uint16(tcp.DstPort) == serverPort
		port := uint16(tcp.SrcPort)
		if !fromClient {
			port = uint16(tcp.DstPort)
		}
		c := w.conns[port]
		if c == nil {
			c = &wireConn{clientPort: port}
			w.conns[port] = c
		}
		switch {
		case fromClient && tcp.SYN && !tcp.ACK:
			if len(c.syns) == 0 {
				c.isn = tcp.Seq
			}
			if tcp.Seq == c.isn {
				c.syns = append(c.syns, ci.Timestamp)
			}
		case !fromClient && tcp.SYN && tcp.ACK:
			c.synacks = append(c.synacks, ci.Timestamp)
		case fromClient && len(tcp.Payload) > 0 && bytes.HasPrefix(tcp.Payload, []byte("GET ")):
			line, _, _ := bytes.Cut(tcp.Payload, []byte("\r\n"))
			fields := bytes.Fields(line)
			p := ""
			if len(fields) >= 2 {
				p = string(fields[1])
			}
			c.reqs = append(c.reqs, &wireReq{path: p, first: ci.Timestamp})
		case !fromClient && len(tcp.Payload) > 0 && len(c.reqs) > 0:
			q := c.reqs[len(c.reqs)-1]
			if q.respFirst.IsZero() {
				q.respFirst = ci.Timestamp
				// "HTTP/1.1 200 OK": the status follows the version.
				if f := bytes.Fields(tcp.Payload); len(f) >= 2 && bytes.HasPrefix(f[0], []byte("HTTP/1.")) {
					q.status, _ = strconv.Atoi(string(f[1]))
				}
			}
			q.respLast = ci.Timestamp
			q.responseBytes += len(tcp.Payload)
		}
	}
	return w, nil
}

func inRanges(a string) bool {
	ip, err := netip.ParseAddr(a)
	return err == nil && (ClientRange.Contains(ip) || ServerRange.Contains(ip))
}

func (w *wire) ports() []uint16 {
	var ps []uint16
	for p := range w.conns {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

// records estimates rtmon's records from the wire in the simplest way valid
// on this testbed, where the capture point is next to the client (no link
// delay, microsecond RTT): client time = capture time. Fed to the same
// comparison as rtmon's output, it proves the comparison and its tolerance
// are sound before rtmon is involved.
func (w *wire) records(client, server string) ([]rtmonConn, []rtmonTxn) {
	var conns []rtmonConn
	var txns []rtmonTxn
	for _, port := range w.ports() {
		c := w.conns[port]
		if len(c.syns) == 0 || len(c.synacks) == 0 {
			continue
		}
		rc := rtmonConn{Client: client, ClientPort: int(port), Server: server, ServerPort: 80,
			SYNLosses: len(c.syns) - 1, Tconn: c.synacks[len(c.synacks)-1].Sub(c.syns[0]).Nanoseconds()}
		for _, s := range c.syns {
			rc.SYNTimes = append(rc.SYNTimes, s.UnixNano())
		}
		conns = append(conns, rc)
		for i, q := range c.reqs {
			x := rtmonTxn{Client: client, ClientPort: int(port), Server: server, ServerPort: 80,
				Index: i, URL: q.path, Status: q.status}
			if i == 0 {
				x.Tconn = rc.Tconn
				x.Trequest = q.first.Sub(c.synacks[len(c.synacks)-1]).Nanoseconds()
			}
			// Requests fit one segment here: first byte = last byte.
			x.Tserver = q.respFirst.Sub(q.first).Nanoseconds()
			x.Ttransfer = q.respLast.Sub(q.respFirst).Nanoseconds()
			x.Total = x.Tconn + x.Trequest + x.Tserver + x.Ttransfer
			txns = append(txns, x)
		}
	}
	return conns, txns
}

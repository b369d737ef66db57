package testbed

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// pcapBuilder writes a synthetic client-side capture.
type pcapBuilder struct {
	t  *testing.T
	w  *pcapgo.Writer
	t0 time.Time
}

type synthConn struct {
	b            *pcapBuilder
	client       net.IP
	cport        uint16
	cseq, sseq   uint32 // next sequence numbers
	cisn, sisn   uint32
	server       net.IP
	serverListen uint16
}

func (b *pcapBuilder) packet(at time.Duration, up bool, c *synthConn, seq, ack uint32, syn, ackf, fin bool, payload string) {
	b.t.Helper()
	src, dst := c.client, c.server
	sport, dport := c.cport, c.serverListen
	if !up {
		src, dst, sport, dport = dst, src, dport, sport
	}
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: src, DstIP: dst}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), Seq: seq, Ack: ack,
		SYN: syn, ACK: ackf, FIN: fin, PSH: payload != "", Window: 65535}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, tcp, gopacket.Payload(payload)); err != nil {
		b.t.Fatal(err)
	}
	data := buf.Bytes()
	ci := gopacket.CaptureInfo{Timestamp: b.t0.Add(at), CaptureLength: len(data), Length: len(data)}
	if err := b.w.WritePacket(ci, data); err != nil {
		b.t.Fatal(err)
	}
}

func msec(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func (c *synthConn) syn(at time.Duration) { c.b.packet(at, true, c, c.cisn, 0, true, false, false, "") }
func (c *synthConn) synack(at time.Duration) {
	c.b.packet(at, false, c, c.sisn, c.cisn+1, true, true, false, "")
}
func (c *synthConn) ack(at time.Duration) {
	c.b.packet(at, true, c, c.cseq, c.sseq, false, true, false, "")
}

// send transmits client bytes at the current sequence number (advancing
// it); resend repeats bytes at an explicit offset.
func (c *synthConn) send(at time.Duration, p string) {
	c.b.packet(at, true, c, c.cseq, c.sseq, false, true, false, p)
	c.cseq += uint32(len(p))
}

func (c *synthConn) resend(at time.Duration, off uint32, p string) {
	c.b.packet(at, true, c, c.cisn+1+off, c.sseq, false, true, false, p)
}

// recv is a server segment at offset off of the server's stream.
func (c *synthConn) recv(at time.Duration, off uint32, p string) {
	c.b.packet(at, false, c, c.sisn+1+off, c.cseq, false, true, false, p)
}

func (c *synthConn) fin(at time.Duration, off uint32) {
	c.b.packet(at, false, c, c.sisn+1+off, c.cseq, false, true, true, "")
}

// TestClientWireAnalyzer checks the wire analyzer on a synthetic client
// capture with what real traffic has: a retransmitted SYN, a request split
// over two segments whose second one is retransmitted, a chunked response
// with a lost and a duplicated segment, HEAD, 304 and 204 responses
// without bodies, two pipelined requests in one segment, a preconnected
// connection with a close-delimited response, data acknowledging the
// SYN/ACK, and sequence numbers that wrap.
func TestClientWireAnalyzer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriterNanos(f)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	b := &pcapBuilder{t: t, w: w, t0: time.Unix(1_700_000_000, 0)}
	newConn := func(port uint16, cisn, sisn uint32) *synthConn {
		return &synthConn{b: b, client: net.IP{198, 51, 100, 10}, cport: port, server: net.IP{203, 0, 113, 2},
			serverListen: 80, cisn: cisn, sisn: sisn, cseq: cisn + 1, sseq: sisn + 1}
	}
	// Connection A: everything that goes wrong, on a fresh connection.
	a := newConn(40000, 0xffffff00, 0xfffffff0)
	a.syn(0)
	a.syn(msec(1000))
	a.synack(msec(1080))
	a.ack(msec(1080.1))
	req1a := "GET /a HTTP/1.1\r\nHost: x\r\n"
	req1b := "Referer: http://x/p\r\n\r\n"
	a.send(msec(1080.2), req1a)
	a.send(msec(1080.3), req1b)
	a.resend(msec(1300), uint32(len(req1a)), req1b) // upstream loss
	hdr := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/html\r\n\r\n"
	resp1 := hdr + "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
	s1, s2, s3 := resp1[:len(hdr)+4], resp1[len(hdr)+4:len(hdr)+14], resp1[len(hdr)+14:]
	a.recv(msec(1200), 0, s1)
	a.recv(msec(1210), uint32(len(s1)+len(s2)), s3) // out of order: s2 lost on the way
	a.recv(msec(1500), uint32(len(s1)), s2)         // its retransmission fills the hole
	a.recv(msec(1510), uint32(len(s1)+len(s2)), s3) // a needless retransmission
	off := uint32(len(resp1))
	a.send(msec(2000), "HEAD /b HTTP/1.1\r\nHost: x\r\n\r\n")
	resp2 := "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
	a.recv(msec(2080), off, resp2)
	off += uint32(len(resp2))
	a.send(msec(2100), "GET /c HTTP/1.1\r\nHost: x\r\n\r\nPOST /beacon?p=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nxy")
	resp34 := "HTTP/1.1 304 Not Modified\r\nETag: \"1\"\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
	a.recv(msec(2200), off, resp34)
	off += uint32(len(resp34))
	a.send(msec(3000), "GET /d HTTP/1.1\r\nHost: x\r\n\r\n")
	body := strings.Repeat("z", 5000)
	resp5 := "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + body
	for i, at := 0, 3080.0; i < len(resp5); i, at = i+1448, at+3 {
		a.recv(msec(at), off+uint32(i), resp5[i:min(i+1448, len(resp5))])
	}
	// Connection B: opened ahead of need, a close-delimited response.
	bc := newConn(40001, 1000, 9000)
	bc.syn(msec(10))
	bc.synack(msec(90))
	bc.ack(msec(90.1))
	bc.send(msec(500), "GET /e HTTP/1.1\r\nHost: x\r\n\r\n")
	resp6 := "HTTP/1.0 200 OK\r\nConnection: close\r\n\r\nuntil the end"
	bc.recv(msec(580), 0, resp6)
	bc.fin(msec(581), uint32(len(resp6)))
	// Connection C: the handshake's ACK is the request itself.
	c := newConn(40002, 5, 7)
	c.syn(msec(20))
	c.synack(msec(100))
	c.send(msec(100.5), "GET /f HTTP/1.1\r\nHost: x\r\n\r\n")
	c.recv(msec(180), 0, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	wire, err := ReadClientWire(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(wire.Conns) != 3 {
		t.Fatalf("%d connections, want 3", len(wire.Conns))
	}
	at := func(d time.Duration) int64 { return b.t0.Add(d).UnixNano() }
	type want struct {
		method, url          string
		status               int
		fresh                bool
		start, reqLast, rfst time.Duration
		end                  time.Duration
		reqRetrans, respDup  bool
	}
	check := func(c *WireTruthConn, ws []want) {
		t.Helper()
		if c.Err != "" {
			t.Errorf("port %d: %s", c.ClientPort, c.Err)
		}
		if len(c.Txns) != len(ws) {
			t.Fatalf("port %d: %d transactions, want %d", c.ClientPort, len(c.Txns), len(ws))
		}
		for i, w := range ws {
			x := c.Txns[i]
			got := want{x.Method, x.URL, x.Status, x.Fresh, time.Duration(x.Start - at(0)), time.Duration(x.ReqLast - at(0)),
				time.Duration(x.RespFirst - at(0)), time.Duration(x.End - at(0)), x.ReqRetrans, x.RespDup}
			if got != w || !x.Complete || x.Index != i || x.Total != x.End-x.Start {
				t.Errorf("port %d #%d:\n got %+v (complete %v index %d)\nwant %+v", c.ClientPort, i, got, x.Complete, x.Index, w)
			}
		}
	}
	ca := wire.Conns[0]
	if len(ca.SYNs) != 2 || ca.SYNs[1]-ca.SYNs[0] != int64(time.Second) || ca.HandshakeACK != at(msec(1080.1)) {
		t.Errorf("connection A: SYNs %v, handshake ACK %v", ca.SYNs, ca.HandshakeACK)
	}
	if ref := ca.Txns[0].Referer; ref != "http://x/p" {
		t.Errorf("referer %q", ref)
	}
	check(ca, []want{
		{"GET", "/a", 200, true, 0, msec(1080.3), msec(1200), msec(1500), true, true},
		{"HEAD", "/b", 200, false, msec(2000), msec(2000), msec(2080), msec(2080), false, false},
		{"GET", "/c", 304, false, msec(2100), msec(2100), msec(2200), msec(2200), false, false},
		{"POST", "/beacon?p=1", 204, false, msec(2100), msec(2100), msec(2200), msec(2200), false, false},
		{"GET", "/d", 200, false, msec(3000), msec(3000), msec(3080), msec(3089), false, false},
	})
	check(wire.Conns[1], []want{{"GET", "/e", 200, false, msec(500), msec(500), msec(580), msec(580), false, false}})
	check(wire.Conns[2], []want{{"GET", "/f", 200, true, msec(20), msec(100.5), msec(180), msec(180), false, false}})
	if wire.Conns[2].HandshakeACK != at(msec(100.5)) {
		t.Errorf("connection C: handshake ACK %v, want the request's", wire.Conns[2].HandshakeACK)
	}
}

// TestFirstRequestCopyLost checks the upstream-loss truth on hand-made
// streams: a request sent twice, seen once at the server after the resend
// left (lost), seen twice with the first copy late (a stalled link: not
// lost), and seen once before the resend (the resend was spurious).
func TestFirstRequestCopyLost(t *testing.T) {
	ms := int64(time.Millisecond)
	req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	client := func() *WireTruthConn {
		up := newAssembler(1000)
		up.add(1000, req, 10*ms)
		up.add(1000, req, 230*ms) // the client's resend, one RTO later
		return &WireTruthConn{up: up}
	}
	cases := []struct {
		name    string
		arrived []int64 // when copies reached the server capture
		want    bool
	}{
		{"first copy lost", []int64{231 * ms}, true},
		{"link stalled past the resend", []int64{900 * ms, 901 * ms}, false},
		{"first copy arrived in time", []int64{11 * ms}, false},
		{"both arrived, second spurious", []int64{11 * ms, 231 * ms}, false},
	}
	txn := &WireTruthTxn{reqStart: 0, reqEnd: int64(len(req))}
	for _, tc := range cases {
		srvUp := newAssembler(1000)
		for _, at := range tc.arrived {
			srvUp.add(1000, req, at)
		}
		srv := &WireTruthConn{up: srvUp}
		if got := client().FirstRequestCopyLost(txn, srv, txn); got != tc.want {
			t.Errorf("%s: FirstRequestCopyLost = %v, want %v", tc.name, got, tc.want)
		}
	}
}

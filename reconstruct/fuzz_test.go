package reconstruct_test

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
)

// FuzzTracker drives the tracker with arbitrary segment sequences on a few
// tuples: any flags, sequence and acknowledgement numbers, payloads and
// capture-time steps. The tracker must not panic, must emit every record
// once with components that add up, and must end with an empty table.
func FuzzTracker(f *testing.F) {
	f.Add([]byte("\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte("\x12\x01\x00\x00\x00\x05\x00\x00\x00\x01HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"))
	f.Add([]byte("\x18\x00\x00\x00\x00\x01\x00\x00\x00\x01POST /u HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n" +
		"\x18\x01\x00\x00\x00\x01\x00\x00\x00\x50HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n"))
	// A TLS ClientHello's first 48 bytes, then server and client records
	// (keyless HTTPS turns).
	hello := "\x16\x03\x01\x00\x2b\x01\x00\x00\x27\x03\x03" + string(make([]byte, 32)) + "\x00\x00\x02\x13\x01"
	f.Add([]byte("\x18\x30\x00\x00\x00\x01\x00\x00\x00\x01" + hello +
		"\x18\x11\x00\x00\x00\x01\x00\x00\x00\x31\x16\x03\x03\x00\x04\x02\x00\x00\x00\x17\x03\x03\x00\x02ab" +
		"\x18\x10\x00\x00\x00\x31\x00\x00\x00\x10\x17\x03\x03\x00\x1dabcdefghijklmnopqrstuvwxyzabc"))
	// TLS 1.3 sessions whose client offered h2 and HTTP/1.1: the server
	// chose HTTP/1.1 in one and h2 in the other, which keyless timing
	// tells apart by the client's records (see tlsSettleProtocol).
	offered := func(cli, _ *tls.Config) { cli.NextProtos = []string{"h2", "http/1.1"} }
	f.Add(fuzzSessionWhole(recordTLSSessionWith(f, tls.VersionTLS13, []string{"http/1.1"}, []string{"/", "/a", "/b"}, 300, offered)))
	h2 := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	f.Add(fuzzSessionWhole(recordH2WavesOffering(f, tls.VersionTLS13, []string{"h2", "http/1.1"}, nil, h2,
		[]h2Fetch{{path: "/"}}, []h2Fetch{{path: "/a"}, {path: "/b"}})))
	// Keyless HTTP/2 turns over TLS 1.2 (ALPN shows h2 from the start),
	// answers long enough for the client's WINDOW_UPDATEs.
	h2Long := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(bytes.Repeat([]byte("y"), 40000)) })
	f.Add(fuzzSessionWhole(recordH2WavesOffering(f, tls.VersionTLS12, []string{"h2"}, nil, h2Long,
		[]h2Fetch{{path: "/"}}, []h2Fetch{{path: "/a"}, {path: "/b"}}, []h2Fetch{{path: "/c"}})))
	// Keyless 0-RTT (early data before the ServerHello, 0.5-RTT answer)
	// and a POST that waits for 100 Continue, its body in several records.
	f.Add(fuzzSession(buildEarlyFlight(f, bytes.Repeat([]byte{0x45}, 32), 700, false).writes()))
	f.Add(fuzzSessionWhole(recordPostSession(f, tls.VersionTLS13, nil, nil, true, 20000)))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzTrack(t, data, nil)
	})
}

// fuzzTrack runs one FuzzTracker input, decrypting with kl if not nil.
func fuzzTrack(t *testing.T, data []byte, kl *tlsdecrypt.KeyLog) {
	sink := &collected{}
	// A short KeyLogWait: sessions whose mutated hellos find no key hold
	// their records for it (tlskeywait.go) before going keyless.
	tr := reconstruct.NewTracker(reconstruct.Config{MaxConnections: 3, MaxBufferedBytes: 4096, MaxPendingRequests: 4, MaxHeaderBudget: 700,
		KeyLog: kl, KeyLogWait: 50 * time.Millisecond}, sink)
	clientA := netip.MustParseAddr("198.51.100.1")
	serverA := netip.MustParseAddr("203.0.113.1")
	ts := int64(1 << 60)
	var p capture.Packet
	// Each record: flags, dir/tuple byte, seq (4), ack (4), payload. The
	// IPv4 ID, TCP timestamps and SACK blocks (loss evidence) are
	// derived from the same bytes: a per-tuple counter whose step
	// comes from seq, so gaps, repeats and jumps all occur.
	ipid := map[uint16]uint16{}
	for len(data) >= 10 {
		flags, sel := data[0], data[1]
		seq := binary.BigEndian.Uint32(data[2:6])
		ack := binary.BigEndian.Uint32(data[6:10])
		data = data[10:]
		n := int(sel>>3) * 8
		if n > len(data) {
			n = len(data)
		}
		payload := data[:n]
		data = data[n:]
		port := uint16(40000 + int(sel>>1&3))
		p = capture.Packet{Timestamp: ts, Flags: flags & 0x3f, Seq: seq, Ack: ack, Payload: payload, PayloadLen: n}
		if sel&1 == 0 {
			p.SrcIP, p.DstIP, p.SrcPort, p.DstPort = clientA, serverA, port, 80
		} else {
			p.SrcIP, p.DstIP, p.SrcPort, p.DstPort = serverA, clientA, 80, port
		}
		if flags&0x80 != 0 && n > 0 {
			p.PayloadLen = n + int(ack&0xff) // snap length cut
		}
		ipid[port] += uint16(seq>>28) + 1
		p.IPID = ipid[port]
		if flags&0x40 != 0 {
			p.HasTimestamps, p.TSVal, p.TSEcr = true, uint32(ts>>20), ack^seq
		}
		if sel&0x6 == 0x6 {
			p.NumSACK = 1 + int(seq>>30)
			for i := range p.NumSACK {
				p.SACK[i] = capture.SACKBlock{Left: ack - uint32(i+1)*1000 + seq&0xfff, Right: ack - uint32(i)*1000}
			}
		}
		tr.Packet(&p)
		ts += int64(seq&0xffff) * 1000
	}
	tr.Flush()
	if st := tr.Stats(); st.OpenConnections != 0 || st.HeaderBytesHeld != 0 || st.MemoryInUse != 0 {
		t.Fatalf("after flush: %d open connections, %d header bytes held, %d B counted", st.OpenConnections, st.HeaderBytesHeld, st.MemoryInUse)
	}
	ids := map[string]bool{}
	for _, tx := range sink.txs {
		if ids[tx.ID] {
			t.Fatalf("transaction %s emitted twice", tx.ID)
		}
		ids[tx.ID] = true
		if err := tx.Invariants(); err != nil {
			t.Fatalf("%v: %+v", err, tx)
		}
	}
	conns := map[string]bool{}
	for _, c := range sink.conns {
		if conns[c.ID] {
			t.Fatalf("connection %s emitted twice", c.ID)
		}
		conns[c.ID] = true
		if err := c.Invariants(); err != nil {
			t.Fatalf("%v: %+v", err, c)
		}
	}
}

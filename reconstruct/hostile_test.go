package reconstruct_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
)

// flow drives a tracker with hand-made packets of one client connection.
type flow struct {
	tr       *reconstruct.Tracker
	out      *collected
	ts       int64
	cISN     uint32
	sISN     uint32
	client   netip.Addr
	server   netip.Addr
	cport    uint16
	cNext    uint32
	sNext    uint32
	clientID uint16
}

func newFlow(cfg reconstruct.Config) *flow {
	out := &collected{}
	return &flow{tr: reconstruct.NewTracker(cfg, out), out: out, ts: int64(1_800_000_000) * int64(time.Second),
		cISN: 1000, sISN: 5000, client: netip.MustParseAddr("198.51.100.7"), server: netip.MustParseAddr("203.0.113.1"),
		cport: 40123}
}

func (f *flow) send(fromClient bool, flags uint8, seq, ack uint32, payload []byte) {
	p := capture.Packet{Timestamp: f.ts, Flags: flags, Seq: seq, Ack: ack, Payload: payload, PayloadLen: len(payload)}
	if fromClient {
		f.clientID++
		p.SrcIP, p.DstIP, p.SrcPort, p.DstPort, p.IPID = f.client, f.server, f.cport, 80, f.clientID
	} else {
		p.SrcIP, p.DstIP, p.SrcPort, p.DstPort = f.server, f.client, 80, f.cport
	}
	f.tr.Packet(&p)
}

func (f *flow) handshake() {
	f.send(true, capture.FlagSYN, f.cISN, 0, nil)
	f.ts += int64(time.Millisecond)
	f.send(false, capture.FlagSYN|capture.FlagACK, f.sISN, f.cISN+1, nil)
	f.ts += int64(time.Millisecond)
	f.send(true, capture.FlagACK, f.cISN+1, f.sISN+1, nil)
	f.cNext, f.sNext = f.cISN+1, f.sISN+1
}

// exchange sends a request and its response a millisecond apart; the
// request acknowledges the server's stream up to ack.
func (f *flow) exchange(req, resp []byte, ack uint32) {
	f.send(true, capture.FlagACK|capture.FlagPSH, f.cNext, ack, req)
	f.cNext += uint32(len(req))
	f.ts += int64(time.Millisecond)
	f.send(false, capture.FlagACK|capture.FlagPSH, f.sNext, f.cNext, resp)
	f.sNext += uint32(len(resp))
	f.ts += int64(time.Millisecond)
}

var okResponse = []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

func (f *flow) finish(t *testing.T) {
	t.Helper()
	f.tr.Flush()
	checkInvariants(t, f.out)
}

// The same SYN copied 100,000 times within a millisecond each is one SYN:
// no losses, one time kept.
func TestDuplicateSYNsAreNotLosses(t *testing.T) {
	f := newFlow(reconstruct.Config{})
	for range 100_000 {
		f.send(true, capture.FlagSYN, f.cISN, 0, nil)
		f.ts += int64(time.Microsecond)
	}
	f.ts += int64(time.Millisecond)
	f.send(false, capture.FlagSYN|capture.FlagACK, f.sISN, f.cISN+1, nil)
	f.finish(t)
	c := one(t, "connection", f.out.conns)
	if c.SYNLosses != 0 || len(c.SYNTimes) != 1 || f.tr.Stats().DuplicateSYNs != 99_999 {
		t.Errorf("SYN losses %d, %d SYN times, %d duplicates: want 0, 1, 99999", c.SYNLosses, len(c.SYNTimes), f.tr.Stats().DuplicateSYNs)
	}
}

// A SYN sent again every 2 s, 1,000 times, is 999 losses, but the record
// keeps 16 times: the first 15 and the newest.
func TestSYNTimesAreBounded(t *testing.T) {
	f := newFlow(reconstruct.Config{IdleTimeout: time.Hour})
	start := f.ts
	for range 1000 {
		f.send(true, capture.FlagSYN, f.cISN, 0, nil)
		f.ts += int64(2 * time.Second)
	}
	last := f.ts - int64(2*time.Second)
	f.finish(t)
	c := one(t, "connection", f.out.conns)
	if c.SYNLosses != 999 || len(c.SYNTimes) != 16 || c.SYNTimes[0] != start || c.SYNTimes[15] != last ||
		f.tr.Stats().HandshakeTimesDropped != 1000-16 {
		t.Errorf("SYN losses %d, %d times (first %d, last %d), dropped %d: want 999, 16 with the first and newest, 984 dropped",
			c.SYNLosses, len(c.SYNTimes), c.SYNTimes[0]-start, c.SYNTimes[len(c.SYNTimes)-1]-start, f.tr.Stats().HandshakeTimesDropped)
	}
}

// A client that sends 5,000 pipelined requests and never acknowledges a
// response holds at most MaxPendingRequests responses: the older are
// emitted as never acknowledged, none is lost.
func TestUnacknowledgedResponsesAreBounded(t *testing.T) {
	const n = 5000
	f := newFlow(reconstruct.Config{MaxPendingRequests: 64, IdleTimeout: time.Hour})
	f.handshake()
	for i := range n {
		// Each request acknowledges nothing of the responses.
		f.exchange([]byte(fmt.Sprintf("GET /api/%d HTTP/1.1\r\nHost: x\r\n\r\n", i)), okResponse, f.sISN+1)
	}
	st := f.tr.Stats()
	f.finish(t)
	noAck := 0
	for _, tx := range f.out.txs {
		if tx.Flags&reconstruct.FlagNoAck != 0 {
			noAck++
		}
	}
	if len(f.out.txs) != n || noAck != n || st.AwaitingOverflows != n-64 {
		t.Errorf("%d transactions, %d flagged no_ack, %d overflows: want %d, %d, %d", len(f.out.txs), noAck, st.AwaitingOverflows, n, n, n-64)
	}
}

// 200,000 one-byte segments of a request arrive in descending order behind
// a hole. Their memory, not their 200 KB, meets MaxBufferedBytes: the hole
// is declared once the buffer holds about 1 MiB / (1 + 96 B) segments, the
// buffered bytes are delivered, and what comes after are copies.
func TestDescendingTinySegmentsAreBoundedByMemory(t *testing.T) {
	const n = 200_000
	f := newFlow(reconstruct.Config{MaxBufferedBytes: 1 << 20, IdleTimeout: time.Hour})
	f.handshake()
	body := make([]byte, n)
	for i := range body {
		body[i] = 'a'
	}
	for i := n - 1; i >= 1; i-- {
		f.send(true, capture.FlagACK, f.cNext+uint32(i), f.sISN+1, body[i:i+1])
		f.ts += int64(time.Microsecond)
	}
	st := f.tr.Stats()
	f.finish(t)
	if st.Holes == 0 || st.RetransSegments == 0 || st.OutOfOrderSegments > 20_000 {
		t.Errorf("holes %d, copies %d, out of order %d: want a hole declared within ~11,000 buffered segments",
			st.Holes, st.RetransSegments, st.OutOfOrderSegments)
	}
}

// BenchmarkReorder: the same 100,000 one-byte segments behind a hole,
// ascending or descending; with a B-tree both cost O(log n) per segment
// (report the ratio of the two).
func BenchmarkReorder(b *testing.B) {
	const n = 100_000
	for _, order := range []string{"ascending", "descending"} {
		b.Run(order, func(b *testing.B) {
			for range b.N {
				f := newFlow(reconstruct.Config{MaxBufferedBytes: 1 << 30, IdleTimeout: time.Hour})
				f.handshake()
				seg := []byte{'a'}
				for k := 1; k < n; k++ {
					i := k
					if order == "descending" {
						i = n - k
					}
					f.send(true, capture.FlagACK, f.cNext+uint32(i), f.sISN+1, seg)
				}
				f.tr.Flush()
			}
		})
	}
}

// BenchmarkSmallReorder: the common case, a lost segment and 30 behind it
// until the retransmission fills the hole, on many connections.
func BenchmarkSmallReorder(b *testing.B) {
	for range b.N {
		f := newFlow(reconstruct.Config{IdleTimeout: time.Hour})
		for c := range 500 {
			f.cport = uint16(20000 + c)
			f.clientID = 0
			f.handshake()
			seg := make([]byte, 1400)
			for i := 1; i <= 30; i++ {
				f.send(true, capture.FlagACK, f.cNext+uint32(i*1400), f.sISN+1, seg)
			}
			f.send(true, capture.FlagACK, f.cNext, f.sISN+1, seg)
		}
		f.tr.Flush()
	}
}

// Credentials in a captured request's URL and Referer never leave the
// tracker, unless it is asked to keep them.
func TestCapturedSecretsAreRedacted(t *testing.T) {
	for _, keep := range []bool{false, true} {
		f := newFlow(reconstruct.Config{KeepURLSecrets: keep})
		f.handshake()
		f.exchange([]byte("GET /reset?email=a%40b.c&reset_token=abc HTTP/1.1\r\nHost: x\r\n"+
			"Referer: https://x/login?password=hunter2\r\n\r\n"), okResponse, f.sNext)
		f.send(true, capture.FlagACK, f.cNext, f.sNext, nil)
		f.finish(t)
		tx := one(t, "transaction", f.out.txs)
		wantURL, wantRef := "/reset?email=a%40b.c&reset_token=REDACTED", "https://x/login?password=REDACTED"
		if keep {
			wantURL, wantRef = "/reset?email=a%40b.c&reset_token=abc", "https://x/login?password=hunter2"
		}
		if tx.URL != wantURL || tx.Referer != wantRef {
			t.Errorf("keep %v: URL %q Referer %q, want %q %q", keep, tx.URL, tx.Referer, wantURL, wantRef)
		}
	}
}

// A segment that starts far past the window the receiver offered is not
// the connection's: refused and counted, not buffered until a 100 MiB
// "hole" is declared in front of it.
func TestSegmentsBeyondTheWindowAreRefused(t *testing.T) {
	f := newFlow(reconstruct.Config{IdleTimeout: time.Hour})
	// Handshake with window scaling (7) offered by both, the server's
	// window 502 << 7 = 64 KiB.
	syn := capture.Packet{Timestamp: f.ts, Flags: capture.FlagSYN, Seq: f.cISN, WindowScale: 7, Window: 64240,
		SrcIP: f.client, DstIP: f.server, SrcPort: f.cport, DstPort: 80}
	f.tr.Packet(&syn)
	f.ts += int64(time.Millisecond)
	synack := capture.Packet{Timestamp: f.ts, Flags: capture.FlagSYN | capture.FlagACK, Seq: f.sISN, Ack: f.cISN + 1,
		WindowScale: 7, Window: 65160, SrcIP: f.server, DstIP: f.client, SrcPort: 80, DstPort: f.cport}
	f.tr.Packet(&synack)
	f.ts += int64(time.Millisecond)
	f.cNext, f.sNext = f.cISN+1, f.sISN+1
	f.send(true, capture.FlagACK, f.cNext, f.sNext, nil)
	serverAck := capture.Packet{Timestamp: f.ts, Flags: capture.FlagACK, Seq: f.sNext, Ack: f.cNext, Window: 502,
		SrcIP: f.server, DstIP: f.client, SrcPort: 80, DstPort: f.cport}
	f.tr.Packet(&serverAck)
	f.send(true, capture.FlagACK, f.cNext+100<<20, f.sNext, make([]byte, 1000)) // 100 MiB ahead
	f.exchange([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), okResponse, f.sNext)
	f.send(true, capture.FlagACK, f.cNext, f.sNext, nil)
	f.finish(t)
	st := f.tr.Stats()
	if st.OutOfWindow != 1 || st.HoleBytes != 0 || len(f.out.txs) != 1 {
		t.Errorf("out of window %d, hole bytes %d, %d transactions: want the far segment refused, no hole, the request timed",
			st.OutOfWindow, st.HoleBytes, len(f.out.txs))
	}
}

// 300 connections each stop 30 KB into a header section (under the 64 KiB
// limit): with a 1 MiB budget for all header buffers, the sections past it
// are cut and counted, and a request that fits one segment is still timed.
func TestUnfinishedHeadersShareABudget(t *testing.T) {
	f := newFlow(reconstruct.Config{MaxHeaderBudget: 1 << 20, IdleTimeout: time.Hour})
	chunk := []byte("X-Pad: " + string(make([]byte, 1393)) + "\r\n") // 1,402 bytes a line
	for i := range 300 {
		f.cport = uint16(30000 + i)
		f.clientID = 0
		f.handshake()
		f.send(true, capture.FlagACK|capture.FlagPSH, f.cNext, f.sNext, []byte("GET / HTTP/1.1\r\n"))
		f.cNext += 16
		for range 21 { // ~30 KB, never ending the section
			f.send(true, capture.FlagACK, f.cNext, f.sNext, chunk)
			f.cNext += uint32(len(chunk))
		}
		f.ts += int64(time.Millisecond)
	}
	cut := f.tr.Stats().HeadersCut
	f.cport = 65000
	f.clientID = 0
	f.handshake()
	f.exchange([]byte("GET /ok HTTP/1.1\r\nHost: x\r\n\r\n"), okResponse, f.sNext)
	f.send(true, capture.FlagACK, f.cNext, f.sNext, nil)
	f.finish(t)
	// 1 MiB holds 34 sections of 30 KB; the other 266 are cut.
	if cut < 250 {
		t.Errorf("%d header sections cut, want the ~266 past the 1 MiB budget", cut)
	}
	ok := 0
	for _, tx := range f.out.txs {
		if tx.URL == "/ok" && tx.Status == 200 {
			ok++
		}
	}
	if ok != 1 {
		t.Errorf("the one-segment request was not timed (%d)", ok)
	}
}

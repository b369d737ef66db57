package reconstruct

import (
	"net/netip"
	"testing"

	"github.com/rtmon/rtmon/capture"
)

type collectSink struct {
	conns []Connection
	txs   []Transaction
}

func (s *collectSink) Connection(c *Connection)   { s.conns = append(s.conns, *c) }
func (s *collectSink) Transaction(t *Transaction) { s.txs = append(s.txs, *t) }

// A connection holds no flowState while it is half open or established
// without data (so a SYN flood's or a pool's millions cost under 1 KiB
// each), gets one with its first data, and times its transaction as
// before: the state it gets then is the one it would have had all along.
func TestFlowStateOnlyWithData(t *testing.T) {
	const ms = int64(1e6)
	cli, srv := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("192.0.2.1")
	sink := &collectSink{}
	tr := NewTracker(Config{}, sink)
	up := func(ts int64, seq, ack uint32, flags uint8, payload string) {
		p := capture.Packet{Timestamp: ts, SrcIP: cli, DstIP: srv, SrcPort: 40000, DstPort: 80, Seq: seq, Ack: ack,
			Flags: flags, WindowScale: -1, Payload: []byte(payload), PayloadLen: len(payload)}
		tr.Packet(&p)
	}
	down := func(ts int64, seq, ack uint32, flags uint8, payload string) {
		p := capture.Packet{Timestamp: ts, SrcIP: srv, DstIP: cli, SrcPort: 80, DstPort: 40000, Seq: seq, Ack: ack,
			Flags: flags, WindowScale: -1, Payload: []byte(payload), PayloadLen: len(payload)}
		tr.Packet(&p)
	}
	only := func(when string, wantFlow bool) {
		t.Helper()
		if tr.conns.len() != 1 {
			t.Fatalf("%s: %d connections open, want 1", when, tr.conns.len())
		}
		for _, c := range tr.conns.slots {
			if c != nil && (c.flowState != nil) != wantFlow {
				t.Fatalf("%s: flowState held %v, want %v", when, c.flowState != nil, wantFlow)
			}
		}
	}
	const ack = capture.FlagACK
	up(0, 1000, 0, capture.FlagSYN, "")
	only("after the SYN", false)
	down(40*ms, 5000, 1001, capture.FlagSYN|ack, "")
	only("after the SYN/ACK", false)
	up(80*ms, 1001, 5001, ack, "")
	only("after the handshake's ACK", false)
	req := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	up(1000*ms, 1001, 5001, ack|capture.FlagPSH, req)
	only("after the request", true)
	resp := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"
	down(1100*ms, 5001, 1001+uint32(len(req)), ack|capture.FlagPSH, resp)
	up(1140*ms, 1001+uint32(len(req)), 5001+uint32(len(resp)), ack, "")
	tr.Flush()
	if len(sink.txs) != 1 {
		t.Fatalf("%d transactions, want 1", len(sink.txs))
	}
	x := sink.txs[0]
	if x.Status != 200 || x.RequestFirst != 1000*ms || x.ResponseFirst != 1100*ms || x.ResponseLast != 1100*ms {
		t.Errorf("transaction timed %+v", x)
	}
	if len(sink.conns) != 1 || sink.conns[0].Established != 80*ms || sink.conns[0].Transactions != 1 {
		t.Errorf("connection %+v", sink.conns)
	}
}

// The flowState a handshake's ACK makes and hands back (pristine) waits
// as the tracker's spare, and the connection's first data takes that same
// one again, reset: a connection makes one flowState, not three (the
// handshake's, a copy to compare it, the data's). One that holds
// something is never handed back.
func TestPristineFlowStateRecycled(t *testing.T) {
	const ms = int64(1e6)
	cli, srv := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("192.0.2.1")
	tr := NewTracker(Config{}, &collectSink{})
	send := func(port uint16, up bool, ts int64, seq, ack uint32, flags uint8, payload string) {
		p := capture.Packet{Timestamp: ts, SrcIP: cli, DstIP: srv, SrcPort: port, DstPort: 80, Seq: seq, Ack: ack,
			Flags: flags, WindowScale: -1, Payload: []byte(payload), PayloadLen: len(payload)}
		if !up {
			p.SrcIP, p.DstIP, p.SrcPort, p.DstPort = srv, cli, 80, port
		}
		tr.Packet(&p)
	}
	conn := func(port uint16) *conn {
		for _, c := range tr.conns.slots {
			if c != nil && c.rec.ClientPort == port {
				return c
			}
		}
		t.Fatalf("connection from port %d not open", port)
		return nil
	}
	const ack = capture.FlagACK
	handshake := func(port uint16, ts int64) {
		send(port, true, ts, 1000, 0, capture.FlagSYN, "")
		send(port, false, ts+40*ms, 5000, 1001, capture.FlagSYN|ack, "")
		send(port, true, ts+80*ms, 1001, 5001, ack, "")
	}
	handshake(40001, 0)
	spare := tr.spareFlow
	if spare == nil || conn(40001).flowState != nil {
		t.Fatalf("after the handshake's ACK: spare %p, the connection's flowState %p; want a spare and none held", spare, conn(40001).flowState)
	}
	spare.dataRTT = 99 // what a reset must clear
	req := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	send(40001, true, 1000*ms, 1001, 5001, ack|capture.FlagPSH, req)
	if got := conn(40001).flowState; got != spare || tr.spareFlow != nil {
		t.Fatalf("the first data took flowState %p (spare now %p), want the spare %p", got, tr.spareFlow, spare)
	}
	if conn(40001).dataRTT == 99 {
		t.Error("the spare was taken without its reset")
	}
	// A second handshake makes a new one and hands it back; the first
	// connection's, holding a request, stays its own.
	handshake(40002, 2000*ms)
	if tr.spareFlow == nil || tr.spareFlow == spare || conn(40001).flowState != spare {
		t.Errorf("after a second handshake: spare %p, first connection's flowState %p (was %p)", tr.spareFlow, conn(40001).flowState, spare)
	}
}

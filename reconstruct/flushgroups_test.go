package reconstruct

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/rtmon/rtmon/capture"
)

// taggedSink records what a tracker emits, marking where each group's
// flush ended.
type taggedSink struct{ out []string }

func (s *taggedSink) Connection(c *Connection) {
	s.out = append(s.out, fmt.Sprintf("conn %s:%d %v %d", c.Client, c.ClientPort, c.Flags, c.Transactions))
}

func (s *taggedSink) Transaction(x *Transaction) {
	s.out = append(s.out, fmt.Sprintf("tx %s:%d %s %d %d", x.Client, x.ClientPort, x.URL, x.ResponseFirst, x.BodyBytes))
}

// openConnections feeds tr twelve clients' connections, each left in the
// middle of its response (or of its request, or its handshake) at the end
// of the input, in an interleaved order.
func openConnections(tr *Tracker) {
	const ms = int64(1e6)
	srv := netip.MustParseAddr("192.0.2.1")
	for i := range 12 {
		cli := netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + i)})
		for j := range 2 {
			port := uint16(40000 + j)
			t0 := int64(i*10+j) * ms
			up := func(ts int64, seq, ack uint32, flags uint8, payload string) {
				tr.Packet(&capture.Packet{Timestamp: t0 + ts, SrcIP: cli, DstIP: srv, SrcPort: port, DstPort: 80, Seq: seq, Ack: ack,
					Flags: flags, WindowScale: -1, Payload: []byte(payload), PayloadLen: len(payload)})
			}
			down := func(ts int64, seq, ack uint32, flags uint8, payload string) {
				tr.Packet(&capture.Packet{Timestamp: t0 + ts, SrcIP: srv, DstIP: cli, SrcPort: 80, DstPort: port, Seq: seq, Ack: ack,
					Flags: flags, WindowScale: -1, Payload: []byte(payload), PayloadLen: len(payload)})
			}
			const ack = capture.FlagACK
			up(0, 1000, 0, capture.FlagSYN, "")
			down(40*ms, 5000, 1001, capture.FlagSYN|ack, "")
			if (i+j)%3 == 0 {
				continue // left in its handshake
			}
			up(80*ms, 1001, 5001, ack, "")
			req := fmt.Sprintf("GET /c%d/%d HTTP/1.1\r\nHost: x\r\n\r\n", i, j)
			up(81*ms, 1001, 5001, ack|capture.FlagPSH, req)
			if (i+j)%3 == 1 {
				continue // its request pending
			}
			resp := "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf of it"
			down(200*ms, 5001, 1001+uint32(len(req)), ack|capture.FlagPSH, resp)
		}
	}
}

// FlushGroups ends the connections Flush would, with the records Flush
// would emit, each group's in Flush's order and all of them before the
// group's done.
func TestFlushGroupsIsFlushByGroup(t *testing.T) {
	all := &taggedSink{}
	tr := NewTracker(Config{}, all)
	openConnections(tr)
	tr.Flush()

	grouped := &taggedSink{}
	tr = NewTracker(Config{}, grouped)
	openConnections(tr)
	groupOf := func(client netip.Addr, _ uint16, _ netip.Addr, _ uint16) int { return int(client.As4()[3]) % 3 }
	var ends []int
	var doneAt []int
	tr.FlushGroups(3, groupOf, nil, func(g int) { ends = append(ends, g); doneAt = append(doneAt, len(grouped.out)) })
	if !reflect.DeepEqual(ends, []int{0, 1, 2}) {
		t.Fatalf("groups done %v, want 0, 1, 2", ends)
	}
	if len(grouped.out) != len(all.out) || len(all.out) < 24+16 {
		t.Fatalf("%d records flushed by group, %d by Flush (want the same, at least 40)", len(grouped.out), len(all.out))
	}
	clientOf := func(rec string) int {
		var kind string
		var a, b, c, d, port int
		if _, err := fmt.Sscanf(rec, "%s %d.%d.%d.%d:%d", &kind, &a, &b, &c, &d, &port); err != nil {
			t.Fatalf("record %q: %v", rec, err)
		}
		return d
	}
	from := 0
	for g, end := range doneAt {
		var want []string
		for _, rec := range all.out {
			if clientOf(rec)%3 == g {
				want = append(want, rec)
			}
		}
		if got := grouped.out[from:end]; !reflect.DeepEqual(got, want) {
			t.Errorf("group %d flushed\n%v\nwant (Flush's order)\n%v", g, got, want)
		}
		from = end
	}
	if tr.conns.len() != 0 {
		t.Errorf("%d connections left open", tr.conns.len())
	}
}
